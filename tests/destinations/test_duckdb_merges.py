"""DuckDB merges read the load's Parquet files themselves
(`pipelines/destinations/duckdb/merges.py`): the
rows dlt's merge through its staging table gives, with nothing written to the staging table.
Real dlt pipelines into DuckDB files through our destination factory, Arrow tables loaded as
Parquet; dlt's own factory, in the same process, merges through staging."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dlt
import duckdb
import pyarrow as pa

from pipelines.destinations.duckdb import merges as duckdb_merges

CHILDREN = {"primary_key": ("parent", "position"), "merge_key": "parent"}
FIRST = [
    {"parent": "a", "position": 0, "value": "a0", "removed": None},
    {"parent": "a", "position": 1, "value": "a1", "removed": None},
    {"parent": "a", "position": 2, "value": "a2", "removed": None},
    {"parent": "b", "position": 0, "value": "b0", "removed": None},
    {"parent": "b", "position": 1, "value": "b1", "removed": None},
]
# parent a re-read with one child left, one flagged removed; c new; b not read again
AGAIN = [
    {"parent": "a", "position": 0, "value": "a0-new", "removed": False},
    {"parent": "a", "position": 1, "value": "a1", "removed": True},
    {"parent": "c", "position": 0, "value": "c0", "removed": None},
]
MERGED = [("a", 0, "a0-new"), ("b", 0, "b0"), ("b", 1, "b1"), ("c", 0, "c0")]


def merged(
    folder: Path,
    loads: list[list[dict[str, Any]]],
    disposition: Any = "merge",
    factory: Any = duckdb_merges.duckdb,
    **hints: Any,
) -> duckdb.Connection:
    """A plain pipeline into DuckDB (`factory`: ours) after each list of rows loaded in turn
    as one Arrow table (a Parquet file) merged into `items`; the file, open read-only."""
    db_file = folder / "merges.duckdb"
    pipeline = dlt.pipeline(
        "merges",
        destination=factory(str(db_file)),
        pipelines_dir=str(folder / "pipes"),
        dataset_name="data",
    )
    for rows in loads:
        pipeline.run(
            dlt.resource(
                [pa.Table.from_pylist(rows)],
                name="items",
                write_disposition=disposition,
                columns={"removed": {"data_type": "bool", "hard_delete": True}},
                **hints,
            ),
            loader_file_format="parquet",
        )
    return duckdb.connect(str(db_file), read_only=True)


def items(con: duckdb.Connection, columns: str = "parent, position, value") -> list[Any]:
    return con.sql(f"SELECT {columns} FROM data.items ORDER BY ALL").fetchall()


def staged_rows(con: duckdb.Connection) -> int:
    found = con.execute(
        "SELECT count(*) FROM information_schema.tables "
        "WHERE table_schema = 'data_staging' AND table_name = 'items'"
    ).fetchone()
    if not found or not found[0]:
        return 0
    counted = con.execute("SELECT count(*) FROM data_staging.items").fetchone()
    return int(counted[0]) if counted else 0


def test_a_parents_children_are_replaced_from_the_files(tmp_path: Path) -> None:
    """A child table's shape (the parent as merge key): a re-read parent's rows replace all
    it had, a row flagged removed is not inserted, another parent's rows stay; the staging
    table holds none of the rows (dlt's merge leaves the last load's rows there)."""
    with merged(tmp_path, [FIRST, AGAIN], **CHILDREN) as con:
        assert items(con) == MERGED
        assert staged_rows(con) == 0


def test_a_path_a_sql_job_cannot_carry_goes_through_staging(tmp_path: Path) -> None:
    """Working folders under a path with `;` (dlt splits a SQL job's file there): dlt's merge
    through the staging table, with the same rows."""
    with merged(tmp_path / "a;b", [FIRST, AGAIN], **CHILDREN) as con:
        assert items(con) == MERGED
        assert staged_rows(con) == len(AGAIN)


def test_a_column_a_later_file_lacks_is_null_there(tmp_path: Path) -> None:
    """Each load's file has the columns its rows have: a column the table has and the file
    lacks is NULL in that file's rows, a new column is added."""
    first = [{"id": 1, "old": "x"}, {"id": 2, "old": "y"}]
    again = [{"id": 2, "new": 20}, {"id": 3, "new": 30}]
    with merged(tmp_path, [first, again], primary_key="id") as con:
        assert items(con, "id, old, new") == [(1, "x", None), (2, None, 20), (3, None, 30)]


def test_the_merge_run_twice_gives_the_same_rows(tmp_path: Path) -> None:
    """A crash after the merge committed and before dlt recorded it runs the job again on the
    rerun: the same rows, once."""
    with merged(tmp_path, [FIRST, AGAIN], **CHILDREN) as con:
        before = items(con)
    loaded = Path(tmp_path, "pipes", "merges", "load", "loaded")
    last = max(loaded.iterdir())  # the second load's package
    (sql_file,) = last.glob("completed_jobs/items.*.sql")
    # the job names its files where they were while the package loaded
    sql = sql_file.read_text().replace("/load/normalized/", "/load/loaded/")
    assert "read_parquet" in sql
    with duckdb.connect(str(tmp_path / "merges.duckdb")) as con:
        con.execute("BEGIN")
        for line in sql.splitlines():  # as dlt's SQL job runs it: a statement a line
            for statement in filter(str.strip, line.split(";")):
                con.execute(statement)
        con.execute("COMMIT")
        assert items(con) == before == MERGED


def test_dlts_own_destination_merges_through_staging(tmp_path: Path) -> None:
    """Our client is our pipelines' only: dlt's factory (another pipeline of the process)
    copies the rows into the staging table, to the same rows."""
    with merged(tmp_path, [FIRST, AGAIN], factory=dlt.destinations.duckdb, **CHILDREN) as con:
        assert items(con) == MERGED
        assert staged_rows(con) == len(AGAIN)


def merge_sql(folder: Path) -> str:
    """The SQL of the last load's merge of `items`."""
    loaded = Path(folder, "pipes", "merges", "load", "loaded")
    (sql_file,) = max(loaded.iterdir()).glob("completed_jobs/items.*.sql")
    return sql_file.read_text()


def delete_statement(sql: str) -> str:
    return next(line for line in sql.splitlines() if line.startswith("DELETE FROM"))


DEDUPLICATED = {"disposition": "merge", "strategy": "delete-insert", "deduplicated": True}


def test_declared_unique_children_are_deleted_by_the_merge_key_alone(tmp_path: Path) -> None:
    """Staged rows declared de-duplicated (as the source declares them), the merge key part
    of the primary key: the same rows, deleted by the parent alone (no OR of the two keys,
    which keeps DuckDB from a hash join)."""
    with merged(tmp_path, [FIRST, AGAIN], disposition=DEDUPLICATED, **CHILDREN) as con:
        assert items(con) == MERGED
    condition = delete_statement(merge_sql(tmp_path)).rsplit(" WHERE ", 1)[1]
    assert condition == 'd."parent" = s."parent")'


def test_a_merge_key_outside_the_primary_key_keeps_both(tmp_path: Path) -> None:
    """When the merge key is not part of the primary key, dlt's two conditions stay: a
    re-read key replaces its row, and a re-read day replaces every row of the day."""
    first = [
        {"id": 1, "day": "mon", "value": "x"},
        {"id": 2, "day": "tue", "value": "y"},
        {"id": 3, "day": "wed", "value": "z"},
    ]
    again = [{"id": 1, "day": "tue", "value": "x2"}]
    with merged(tmp_path, [first, again], DEDUPLICATED, primary_key="id", merge_key="day") as con:
        assert items(con, "id, day, value") == [(1, "tue", "x2"), (3, "wed", "z")]
    assert " OR " in delete_statement(merge_sql(tmp_path)).rsplit(" WHERE ", 1)[1]


def test_undeclared_rows_keep_the_primary_key_to_de_duplicate(tmp_path: Path) -> None:
    """Staged rows not declared de-duplicated (after an interrupted copy,
    `pipelines/runs/interrupted.py`): dlt's merge keeps one row per primary key."""
    twice = [*AGAIN, AGAIN[0]]
    with merged(tmp_path, [FIRST, twice], **CHILDREN) as con:
        assert items(con) == MERGED
    assert " OR " in delete_statement(merge_sql(tmp_path)).rsplit(" WHERE ", 1)[1]
