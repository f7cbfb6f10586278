"""Reading what a load wrote, and the UTC periods statistics come in: plain helpers shared by
the end-to-end tests of both editions."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dlt

from pipelines.runs.load import LoadResult
from simulator import Simulator
from tests.support.loader import Loader

DAY = timedelta(days=1)
# The default statistics_period (README: Configuration); `day` and `week` are explicit choices.
GRAIN = "month"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def from_ms(ms: int) -> datetime:
    """Epoch milliseconds as aware UTC, exactly (no float rounding)."""
    return EPOCH + timedelta(milliseconds=ms)


def from_z(text: str) -> datetime:
    """The API's UTC instant to the second (`2026-03-01T10:20:30Z`) as aware UTC; any other
    text is refused. `fromisoformat` after the shape check: strptime took ~20 µs an instant,
    and the truth checks parse hundreds of thousands."""
    if len(text) != 20 or text[10] != "T" or text[-1] != "Z":
        raise ValueError(f"not an API instant to the second with Z: {text!r}")
    return datetime.fromisoformat(text)


def as_utc(moment: datetime) -> datetime:
    """A cursor value as aware UTC (zone-less ones are read as UTC, as the API reads them)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def day_floor(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def period_floor(moment: datetime, grain: str = GRAIN) -> datetime:
    """The start of the UTC day, ISO week (Monday) or calendar month holding `moment`."""
    day = day_floor(moment)
    if grain == "week":
        return day - timedelta(days=day.weekday())
    return day.replace(day=1) if grain == "month" else day


def period_next(start: datetime, grain: str = GRAIN) -> datetime:
    """The start of the period after the one starting at `start`."""
    if grain == "month":
        return (start.replace(day=28) + timedelta(days=4)).replace(day=1)
    return start + (timedelta(days=7) if grain == "week" else DAY)


def days(start: datetime, clock: datetime) -> list[tuple[datetime, datetime]]:
    """UTC calendar days from the one holding `start` up to `clock`; the last may be partial."""
    return periods(start, clock, "day")


def periods(
    start: datetime, clock: datetime, grain: str = GRAIN
) -> list[tuple[datetime, datetime]]:
    """UTC calendar periods from the one holding `start` up to `clock`; the last may be
    partial."""
    out = []
    low = period_floor(start, grain)
    while low < clock:
        high = period_next(low, grain)
        out.append((low, min(high, clock)))
        low = high
    return out


def data_tables(loader: Loader) -> set[str]:
    """The dataset's data tables (not dlt's, nor the command line's run records,
    `_repo_analytics_runs`); none when the dataset (schema) was never created."""
    if loader.destination == "duckdb" and not loader.db_file.exists():
        return set()
    return {
        name
        for (name,) in loader.rows(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            f"'{loader.dataset}' AND NOT starts_with(table_name, '_') "
            "AND table_type = 'BASE TABLE'"
        )
    }


def column_types(loader: Loader, table: str) -> dict[str, str]:
    return {row[0]: row[1] for row in loader.rows(f'DESCRIBE "{table}"')}


def select(loader: Loader, table: str, columns: Iterable[str], where: str = "") -> list[tuple]:
    names = ", ".join(f'"{c}"' for c in columns)
    return loader.rows(f'SELECT {names} FROM "{table}" {where}')


def count(loader: Loader, table: str, where: str = "") -> int:
    return loader.rows(f'SELECT count(*) FROM "{table}" {where}')[0][0]


def snapshot(loader: Loader) -> dict[str, list[tuple[Any, ...]]]:
    """Every data table's full contents without dlt's own columns, sorted."""
    with loader.reading():
        out = {}
        for table in sorted(data_tables(loader)):
            columns = [c for c in column_types(loader, table) if not c.startswith("_dlt_")]
            out[table] = select(loader, table, columns, "ORDER BY ALL")
        return out


def by_key(rows: Iterable[tuple[Any, ...]], width: int) -> dict[tuple[Any, ...], tuple]:
    """Rows keyed by their first `width` values; a repeated key fails."""
    keyed: dict[tuple[Any, ...], tuple] = {}
    for row in rows:
        key = tuple(row[:width])
        assert key not in keyed, f"duplicate key {key}"
        keyed[key] = row
    return keyed


def assert_window_rows(
    got: dict[tuple, tuple],
    expected: dict[tuple, tuple[datetime, tuple]],
    since: datetime,
    must_since: datetime,
    clock: datetime,
    what: str,
) -> None:
    """Loaded rows: every expected item with instant in [must_since, clock), none outside
    [since, clock), each equal to its truth row."""
    required = {k for k, (at, _) in expected.items() if must_since <= at < clock}
    allowed = {k for k, (at, _) in expected.items() if since <= at < clock}
    missing, extra = required - set(got), set(got) - allowed
    assert not missing, f"{what}: {len(missing)} truth items not loaded, e.g. {sorted(missing)[:3]}"
    assert not extra, f"{what}: {len(extra)} rows outside the window, e.g. {sorted(extra)[:3]}"
    wrong = [(got[k], expected[k][1]) for k in got if got[k] != expected[k][1]]
    assert not wrong, f"{what}: {len(wrong)} rows differ from truth, e.g. {wrong[:2]}"


def assert_no_list_request_twice(log: list[dict[str, Any]]) -> None:
    """No page of a list is asked twice in a run (same path, same parameters): a nightly's
    discovery and its top-level resources share the top-level lists' pages."""
    asked = Counter(
        (entry["path"], tuple(sorted(entry["params"].items())))
        for entry in log
        if ".list." in entry["endpoint"]
    )
    again = {request: times for request, times in asked.items() if times > 1}
    assert not again, again
    assert asked, "no list request in the log"


def run_with_log(
    sim: Simulator,
    loader: Loader,
    **overrides: Any,
) -> tuple[LoadResult, list[dict[str, Any]]]:
    """One load, and the API requests it made (in the simulator's log)."""
    before = sim.requests()["total"]
    result = loader.load(**overrides)
    return result, sim.requests(since=before)["log"]


def folder_flags(folder: Path) -> list[str]:
    """The CLI's global options that keep a run's files in `folder` (before the command)."""
    return [
        "--duckdb",
        str(folder / "data.duckdb"),
        "--pipelines-dir",
        str(folder / "pipelines"),
        "--schemas-dir",
        str(folder / "schemas"),
        "--progress",
        "off",
    ]


def bare_duckdb_pipeline(folder: Path, name: str) -> tuple[dlt.Pipeline, Path]:
    """A plain dlt pipeline `name` (none of ours) into `<folder>/<name>.duckdb`, dataset
    `data`, its working folders under `folder`; and the file's path."""
    db_file = folder / f"{name}.duckdb"
    pipeline = dlt.pipeline(
        name,
        destination=dlt.destinations.duckdb(str(db_file)),
        pipelines_dir=str(folder / "pipes"),
        dataset_name="data",
    )
    return pipeline, db_file
