"""A large first write of a Delta table in two files: its recent head apart from the rest.

A merge rewrites every file holding a row it matches
(`pipelines/destinations/delta/merges.py`), and the rows a nightly re-reads lie within its
look-back: at the recent end of a column whose value a key never changes (`FIXED_PER_KEY`). dlt
writes a table's first load as deltalake cuts it, by size, in the order the rows came: the
self-hosted year's commit exports (one export window of every scope) as one file, which every
nightly's merge of a few thousand rows read and wrote again whole, in time and in disk space
until the table is vacuumed. Written here as two commits, the rows before the last
`heads.HEAD_SPAN` of that column, then the rows within it, a nightly's merge rewrites only
the head.

Where the head begins comes from the files' row-group statistics (no row is read). Each part
is streamed from the load job's files with a filter on the column, a batch at a time, not
through dlt's reader of the files, whose read-ahead held much of the exports: the files are
read twice. The write is our Delta job's (`pipelines/destinations/delta/destination.py`). The
first nightly into Delta is faster and holds less; the figures are in
`docs/decisions/delta-merges.md`.

A crash between the two commits leaves the table with the first part; the rerun loads the
same rows into the table that now exists, by dlt's merge, which appends the head (beyond the
stored range) and matches the rest. A table without the hint, a first write of another
disposition, a null in the column, or a write `heads.head_begins` finds no head in (few
rows, all in the head, or a head older than a nightly re-reads: a backfill's older windows,
which later windows' appends follow): dlt's write as it is; cut in two, such a window would
peak higher for no nightly's gain.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final, NamedTuple

import pyarrow as pa

from pipelines.destinations.delta.heads import head_begins
from pipelines.destinations.delta.merges import ranged_type

# a part's rows read a batch at a time, none ahead (dlt reads two batches ahead)
SCAN: Final = MappingProxyType(
    {"batch_size": 65_536, "batch_readahead": 0, "fragment_readahead": 0, "use_threads": False}
)


def written_parts(files: Any, column: str, start: pa.Scalar) -> Iterator[pa.RecordBatchReader]:
    """The rows of `files` (a dataset of Parquet files) before `start` of `column`, then the
    rows from it on: each a reader of its own, streamed from the files a batch at a time as
    it is written (`SCAN`)."""
    import pyarrow.dataset as pa_dataset

    field = pa_dataset.field(column)
    for condition in (field < start, field >= start):
        yield files.scanner(filter=condition, **SCAN).to_reader()


def head_start(files: Any, column: str, now: datetime | None = None) -> pa.Scalar | None:
    """Where the head of `files` (a dataset of Parquet files) begins (`head_begins`); None
    also when `column` has no range in them (`files_range`)."""
    found = files_range(files, column)
    if found is None:
        return None
    start = head_begins(found.rows, found.low, found.high, now)
    return None if start is None else pa.scalar(start, files.schema.field(column).type)


class ColumnRange(NamedTuple):
    """The rows of Parquet files, and the smallest and largest value of a column in them."""

    rows: int
    low: Any
    high: Any


def files_range(files: Any, column: str) -> ColumnRange | None:
    """The rows of `files` and the range of `column` in them, read from the files' row-group
    statistics (no data is read); None for a column of a type `ranged_type` refuses, a null
    in it, or a row group without statistics."""
    if column not in files.schema.names or not ranged_type(files.schema.field(column).type):
        return None
    rows, lows, highs = 0, [], []
    for fragment in files.get_fragments():
        metadata = fragment.metadata
        rows += metadata.num_rows
        if column not in metadata.schema.names:
            return None
        index = metadata.schema.names.index(column)
        for group in range(metadata.num_row_groups):
            statistics = metadata.row_group(group).column(index).statistics
            if statistics is None or not statistics.has_min_max or statistics.null_count:
                return None
            lows.append(statistics.min)
            highs.append(statistics.max)
    if not lows:
        return None
    return ColumnRange(rows, min(lows), max(highs))
