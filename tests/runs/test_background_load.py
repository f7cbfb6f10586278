"""What follows a load in its own thread (`BackgroundLoad`'s `then`, the pruning of stale child
rows on Delta tables): real dlt pipelines into real Delta tables and DuckDB files."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import deltalake
import dlt
import duckdb
import pytest

from pipelines.destinations.delta.children import lake_tables
from pipelines.runs.background_load import (
    BackgroundLoad,
    fewer_threads,
    open_between_jobs,
    threads_beside_reads,
)
from sources.repo_analytics.errors import DuckDBFileHeld
from tests.destinations.test_duckdb_lock import Holders

ROWS = [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": 3, "name": "c"}]


@dlt.resource(name="items", primary_key="id", write_disposition="merge", table_format="delta")
def items() -> Any:
    yield ROWS


def normalized(pipeline: dlt.Pipeline) -> str:
    """Extract and normalize `items` into a package of `pipeline`: its load id."""
    pipeline.extract(items())
    pipeline.normalize()
    (load_id,) = pipeline.list_normalized_load_packages()
    return load_id


def delta_pipeline(folder: Path) -> dlt.Pipeline:
    return dlt.pipeline(
        "background_then",
        pipelines_dir=str(folder / "pipelines"),
        destination=dlt.destinations.filesystem(str(folder / "lake")),
        dataset_name="data",
    )


def test_then_runs_in_the_load_thread_once_the_rows_landed(tmp_path: Path) -> None:
    """`then` runs in the load's thread, sees every row of the load in the Delta table, and
    `finish()` returns only after it ran, with the load's info."""
    pipeline = delta_pipeline(tmp_path)
    load_id = normalized(pipeline)
    location = lake_tables(pipeline, ["items"]).locations["items"]
    seen: dict[str, Any] = {}

    def then() -> None:
        seen["thread"] = threading.current_thread().name
        seen["rows"] = sorted(deltalake.DeltaTable(location).to_pyarrow_table()["id"].to_pylist())

    info = BackgroundLoad(pipeline, 0, then).finish()
    assert seen == {"thread": "repo-analytics-load", "rows": [1, 2, 3]}
    assert list(info.loads_ids) == [load_id]
    assert pipeline.list_completed_load_packages() == [load_id]


def test_a_failing_then_is_raised_by_finish_once_the_load_is_recorded(tmp_path: Path) -> None:
    """The load landed and is recorded as dlt records it (its package completed, a `load`
    step in the trace); then what `then` raised is raised, as it was."""
    pipeline = delta_pipeline(tmp_path)
    load_id = normalized(pipeline)

    def then() -> None:
        raise RuntimeError("the pruning failed")

    with pytest.raises(RuntimeError, match="^the pruning failed$"):
        BackgroundLoad(pipeline, 0, then).finish()
    assert pipeline.list_completed_load_packages() == [load_id]
    assert pipeline.list_normalized_load_packages() == []
    assert pipeline.last_trace.steps[-1].step == "load"
    assert pipeline.last_trace.steps[-1].step_exception is None
    table = deltalake.DeltaTable(lake_tables(pipeline, ["items"]).locations["items"])
    assert table.to_pyarrow_table().num_rows == len(ROWS)


def test_then_is_not_run_after_a_failed_load(tmp_path: Path) -> None:
    """A load that fails (its DuckDB file held by another process, no wait) raises as it
    did, and `then` never ran: nothing follows a load that did not land."""
    db_file = tmp_path / "held.duckdb"
    duckdb.connect(str(db_file)).close()
    pipeline = dlt.pipeline(
        "background_then_failed",
        pipelines_dir=str(tmp_path / "pipelines"),
        destination=dlt.destinations.duckdb(str(db_file)),
        dataset_name="data",
    )
    pipeline.extract(items())
    pipeline.normalize()
    ran: list[str] = []
    holders = Holders()
    try:
        reader = holders.hold(db_file)
        with pytest.raises(DuckDBFileHeld) as caught:
            BackgroundLoad(pipeline, 0, lambda: ran.append("then")).finish()
    finally:
        holders.stop_all()
    assert f"held by process {reader.pid}" in str(caught.value)
    assert ran == []
    assert len(pipeline.list_normalized_load_packages()) == 1  # kept for the next run


def duckdb_threads(connection: Any) -> int:
    (threads,) = connection.execute("SELECT current_setting('threads')").fetchone()
    return int(threads)


def test_fewer_threads_lowers_duckdbs_threads_inside_and_restores_them(tmp_path: Path) -> None:
    """DuckDB's `threads` (the database's setting, seen from another connection) is at most
    the number asked inside, and what it was after; a number above it changes nothing."""
    database = duckdb.connect(str(tmp_path / "threads.duckdb"))
    other = database.cursor()
    database.execute("SET GLOBAL threads = 3")
    with fewer_threads(database, 1):
        assert duckdb_threads(other) == 1
    assert duckdb_threads(other) == 3
    with fewer_threads(database, 5):
        assert duckdb_threads(other) == 3
    with fewer_threads(database, None):
        assert duckdb_threads(other) == 3


@pytest.mark.parametrize("own_threads", [None, 3])
def test_a_load_beside_reads_keeps_cores_for_them(tmp_path: Path, own_threads: int | None) -> None:
    """A DuckDB load beside the next window's reading runs on `threads_beside_reads()`
    threads (at least one; DuckDB's default is a thread a core), DuckDB's number again after
    it; a `threads` the user set in the credentials' `global_config` stays as set."""
    pipeline = dlt.pipeline(
        f"beside_reads_{own_threads}",
        pipelines_dir=str(tmp_path / "pipelines"),
        destination=dlt.destinations.duckdb(str(tmp_path / "d.duckdb")),
        dataset_name="data",
    )
    client_config = pipeline.destination_client().config
    if own_threads:
        client_config.credentials.global_config = {"threads": own_threads}
    pool = client_config.credentials.conn_pool
    watcher = pool.borrow_conn()  # keeps the database open across the load's borrow
    try:
        before = duckdb_threads(watcher)
        with open_between_jobs(client_config, beside_reads=True):
            inside = duckdb_threads(watcher)
        after = duckdb_threads(watcher)
        with open_between_jobs(client_config, beside_reads=False):
            alone = duckdb_threads(watcher)
    finally:
        pool.return_conn(watcher)
    assert threads_beside_reads() >= 1
    if own_threads:
        assert before == inside == after == alone == own_threads
    else:
        assert inside == min(before, threads_beside_reads())
        assert after == alone == before
