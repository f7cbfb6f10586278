"""The Parquet files of Delta tables written with row groups of at most `ROW_GROUP_ROWS` rows.

deltalake writes a file's rows as one row group of up to 1,048,576 rows (the Parquet writer's
default), and holds each row group in memory until it is complete: the self-hosted medium
year's commit exports, 773,788 rows in one row group. Each merge into that table (every
nightly's) reads it back and writes it again the same way. With row groups of 65,536 rows
(DuckDB writes 122,880), measured on that table (fresh processes):
- a merge of 5,159 rows into it (4 runs each): peak RSS +271-325 -> +183-217 MB, 0.68-0.79 ->
  0.70-0.87 s;
- its first write, streamed: +445-477 -> +305-371 MB;
- the medium self-hosted year with default settings into Delta (2 interleaved pairs): peak
  656/674 -> 530/558 MB (wall 0.93/1.06x); its first nightly 736/759 -> 576/601 MB (wall
  0.99/0.87x);
- files 2-3 % larger.

dlt passes no writer properties to deltalake (neither to `write_deltalake` nor to a table's
`merge`): our Delta job passes these (`pipelines/destinations/delta/destination.py`). Given writer
properties replace deltalake's defaults whole, compression included: SNAPPY, its default, is
named again.
"""

from __future__ import annotations

from typing import Any, Final

ROW_GROUP_ROWS: Final = 65_536
COMPRESSION: Final = "SNAPPY"  # deltalake's own default, lost when writer properties are given


def writer_properties() -> Any:
    """deltalake's writer properties for our writes: smaller row groups, its compression."""
    from deltalake import WriterProperties

    return WriterProperties(max_row_group_size=ROW_GROUP_ROWS, compression=COMPRESSION)
