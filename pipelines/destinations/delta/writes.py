"""The Parquet files of Delta tables written with row groups of at most `ROW_GROUP_ROWS` rows.

deltalake writes a file's rows as one row group (up to the Parquet writer's default size, a
whole year's commit exports of the self-hosted host) and holds each row group in memory until
it is complete; each merge into that table (every nightly's) reads it back and writes it
again the same way. Smaller row groups hold less, in a first write and in every merge, at
about the same wall time and for slightly larger files (`docs/decisions/delta-row-groups.md`).

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
