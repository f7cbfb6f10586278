"""The DuckDB file while other processes read it: waiting for its lock, and publishing a copy.

DuckDB locks its file per process: a connection of another process, read-only or not, keeps a
run from opening it for writing (`IO Error: Could not set lock on file "…": Conflicting lock is
held in PROGRAM (PID N)`), and a writer keeps every other process out. So every opening of the
file by a run goes through `waiting`: it retries while the file is held, with a growing pause,
up to `duckdb_lock_wait_seconds`, logging once that it waits; past that, one
`DuckDBFileHeld` naming the holder. dlt keeps an extracted package until it is loaded, so the
load step is retried as a whole (`pipeline.load()` again) and nothing extracted is lost.

`publish` writes a consistent copy of the file for readers (`publish_duckdb_to`): copied while
holding a read-only connection (no writer can start meanwhile), flushed to disk, then renamed
onto the published path, which is atomic on POSIX: a reader holding the old copy keeps reading
it, the next one opens the new. Readers of the copy never hold the loaded file.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

import dlt
import duckdb
from dlt.common import logger
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_delay

from sources.repo_analytics.config import SECTION, default_of
from sources.repo_analytics.errors import ConfigError, DuckDBFileHeld, PublishFailed
from sources.repo_analytics.reading.plan import number

T = TypeVar("T")

WAIT_KEY: Final = "duckdb_lock_wait_seconds"
PUBLISH_KEY: Final = "publish_duckdb_to"
MEMORY_KEY: Final = (
    "duckdb_memory_limit"  # checked and applied in pipelines/destinations/duckdb/memory.py
)
# settings of the pipelines, not of the source
FILE_KEYS: Final = (WAIT_KEY, PUBLISH_KEY, MEMORY_KEY)
# DuckDB's message when another process holds the file (DuckDB 1 and 2.0 alike)
HELD: Final = re.compile(
    r'Could not set lock on file "(?P<path>[^"]+)": Conflicting lock is held in '
    r"(?P<program>.*?) \(PID (?P<pid>\d+)\)"
)
FIRST_PAUSE, LONGEST_PAUSE = 0.1, 5.0  # seconds between attempts: doubling, then capped

# what a stop at each step leaves behind, for the stop's one line
PENDING_KEPT: Final = "the data extracted before is kept and lands on the next run"
NOTHING_EXTRACTED: Final = "nothing of this run was extracted yet"
EXTRACTED_KEPT: Final = "the extracted data is kept and lands on the next run"
VIEWS_LATER: Final = "the data is loaded; the next run makes the views again"
NOT_PUBLISHED: Final = "the data is loaded; the published copy stays the previous one"
NOT_RECONCILED: Final = "the data is loaded, not reconciled"
NOTHING_CHANGED: Final = "nothing was changed"
RESET_KEPT: Final = "the reset is kept and lands on the next run"


@dataclass(frozen=True)
class Holder:
    """The process holding a DuckDB file, as DuckDB's lock error names it."""

    path: str
    pid: int
    program: str

    @property
    def name(self) -> str:
        """The holder's command name (`/proc/PID/comm`), else its program as DuckDB saw it."""
        try:
            return Path(f"/proc/{self.pid}/comm").read_text(encoding="utf-8").strip()
        except OSError:
            return Path(self.program).name or self.program


def holder_of(error: BaseException) -> Holder | None:
    """The holder named by a DuckDB lock error anywhere in `error`'s chain (dlt wraps it)."""
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and not any(current is s for s in seen):
        found = HELD.search(str(current))
        if found:
            return Holder(found["path"], int(found["pid"]), found["program"])
        seen.append(current)
        current = getattr(current, "exception", None) or current.__cause__ or current.__context__
    return None


def lock_wait(values: Mapping[str, Any]) -> float:
    """`duckdb_lock_wait_seconds` of resolved settings (the default when unset), checked."""
    value = values.get(WAIT_KEY)
    return float(number(WAIT_KEY, default_of(WAIT_KEY) if value is None else value))


def configured_lock_wait() -> float:
    """The wait as configured (its variable or `.dlt/config.toml`): for `state` and `reset`,
    which take no setting flags."""
    return lock_wait({WAIT_KEY: dlt.config.get(".".join((*SECTION, WAIT_KEY)))})


def without_file_keys(source_args: Mapping[str, Any]) -> dict[str, Any]:
    """The source's arguments: the pipelines' own settings left out."""
    return {k: v for k, v in source_args.items() if k not in FILE_KEYS}


