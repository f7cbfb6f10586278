"""DuckDB merges that read the load's Parquet files themselves, with no staging table between.

dlt merges a table into DuckDB in two steps: each of the load's Parquet files is copied into a
table of the staging dataset (its rows written, compressed and committed to the file), then a
follow-up job deletes the staged keys from the table and inserts the staged rows. The rows are
written twice, and the staging copy is the larger half of the work. Here a merge table's
Parquet jobs only hand their files on (as dlt's Delta tables do), and the follow-up job is dlt's
own merge SQL with the staging table replaced by a query of those files: the same delete (by
merge key, `pipelines/merge_sql.py`), the same insert, hard-delete filter and transaction, one
job a table, in about half the CPU time of dlt's way (`docs/decisions/duckdb-merges.md`).

A file of another format (its rows staged, the staging table read with the files), a path the
SQL file of a follow-up job cannot carry (a `;` or a line break: dlt splits the file there), a
table with nested tables, or a merge other than delete-insert: dlt's way, through the staging
table. A crash before the follow-up job ran leaves it in the package with the files it names,
which dlt keeps until the package is loaded: the rerun runs it then.

Reached through dlt's public surface only: `duckdb` below is dlt's DuckDB destination factory
whose client class is `MergingClient`, a `DuckDbClient` overriding two of its public methods.
The factory keeps dlt's name (`duckdb`): configuration sections and the pipelines' state read
as before. Other pipelines of the process, with dlt's factory, merge as dlt does. The jobs
that only hand their files on end as they start: our load step completes them at once
(`background_load.WindowLoad`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, cast

import dlt
from dlt.destinations.impl.duckdb.duck import DuckDbClient

from pipelines.runs.interrupted import DEDUPLICATED

if TYPE_CHECKING:
    from dlt.destinations.sql_client import SqlClientBase

# dlt's SQL job splits its file into statements at these
UNSAFE_IN_PATH: Final = (";", "\n", "\r")


class MergingClient(DuckDbClient):
    """dlt's DuckDB client, whose merge tables' Parquet files are read by their merge."""

    def create_load_job(
        self, table: Any, file_path: str, load_id: str, restore: bool = False
    ) -> Any:
        """dlt's job for the file, but none for a file the table's merge reads itself."""
        from dlt.destinations.job_impl import FinalizedLoadJobWithFollowupJobs

        if read_directly(self, table, file_path):  # the merge job reads it
            return FinalizedLoadJobWithFollowupJobs(file_path, status="completed")
        return super().create_load_job(table, file_path, load_id, restore)

    def create_table_chain_completed_followup_jobs(
        self, table_chain: Sequence[Any], completed_table_chain_jobs: Sequence[Any] | None = None
    ) -> Any:
        """The merge of a table whose files it reads (`merge_job`); dlt's follow-up jobs
        otherwise."""
        root = table_chain[0]
        own = [
            job.file_path
            for job in completed_table_chain_jobs or ()
            if job.job_file_info.table_name == root["name"]
        ]
        files = [path for path in own if read_directly(self, root, path)]
        if not files:  # none handed on (a table with nested tables among them)
            return super().create_table_chain_completed_followup_jobs(
                table_chain, completed_table_chain_jobs
            )
        # the table's other files were copied into its staging table
        return [merge_job(self, root, files, staged=len(files) < len(own))]


class duckdb(dlt.destinations.duckdb):  # noqa: N801 - named as dlt's: its config section
    """dlt's DuckDB destination whose merges read the load's files (`MergingClient`)."""

    @property
    def client_class(self) -> type[DuckDbClient]:
        return MergingClient


def read_directly(client: Any, table: Any, file_path: str) -> bool:
    """Whether the merge of `table` reads this file of the load itself: a Parquet file of a
    delete-insert merge, with no nested table, at a path a SQL job can carry."""
    from dlt.common.schema.utils import get_nested_tables
    from dlt.common.storages.load_package import ParsedLoadJobFileName

    if table.get("write_disposition") != "merge":
        return False
    if table.get("x-merge-strategy", "delete-insert") != "delete-insert":
        return False
    if get_nested_tables(client.schema.tables, table["name"], include_self=False):
        return False
    if any(mark in file_path for mark in UNSAFE_IN_PATH):
        return False
    return bool(ParsedLoadJobFileName.parse(file_path).file_format == "parquet")


def merge_job(client: Any, table: Any, files: list[str], staged: bool) -> Any:
    """dlt's merge job of `table` reading `files` (and the staging table too where `staged`:
    files of other formats were copied there)."""
    from dlt.destinations.sql_jobs import SqlMergeFollowupJob

    sql_client = client.sql_client
    escape = sql_client.capabilities.escape_literal
    # every column of the table, typed by the files that have it, NULL where none has it
    columns = ", ".join(f"NULL AS {sql_client.escape_column_name(c)}" for c in table["columns"])
    listed = ", ".join(escape(path) for path in files)
    parts = [
        f"SELECT {columns} WHERE false",
        f"SELECT * FROM read_parquet([{listed}], union_by_name=true)",
    ]
    if staged:
        parts.append(f"SELECT * FROM {sql_client.get_qualified_table_names(table['name'])[1]}")
    source = "(" + " UNION ALL BY NAME ".join(parts) + ")"
    reading = cast("SqlClientBase[Any]", ReadingFiles(sql_client, source))
    return SqlMergeFollowupJob.from_table_chain([by_merge_key(table)], reading)


def by_merge_key(table: Any) -> Any:
    """The table's schema for dlt's merge SQL, its primary key left out where the merge key
    alone says which rows a load replaces and no staged row needs de-duplicating.

    A table with both keys (a child table: its own row's primary key, its parent's natural
    key as merge key) has its stored rows deleted by dlt with `EXISTS (... WHERE <primary key
    equal> OR <merge key equal>)`. Where every merge key column is part of the primary key, a
    row whose primary key matches has a matching merge key too: the OR selects exactly the
    rows of the merge key, and written with it DuckDB cannot join on a hash of the keys and
    compares row by row (docs/decisions/dlt-patches.md: a nightly's peak +25 %). dlt reads the
    primary key for nothing else in a delete-insert merge whose staged rows are declared
    de-duplicated (`deduplicated`, which `pipelines/runs/interrupted.py` takes back after an
    interrupted copy): such a table is handed to dlt's SQL without it."""
    columns = table["columns"]
    primary = {name for name, column in columns.items() if column.get("primary_key")}
    merging = {name for name, column in columns.items() if column.get("merge_key")}
    if not merging or not merging <= primary or not table.get(DEDUPLICATED):
        return table
    unkeyed = {
        name: {hint: value for hint, value in column.items() if hint != "primary_key"}
        for name, column in columns.items()
    }
    return {**table, "columns": unkeyed}


class ReadingFiles:
    """dlt's SQL client with a query in place of the staging table, for one merge's SQL."""

    def __init__(self, sql_client: Any, source: str) -> None:
        self._sql_client = sql_client
        self._source = source

    def get_qualified_table_names(self, table_name: str, *args: Any, **kwargs: Any) -> Any:
        table, _ = self._sql_client.get_qualified_table_names(table_name, *args, **kwargs)
        return table, self._source

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sql_client, name)
