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
`merge`), so the defaults are set here, for the whole process, where none are given. Given
writer properties replace deltalake's defaults whole, compression included: SNAPPY, its
default, is named again.
"""

from __future__ import annotations

import functools
import inspect
import threading
from typing import Any, Final

ROW_GROUP_ROWS: Final = 65_536
COMPRESSION: Final = "SNAPPY"  # deltalake's own default, lost when writer properties are given

_LOCK = threading.Lock()


def writer_properties() -> Any:
    """deltalake's writer properties for our writes: smaller row groups, its compression."""
    from deltalake import WriterProperties

    return WriterProperties(max_row_group_size=ROW_GROUP_ROWS, compression=COMPRESSION)


def small_row_groups() -> None:
    """Have dlt's Delta writes and every Delta merge of the process use `writer_properties()`
    where the caller gives none. Idempotent."""
    import dlt.common.libs.deltalake as dlt_delta
    from deltalake import DeltaTable

    with _LOCK:
        if getattr(DeltaTable.merge, "small_row_groups", False):
            return
        DeltaTable.merge = with_writer_properties(DeltaTable.merge)  # type: ignore[method-assign]
        dlt_delta.write_deltalake = with_writer_properties(dlt_delta.write_deltalake)


def with_writer_properties(write: Any) -> Any:
    """`write` (deltalake's `write_deltalake` or `DeltaTable.merge`) with `writer_properties()`
    when the call gives none."""

    # where the parameter would be if given positionally (deltalake's `merge` allows it)
    position = list(inspect.signature(write).parameters).index("writer_properties")

    @functools.wraps(write)
    def writing(*args: Any, **kwargs: Any) -> Any:
        if len(args) <= position and kwargs.get("writer_properties") is None:
            kwargs["writer_properties"] = writer_properties()
        return write(*args, **kwargs)

    writing.small_row_groups = True  # type: ignore[attr-defined]
    return writing