def waiting(action: Callable[[], T], seconds: float, leaves: str) -> T:
    """`action()`, again while a DuckDB file it opens is held by another process, for up to
    `seconds` in all (0: once). Past that, `DuckDBFileHeld`; `leaves` says what the stop
    leaves behind. Other errors pass at once."""
    began = time.monotonic()

    def pause(state: RetryCallState) -> float:
        wanted = min(LONGEST_PAUSE, FIRST_PAUSE * 2 ** (state.attempt_number - 1))
        return max(0.0, min(wanted, seconds - (time.monotonic() - began)))

    def announce(state: RetryCallState) -> None:
        if state.attempt_number == 1 and state.outcome is not None:
            holder = holder_of(state.outcome.exception())  # type: ignore[arg-type]
            if holder is not None:
                logger.warning(
                    f"the DuckDB file {holder.path} is held by process {holder.pid} "
                    f"({holder.name}); waiting up to {seconds:g} s ({WAIT_KEY})"
                )

    retrying = Retrying(
        retry=retry_if_exception(lambda error: holder_of(error) is not None),
        stop=stop_after_delay(seconds),
        wait=pause,
        before_sleep=announce,
        reraise=True,
    )
    try:
        result = retrying(action)
    except Exception as error:
        holder = holder_of(error)
        if holder is None:
            raise
        raise DuckDBFileHeld(
            holder.path, holder.pid, holder.name, seconds, leaves, WAIT_KEY
        ) from None
    if retrying.statistics.get("attempt_number", 1) > 1:
        logger.info(f"the DuckDB file was released after {time.monotonic() - began:.1f} s")
    return result


@dataclass(frozen=True)
class Published:
    """A copy published for readers: where, its size, and the seconds the copy took."""

    path: str
    bytes: int
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "bytes": self.bytes, "seconds": round(self.seconds, 3)}


def catalog_of(path: str | Path) -> str:
    """The catalog DuckDB names a file's database after: its name without leading dots, up
    to the first dot (`repo-analytics.duckdb`: `repo-analytics`)."""
    return Path(path).name.lstrip(".").split(".")[0]


def check_catalog(key: str, path: str | Path, dataset: str) -> None:
    """A DuckDB file whose catalog is the dataset's name is refused (`key` names the
    setting): DuckDB 2 cannot tell `<dataset>.<table>` from a table of that catalog, and the
    first load (and every reader's query) fails with `Ambiguous reference to catalog or
    schema`."""
    if catalog_of(path).casefold() == dataset.casefold():
        raise ConfigError(
            key,
            path,
            f"a file whose name, up to its first dot, is not the dataset's (`{dataset}`): "
            "DuckDB names the file's catalog after it and cannot tell the two apart; rename "
            "the file (e.g. repo-analytics.duckdb) or pass --dataset OTHER",
        )


def publish_target(value: Any, db_file: str | Path, dataset: str | None = None) -> Path | None:
    """`publish_duckdb_to` checked: None when unset; else a file path (not a folder, not the
    loaded file, not named as the dataset: see `check_catalog`) in a folder that exists or
    can be made, and can be written."""
    if value is None or str(value).strip() in ("", "none"):
        return None
    target = Path(str(value)).expanduser().absolute()
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    writable = folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)
    if target.is_dir() or not writable or target == Path(db_file).absolute():
        raise ConfigError(
            PUBLISH_KEY,
            value,
            "the path of a file (not a folder, not the --duckdb file) in a writable folder, "
            "made when missing",
        )
    if dataset is not None:
        check_catalog(PUBLISH_KEY, value, dataset)
    return target


def publish(db_file: str | Path, target: Path, seconds: float) -> Published:
    """Copy `db_file` onto `target` atomically (see the module's docstring); waits for the
    file like every opening. A file with a write-ahead log (a writer that did not close) is
    checkpointed first: a copy of the file alone would miss what the log holds."""
    source = Path(db_file).absolute()
    began = time.monotonic()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    wal = source.with_name(source.name + ".wal")
    try:
        if wal.exists():
            waiting(lambda: checkpoint(source), seconds, NOT_PUBLISHED)
        waiting(lambda: copy_held(source, partial), seconds, NOT_PUBLISHED)
        os.replace(partial, target)
        sync_folder(target.parent)
    except OSError as error:
        raise PublishFailed(str(target), error, NOT_PUBLISHED) from None
    finally:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
    return Published(str(target), target.stat().st_size, time.monotonic() - began)


def checkpoint(source: Path) -> None:
    with duckdb.connect(str(source)) as con:
        con.execute("CHECKPOINT")


def copy_held(source: Path, partial: Path) -> None:
    """Copy the file while a read-only connection holds it: no writer can start meanwhile."""
    with duckdb.connect(str(source), read_only=True):
        shutil.copyfile(source, partial)
        with open(partial, "rb+") as copied:
            os.fsync(copied.fileno())


def sync_folder(folder: Path) -> None:
    """Make a rename in `folder` durable."""
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
