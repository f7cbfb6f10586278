"""The runs' reports kept in the dataset: `_repo_analytics_runs`, a row per `load`,
`backfill` or `demo` run of a SQL destination (DuckDB, Postgres), so a dashboard or BI tool
needs only the warehouse to tell when each source was last loaded, what it read and whether
the reconciliation passed (the run report file beside a DuckDB file is not in a warehouse).

A run's row is written as it ends (`ok` or `partial`, with its counts, its reconciliation
verdict and its whole run report as JSON); a backfill's also as its first window lands
(status `running`). A row still `running` is a backfill that was stopped, failed or is under
way, with some of its windows in the dataset. A run that fails before anything of it lands
writes nothing, its row neither. Recording never fails a run: a dataset that cannot be written
is a warning in the log.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from dlt.common import logger

from pipelines.destinations.duckdb.file import lock_wait, waiting
from pipelines.destinations.views import create_views, has_views
from pipelines.destinations.views_sql import dialect_of, in_dialect
from pipelines.destinations.warehouse import exclusive_load, first_line
from pipelines.runs.progress import Progress
from sources.repo_analytics.errors import DuckDBFileHeld
from sources.repo_analytics.reading.origin import source_identity
from sources.repo_analytics.report import RunReport

RUNS_TABLE: Final = "_repo_analytics_runs"
# column -> its type (DuckDB's name; transpiled for other destinations)
RUN_COLUMNS: Final[dict[str, str]] = {
    "run_id": "VARCHAR",
    "source": "VARCHAR",
    "edition": "VARCHAR",
    "pipeline_name": "VARCHAR",
    "command": "VARCHAR",
    "started_at": "TIMESTAMPTZ",
    "finished_at": "TIMESTAMPTZ",
    "status": "VARCHAR",  # running | ok | partial
    "rows_read": "BIGINT",
    "requests": "BIGINT",
    "skipped_scopes": "BIGINT",
    "load_ids": "VARCHAR",
    "reconciliation": "VARCHAR",  # PASSED | FAILED | not run
    "reconciliation_summary": "VARCHAR",
    "report": "VARCHAR",  # the run report, as `<file>.report.json` holds it
}


@dataclass
class RunRecord:
    """A run being recorded: its row's fixed values."""

    pipeline: Any
    command: str
    source: str | None
    edition: str | None
    wait: float  # the longest wait for a DuckDB file another process holds
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))


def start_run(pipeline: Any, command: str, settings: Mapping[str, Any]) -> RunRecord:
    """The record of a run starting now (nothing written yet)."""
    return RunRecord(
        pipeline, command, run_source(settings), settings.get("edition"), lock_wait(settings)
    )


class WindowsLanding(Progress):
    """A backfill's progress display, which also, when its first window lands (not one an
    earlier run finished), makes the canonical views (a backfill stopped later still has
    them: a dashboard shows what landed) and writes the run's `running` row. Both at once: a
    DuckDB file another process holds is left to the backfill, which waits for it."""

    def __init__(self, shown: Progress, run: RunRecord) -> None:
        self.shown = shown
        self.run = run
        self.recorded = False

    def planned(self, windows: int) -> None:
        self.shown.planned(windows)

    def watch(self, report: RunReport) -> None:
        self.shown.watch(report)

    def window_ended(self, outcome: Any, ended: int, total: int) -> None:
        if not outcome.resumed and not self.recorded and has_views(self.run.pipeline):
            self.recorded = True
            try:
                create_views(self.run.pipeline)
            except Exception as error:  # noqa: BLE001 - the backfill's end makes them again
                logger.info(f"the views wait for the backfill's end: {first_line(error)}")
            write_row(self.run, {"status": "running"}, wait=0.0)
        self.shown.window_ended(outcome, ended, total)


def finish_run(
    run: RunRecord, reports: Iterable[Any], check: Any, payload: Mapping[str, Any]
) -> None:
    """The run's row as it ended: its reports' counts, `check` (a Reconciliation, or None:
    not run) and `payload` (the run report) as JSON."""
    if not has_views(run.pipeline):
        return
    reports = list(reports)
    totals = [report.totals() for report in reports]
    values = {
        "finished_at": datetime.now(UTC),
        "status": "partial" if any(report.partial for report in reports) else "ok",
        "rows_read": sum(t.rows for t in totals),
        "requests": sum(t.requests for t in totals),
        "skipped_scopes": sum(len(report.skips) for report in reports),
        "load_ids": ",".join(i for report in reports for i in report.load_ids),
        "reconciliation": verdict(check),
        "reconciliation_summary": check.summary()[0] if check is not None else None,
        "report": json.dumps(payload, default=str),
    }
    write_row(run, values, wait=run.wait)


def verdict(check: Any) -> str:
    if check is None or (not check.checked and not check.rows_written):
        return "not run"
    return "PASSED" if check.ok else "FAILED"


def run_source(settings: Mapping[str, Any]) -> str | None:
    """The `source` of the run's rows (None where the settings do not name a host)."""
    base_url = settings.get("base_url")
    if not base_url:
        return None
    try:
        return source_identity(str(base_url), settings.get("workspace"))
    except Exception:  # noqa: BLE001 - the run itself reports a bad URL
        return None


def write_row(run: RunRecord, values: Mapping[str, Any], wait: float) -> None:
    """The run's row replaced by one with `values` (the other columns NULL), in a dataset that
    exists (dlt makes it: a run that made none has nothing to show); the table made when
    missing; under the dataset's load lock (other processes may record at once). A DuckDB
    file another process holds is waited for up to `wait` seconds."""
    pipeline = run.pipeline
    row = {
        "run_id": run.run_id,
        "source": run.source,
        "edition": run.edition,
        "pipeline_name": pipeline.pipeline_name,
        "command": run.command,
        "started_at": run.started_at,
        **values,
    }
    try:
        waiting(lambda: insert_row(pipeline, row), wait, "the run is not recorded")
    except DuckDBFileHeld:
        if values.get("status") != "running":
            logger.warning(f"the run was not recorded in {pipeline.dataset_name}.{RUNS_TABLE}")
    except Exception as error:  # noqa: BLE001 - recording never fails the run
        logger.warning(
            f"the run was not recorded in {pipeline.dataset_name}.{RUNS_TABLE}: {first_line(error)}"
        )


def insert_row(pipeline: Any, row: Mapping[str, Any]) -> None:
    """`row` in place of the row of its run_id, the table made when missing."""
    with exclusive_load(pipeline), pipeline.sql_client() as client:
        if not client.has_dataset():
            return
        table = client.make_qualified_table_name(RUNS_TABLE)
        columns = ", ".join(f"{name} {kind}" for name, kind in RUN_COLUMNS.items())
        create = f"CREATE TABLE IF NOT EXISTS {table} ({columns})"
        client.execute_sql(in_dialect(create, dialect_of(pipeline)))
        names, marks = ", ".join(row), ", ".join(["%s"] * len(row))
        with client.begin_transaction():
            client.execute_sql(f"DELETE FROM {table} WHERE run_id = %s", row["run_id"])
            client.execute_sql(f"INSERT INTO {table} ({names}) VALUES ({marks})", *row.values())


def save_report(db_file: Path, report: dict[str, Any]) -> Path:
    """Write the run report as JSON to `<db_file stem>.report.json` whole or not at all: into
    a file of its own, then renamed over the last run's (a run killed while writing leaves
    the last report as it was, not half of a new one)."""
    path = db_file.with_suffix(".report.json")
    partial = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    try:
        partial.write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path
