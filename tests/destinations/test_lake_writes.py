"""Delta tables written with bounded row groups (`pipelines/destinations/delta/writes.py`): the
first write
and the merge of our Delta job (`pipelines/destinations/delta/destination.py`) into real Delta
tables, then
a merge with properties of the caller's own; dlt's own filesystem destination, in the same
process, writes as dlt does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import deltalake
import dlt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipelines.destinations.delta import destination as lake_destination
from pipelines.destinations.delta.merges import RangedTable
from pipelines.destinations.delta.writes import COMPRESSION, ROW_GROUP_ROWS

ROWS = ROW_GROUP_ROWS * 2 + 1000  # three row groups


def layout(table: Path) -> list[tuple[int, int, str]]:
    """(rows, row groups, compression of the first column) of each current file."""
    found = []
    for uri in deltalake.DeltaTable(str(table)).file_uris():
        meta = pq.ParquetFile(uri).metadata
        found.append((meta.num_rows, meta.num_row_groups, meta.row_group(0).column(0).compression))
    return found


def rows(first: int, count: int, label: str) -> pa.Table:
    ids = pa.array(range(first, first + count), pa.int64())
    return pa.table({"id": ids, "label": pa.array([label] * count)})


def pipeline_into(tmp_path: Path, destination: Any) -> dlt.Pipeline:
    return dlt.pipeline(
        "lake_writes",
        destination=destination(bucket_url=str(tmp_path / "lake")),
        pipelines_dir=str(tmp_path / "pipelines"),
        dataset_name="lake",
    )


def test_our_delta_job_writes_and_merges_in_bounded_row_groups(tmp_path: Path) -> None:
    pipeline = pipeline_into(tmp_path, lake_destination.filesystem)

    @dlt.resource(
        table_format="delta",
        primary_key="id",
        write_disposition={"disposition": "merge", "strategy": "upsert"},
    )
    def items(data: pa.Table) -> Any:
        yield data

    pipeline.run(items(rows(0, ROWS, "first")))
    table = tmp_path / "lake" / "lake" / "items"
    assert layout(table) == [(ROWS, 3, COMPRESSION)]
    # an upsert touching rows of the one file writes it again, in bounded row groups too
    pipeline.run(items(rows(ROWS - 10, 20, "second")))
    data = deltalake.DeltaTable(str(table)).to_pyarrow_table()
    assert data.num_rows == ROWS + 10
    assert sorted(data.filter(pc.equal(data["label"], "second"))["id"].to_pylist()) == [
        *range(ROWS - 10, ROWS + 10)
    ]
    files = layout(table)
    assert sum(count for count, _, _ in files) == ROWS + 10
    assert all(g == -(-n // ROW_GROUP_ROWS) and codec == COMPRESSION for n, g, codec in files)


def test_dlts_own_destination_writes_as_dlt_does(tmp_path: Path) -> None:
    """Our job is our pipelines' only: dlt's factory (another pipeline of the process)
    writes deltalake's one row group."""
    pipeline = pipeline_into(tmp_path, dlt.destinations.filesystem)
    pipeline.run(
        [rows(0, ROWS, "first")],
        table_name="items",
        table_format="delta",
        write_disposition="append",
    )
    assert layout(tmp_path / "lake" / "lake" / "items") == [(ROWS, 1, COMPRESSION)]


def test_writer_properties_the_caller_gives_are_kept(tmp_path: Path) -> None:
    deltalake.write_deltalake(str(tmp_path / "t"), rows(0, ROWS, "a"))
    table: Any = RangedTable(deltalake.DeltaTable(str(tmp_path / "t")))
    own = deltalake.WriterProperties(max_row_group_size=ROWS, compression="ZSTD")
    merged = table.merge(
        rows(0, 5, "b"), "t.id = s.id", "s", "t", False, True, own
    )  # positionally, as deltalake allows
    merged.when_matched_update_all().execute()
    assert layout(tmp_path / "t") == [(ROWS, 1, "ZSTD")]
    table = RangedTable(deltalake.DeltaTable(str(tmp_path / "t")))
    table.merge(
        rows(0, 5, "c"),
        "t.id = s.id",
        source_alias="s",
        target_alias="t",
        writer_properties=deltalake.WriterProperties(compression="GZIP"),
    ).when_matched_update_all().execute()
    assert [codec for _, _, codec in layout(tmp_path / "t")] == ["GZIP"]
