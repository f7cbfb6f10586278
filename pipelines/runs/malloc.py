"""The process's C allocator: fewer glibc malloc arenas for a run of many reading threads,
and Arrow's buffers taken from it (`system_arrow_pool`).

glibc gives each thread that finds the arenas busy one of its own, up to eight per core, and
an arena keeps what was freed into it for that arena's next allocations: a run's reading
threads (a dozen per export pass) left their freed pages and Arrow buffers spread over as many
arenas. Fewer arenas lower a year's peak at the same wall time
(`docs/decisions/memory-allocators.md`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator
from typing import Final

M_ARENA_MAX: Final = -8  # glibc's mallopt parameter
ARENAS: Final = 2
ARROW_POOL_VARIABLE: Final = "ARROW_DEFAULT_MEMORY_POOL"  # Arrow's own choice of pool


def limit_malloc_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas at `arenas` for the threads made from now on; call it before
    the first threads start. Not on other C libraries, and not where the environment sets
    `MALLOC_ARENA_MAX` (glibc's own variable wins). Returns whether the cap was set."""
    if not sys.platform.startswith("linux") or "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False  # a C library without mallopt
    return bool(mallopt(M_ARENA_MAX, arenas))


def system_arrow_pool() -> bool:
    """Arrow's buffers from the C allocator (glibc's malloc, under the cap above) rather than
    the mimalloc of pyarrow's Linux wheels, which keeps pages a run has freed for its own
    later use: Arrow's `ARROW_DEFAULT_MEMORY_POOL` set to `system` in this process's
    environment (and so its children's). Arrow reads it once, when pyarrow is imported, and
    its C++ code allocates from that pool whatever `pyarrow.set_memory_pool` says later
    (`load.extract_run`'s call, for callers that import pyarrow first, moves only what
    pyarrow's Python calls allocate): call it before pyarrow's import; after it, nothing is
    set. Measured on top of that call, a year peaks lower and is no slower
    (`docs/decisions/memory-allocators.md`). On Linux only (where it was measured), and not
    where the environment names a pool already (it wins). Returns whether the variable was
    set."""
    if (
        not sys.platform.startswith("linux")
        or ARROW_POOL_VARIABLE in os.environ
        or "pyarrow" in sys.modules
    ):
        return False
    os.environ[ARROW_POOL_VARIABLE] = "system"
    return True


@contextlib.contextmanager
def system_pool_while_running() -> Iterator[None]:
    """pyarrow's default pool the system's (`pyarrow.system_memory_pool`) while a run of ours
    is inside, and the pool before it again after: for callers that imported pyarrow before
    `system_arrow_pool` could set Arrow's variable (Dagster, a user's own program), where this
    moves what pyarrow's Python calls allocate (Arrow's C++ code keeps the pool it read at
    import); measured so, a year peaks lower (`docs/decisions/memory-allocators.md`). The
    process's other users of pyarrow get their pool back when the run ends; the commands set
    the variable, so there it changes nothing."""
    import pyarrow as pa

    before = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(before)
