"""dlt's delete-insert merge deletes by the merge key alone where it is part of the primary key
(`pipelines/merge_sql.py`): the same rows, without the OR that kept DuckDB from a hash join.
Real pipelines into DuckDB files; the SQL read is the merge job dlt ran, from its package."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dlt
import duckdb

from pipelines.merge_sql import delete_by_merge_key
from tests.extractor.helpers import bare_duckdb_pipeline


def merged(tmp_path: Path, loads: list[list[dict[str, Any]]], **keys: Any) -> tuple[list[Any], str]:
    """The rows after each list of rows merged in turn, and the SQL of the last merge."""
    delete_by_merge_key()
    pipeline, db_file = bare_duckdb_pipeline(tmp_path, "merge_sql")

    for rows in loads:
        info = pipeline.run(
            dlt.resource(rows, name="items", write_disposition="merge", **keys),
        )
    load_id = info.loads_ids[-1]
    jobs = Path(pipeline.working_dir, "load", "loaded", load_id, "completed_jobs")
    sql = "\n".join(p.read_text() for p in jobs.glob("items.*.sql"))
    with duckdb.connect(str(db_file), read_only=True) as con:
        rows = con.sql("SELECT * EXCLUDE (_dlt_id, _dlt_load_id) FROM data.items ORDER BY ALL")
        return rows.fetchall(), sql


def test_a_parents_children_are_replaced_by_the_merge_key_alone(tmp_path: Path) -> None:
    """A child table's shape: a parent's rows by position, the parent as merge key. A re-read
    parent's rows replace all it had (one of three left); another parent's rows stay."""
    first = [
        {"parent": "a", "position": 0, "value": "a0"},
        {"parent": "a", "position": 1, "value": "a1"},
        {"parent": "a", "position": 2, "value": "a2"},
        {"parent": "b", "position": 0, "value": "b0"},
        {"parent": "b", "position": 1, "value": "b1"},
    ]
    again = [{"parent": "a", "position": 0, "value": "a0-new"}]
    rows, sql = merged(
        tmp_path, [first, again], primary_key=("parent", "position"), merge_key="parent"
    )
    assert rows == [("a", 0, "a0-new"), ("b", 0, "b0"), ("b", 1, "b1")]
    delete = next(line for line in sql.splitlines() if line.startswith("DELETE FROM"))
    assert " OR " not in delete
    assert 'd."parent" = s."parent"' in delete and '"position"' not in delete


def test_a_merge_key_outside_the_primary_key_keeps_both(tmp_path: Path) -> None:
    """When the merge key is not part of the primary key, dlt's two conditions stay: a
    re-read key replaces its row, and a re-read day replaces every row of the day."""
    first = [
        {"id": 1, "day": "mon", "value": "x"},
        {"id": 2, "day": "tue", "value": "y"},
        {"id": 3, "day": "wed", "value": "z"},
    ]
    again = [{"id": 1, "day": "tue", "value": "x2"}]
    rows, sql = merged(tmp_path, [first, again], primary_key="id", merge_key="day")
    assert rows == [(1, "tue", "x2"), (3, "wed", "z")]
    delete = next(line for line in sql.splitlines() if line.startswith("DELETE FROM"))
    assert " OR " in delete


def test_installed_once() -> None:
    from dlt.destinations.sql_jobs import SqlMergeFollowupJob

    delete_by_merge_key()
    installed = SqlMergeFollowupJob.__dict__["_gen_key_table_clauses"]
    delete_by_merge_key()
    assert SqlMergeFollowupJob.__dict__["_gen_key_table_clauses"] is installed
    assert SqlMergeFollowupJob._gen_key_table_clauses(("s", "a", "b"), ("s", "a")) == [
        "{d}.s = {s}.s AND {d}.a = {s}.a"
    ]
