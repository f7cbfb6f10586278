"""DuckDB merges that read the load's Parquet files themselves, with no staging table between.

dlt merges a table into DuckDB in two steps: each of the load's Parquet files is copied into a
table of the staging dataset (its rows written, compressed and committed to the file), then a
follow-up job deletes the staged keys from the table and inserts the staged rows. The rows are
written twice, and the staging copy is the larger half of the work. Here a merge table's
Parquet jobs only hand their files on (as dlt's Delta tables do), and the follow-up job is dlt's
own merge SQL with the staging table replaced by a query of those files: the same delete (by
merge key, `pipelines/merge_sql.py`), the same insert, hard-delete filter and transaction, one
job a table. A year of the medium self-hosted commits' last window, alone on one DuckDB thread:
0.11-0.13 s CPU against 0.21-0.29 s through staging (its parents 0.06-0.10 s against
0.09-0.14 s).

A file of another format (its rows staged, the staging table read with the files), a path the
SQL file of a follow-up job cannot carry (a `;` or a line break: dlt splits the file there), a
table with nested tables, a merge other than delete-insert, or a client derived from DuckDB's
(MotherDuck's: not measured here): dlt's way, through the staging table. A crash before the
follow-up job ran leaves it in the package with the files it names, which dlt keeps until the
package is loaded: the rerun runs it then.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, cast

if TYPE_CHECKING:
    from dlt.destinations.sql_client import SqlClientBase

_LOCK = threading.Lock()
# dlt splits a SQL job's file into statements at these (`SqlLoadJob._split_fragments`)
UNSAFE_IN_PATH: Final = (";", "\n", "\r")


def merges_from_files() -> None:
    """Have DuckDB loads of the process merge a table's Parquet files into it directly, with no
    staging copy (see the module's docstring). Idempotent."""
    from dlt.destinations.impl.duckdb.duck import DuckDbClient

    with _LOCK:
        if getattr(DuckDbClient.create_load_job, "from_files", False):
            return
        create_load_job = DuckDbClient.create_load_job
        followups = DuckDbClient.create_table_chain_completed_followup_jobs

        def handing_on(
            self: DuckDbClient, table: Any, file_path: str, load_id: str, restore: bool = False
        ) -> Any:
            from dlt.destinations.job_impl import FinalizedLoadJobWithFollowupJobs

            if read_directly(self, table, file_path):  # the merge job reads it
                return FinalizedLoadJobWithFollowupJobs(file_path, status="completed")
            return create_load_job(self, table, file_path, load_id, restore)

        def merging_files(
            self: DuckDbClient, table_chain: Sequence[Any], completed: Sequence[Any] | None = None
        ) -> Any:
            root = table_chain[0]
            own = [
                job.file_path
                for job in completed or ()
                if job.job_file_info.table_name == root["name"]
            ]
            files = [path for path in own if read_directly(self, root, path)]
            if not files:  # none handed on (a table with nested tables among them)
                return followups(self, table_chain, completed)
            # the table's other files were copied into its staging table
            return [merge_job(self, root, files, staged=len(files) < len(own))]

        handing_on.from_files = True  # type: ignore[attr-defined]
        DuckDbClient.create_load_job = handing_on  # type: ignore[method-assign]
        DuckDbClient.create_table_chain_completed_followup_jobs = merging_files  # type: ignore[method-assign,assignment]


def read_directly(client: Any, table: Any, file_path: str) -> bool:
    """Whether the merge of `table` reads this file of the load itself: a Parquet file of a
    delete-insert merge into DuckDB proper (not a client derived from it), with no nested
    table, at a path a SQL job can carry."""
    from dlt.common.schema.utils import get_nested_tables
    from dlt.common.storages.load_package import ParsedLoadJobFileName
    from dlt.destinations.impl.duckdb.duck import DuckDbClient

    if type(client) is not DuckDbClient or table.get("write_disposition") != "merge":
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
    return SqlMergeFollowupJob.from_table_chain([table], reading)


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
