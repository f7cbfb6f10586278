"""The CLI caps glibc's malloc arenas and takes Arrow's buffers from the system allocator
(`pipelines/runs/malloc.py`); the environment's own `MALLOC_ARENA_MAX` and
`ARROW_DEFAULT_MEMORY_POOL` win."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.runs.malloc import ARROW_POOL_VARIABLE, limit_malloc_arenas, system_arrow_pool

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt only")
def test_the_cap_is_set_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert limit_malloc_arenas() is True


def test_the_environment_variable_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "8")
    assert limit_malloc_arenas() is False


def test_nothing_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setattr(sys, "platform", "darwin")
    assert limit_malloc_arenas() is False


def arrow_pool_after(code: str, tmp_path: Path, env: dict[str, str]) -> str:
    """The name of Arrow's default pool when `code` runs in a fresh interpreter before
    pyarrow's import."""
    script = f"{code}\nimport pyarrow as pa\nprint(pa.default_memory_pool().backend_name)"
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def environment_without_pool() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != ARROW_POOL_VARIABLE}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="set on Linux only")
def test_a_run_takes_arrow_buffers_from_the_system_allocator(tmp_path: Path) -> None:
    # a real command of the CLI, stopped by a bad value once the run's set-up is done
    run = (
        "from pipelines.cli.main import main\n"
        "main(['--pipelines-dir', 'p', 'load', '--edition', 'cloud',"
        " '--duckdb-memory-limit', 'lots'])"
    )
    env = environment_without_pool()
    assert arrow_pool_after("", tmp_path, env) != "system"  # pyarrow's own default differs
    assert arrow_pool_after(run, tmp_path, env) == "system"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="set on Linux only")
def test_the_environment_names_the_arrow_pool(tmp_path: Path) -> None:
    own = arrow_pool_after("", tmp_path, environment_without_pool())  # pyarrow's default
    env = {**environment_without_pool(), ARROW_POOL_VARIABLE: own}
    code = "from pipelines.runs.malloc import system_arrow_pool\nassert not system_arrow_pool()"
    assert arrow_pool_after(code, tmp_path, env) == own


def test_nothing_once_pyarrow_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    """Arrow has chosen its pool at import: the variable is left unset, not set too late."""
    import pyarrow  # noqa: F401  (the import under test's condition)

    monkeypatch.delenv(ARROW_POOL_VARIABLE, raising=False)
    assert system_arrow_pool() is False
    assert ARROW_POOL_VARIABLE not in os.environ


def test_a_run_in_process_takes_the_system_pool_and_gives_the_callers_back() -> None:
    """A caller that imported pyarrow first (its pool pyarrow's default): our run allocates
    from the system pool; the caller's pool is its default again after the run, also after a
    run that failed."""
    import pyarrow as pa

    from pipelines.runs.malloc import system_pool_while_running

    try:
        callers = pa.mimalloc_memory_pool()
    except NotImplementedError:
        pytest.skip("this pyarrow has no mimalloc pool to stand for a caller's own")
    before = pa.default_memory_pool()
    pa.set_memory_pool(callers)
    try:
        with pytest.raises(RuntimeError), system_pool_while_running():
            assert pa.default_memory_pool().backend_name == "system"
            raise RuntimeError("the run failed")
        assert pa.default_memory_pool().backend_name == "mimalloc"
    finally:
        pa.set_memory_pool(before)
