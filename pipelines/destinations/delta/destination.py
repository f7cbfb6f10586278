"""The Parquet output's destination: dlt's filesystem destination, whose Delta tables our own
job class writes and merges (`DeltaTableJob`), for our pipelines only.

dlt writes a load's rows into a Delta table in a job of its own (`DeltaLoadFilesystemJob`):
a first write with deltalake's `write_deltalake`, later loads with dlt's `merge_delta_table`.
Ours does the same, through the same public functions of dlt and deltalake, with three
differences that decide a nightly's memory and a large table's files
(docs/decisions/dlt-patches.md):

- Parquet row groups of at most `writes.ROW_GROUP_ROWS` rows (`writes.py`);
- a merge that reads only the target's range of a column fixed per key, and appends the rows
  beyond it (`merges.RangedTable`);
- a large first write's recent head in a file of its own (`first_writes.py`).

Reached through dlt's public surface only: `filesystem` below is dlt's destination factory
whose client class is `LakeClient`, which names `DeltaTableJob` as the job of a Delta table.
The factory keeps dlt's name (`filesystem`): configuration sections and the pipelines' state
read as before. Other pipelines of the process, with dlt's factory, get dlt's job as it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from threading import BoundedSemaphore
from typing import Any

import dlt
import pyarrow as pa
from dlt.common.destination.client import JobClientBase
from dlt.common.schema import Schema
from dlt.common.schema.typing import TTableSchema
from dlt.common.schema.utils import get_columns_names_with_prop
from dlt.destinations.exceptions import DestinationUndefinedEntity
from dlt.destinations.impl.filesystem.filesystem import (
    DeltaLoadFilesystemJob,
    FilesystemClient,
    ReferenceFollowupJob,
)

from pipelines.destinations.delta.first_writes import head_start, written_parts
from pipelines.destinations.delta.merges import Appending, RangedTable, appending, fixed_column
from pipelines.destinations.delta.writes import writer_properties


class DeltaTableJob(DeltaLoadFilesystemJob):
    """dlt's job writing a load's files of one table into its Delta table, written and
    merged our way (see the module). What dlt hands the job (its table's schema, its client)
    is kept as dlt hands it, through the methods that receive it."""

    table_schema: Any = None
    client: Any = None

    def set_run_vars(
        self,
        load_id: str,
        schema: Schema,
        load_table: Any,
        on_completed: Any = None,
    ) -> None:
        self.table_schema = load_table
        super().set_run_vars(load_id, schema, load_table, on_completed)

    def run_managed(self, job_client: JobClientBase, done_event: BoundedSemaphore, /) -> None:
        self.client = job_client
        super().run_managed(job_client, done_event)

    def run(self) -> None:
        """As dlt's job runs: a merge into the table where it exists and the disposition
        merges, a write otherwise (a first write, an append, a replace)."""
        from dlt.common.libs.pyarrow import get_local_dataset_reader

        client, schema, name = self.client, self.table_schema, self.load_table_name
        try:
            table = client.load_open_table("delta", name)
        except DestinationUndefinedEntity:
            table = None
        if schema["write_disposition"] == "merge" and table is not None:
            with get_local_dataset_reader(self.file_paths) as rows:
                merge(table, rows, schema, name, client.config.deltalake_streamed_exec)
            return
        target = client.get_open_table_location("delta", name) if table is None else table
        for part in first_write_parts(self.file_paths, schema):
            write(client, target, part, schema)


class LakeClient(FilesystemClient):
    """dlt's filesystem client, with `DeltaTableJob` for Delta tables."""

    @staticmethod
    def get_reference_followup_job_class(table: Any) -> type[ReferenceFollowupJob] | None:
        found = FilesystemClient.get_reference_followup_job_class(table)
        return DeltaTableJob if found is DeltaLoadFilesystemJob else found


class filesystem(dlt.destinations.filesystem):  # noqa: N801 - named as dlt's: its config section
    """dlt's filesystem destination whose Delta tables `DeltaTableJob` writes."""

    @property
    def client_class(self) -> type[FilesystemClient]:
        found = super().client_class
        return LakeClient if found is FilesystemClient else found


def merge(table: Any, rows: Any, schema: TTableSchema, name: str, streamed: bool) -> None:
    """dlt's merge of `rows` into the Delta table `table`, through `RangedTable` where the
    table has a column fixed per key (the rows read whole first: their range is needed
    before the merge), with our writer properties in any case."""
    from dlt.common.libs.deltalake import merge_delta_table

    column = fixed_column(schema)
    append: Appending | None = None
    if column is not None:
        rows = rows.read_all()
        append = appending(schema)
    target: Any = RangedTable(table, column, append)  # a DeltaTable to dlt's merge
    merge_delta_table(
        table=target, data=rows, schema=schema, load_table_name=name, streamed_exec=streamed
    )


def first_write_parts(file_paths: Any, schema: TTableSchema) -> Iterator[Any]:
    """The rows of a write, as the readers to write one after another: two for a large
    first write of a merged table with a column fixed per key (`first_writes.py`), the
    older rows then the head; else one of all the files."""
    import pyarrow.dataset as pa_dataset
    from dlt.common.libs.pyarrow import get_local_dataset_reader

    column = fixed_column(schema)
    if column is not None and schema["write_disposition"] == "merge" and file_paths:
        files = pa_dataset.dataset(list(file_paths))
        start = head_start(files, column)
        if start is not None:
            yield from written_parts(files, column, start)
            return
    with get_local_dataset_reader(file_paths) as rows:
        yield rows


def write(client: Any, target: Any, rows: pa.RecordBatchReader, schema: TTableSchema) -> None:
    """dlt's write of `rows` into the Delta table at `target` (its location, or the table),
    as `dlt.common.libs.deltalake.write_delta_table` writes, with our writer properties."""
    from deltalake import write_deltalake
    from dlt.common.libs.deltalake import (
        deltalake_storage_options,
        ensure_delta_compatible_arrow_data,
        get_delta_write_mode,
    )

    config = client.config
    partition_by = get_columns_names_with_prop(schema, "partition")
    disposition: Any = schema["write_disposition"]
    write_deltalake(  # type: ignore[call-overload]
        target,
        ensure_delta_compatible_arrow_data(rows, partition_by),
        partition_by=partition_by,
        mode=get_delta_write_mode(disposition),
        schema_mode="merge",  # as dlt: new columns join the table
        storage_options=deltalake_storage_options(
            config.credentials, config.deltalake_storage_options
        ),
        configuration=config.deltalake_configuration,
        writer_properties=writer_properties(),
    )
