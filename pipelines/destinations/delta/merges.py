"""Delta merges that read only the part of the target table their rows can match.

dlt upserts a load's rows into a Delta table by primary key (`merge_delta_table` in
`dlt.common.libs.deltalake`), and deltalake's merge reads every file of the target table to
find the matches: each backfill window's merge reads all the windows before it, each
nightly's the whole table. A column whose value a row's key never changes (a commit's time, a
pull request's creation: the `FIXED_PER_KEY` hint, `Endpoint.fixed_column`) says where the
matches can be: a stored row with a key of the load holds the same value as the loaded row,
so it lies within the load's own range of that column. That range, added to the merge's
condition on the target's side, lets deltalake leave out the files whose statistics lie
outside it: the backfill's and the nightlies' merges hold much less, the larger the table the
more (`docs/decisions/delta-merges.md`).

The range needs the loaded rows' smallest and largest values first: the load's rows are read
whole before the merge (one table's rows of one load, which the merge's hash join holds
anyway). Without the hint, with a null or an unknown type in that column, the merge is dlt's.

A merge rewrites every file holding a matched row, together with all the rows it inserts, as
one file. The cloud's backfill windows overlap (its zone-less dates need 26 hours of slack), so
each window's merge matched rows of the window before and rewrote that file with its own rows:
after a year, each list table was one file of every row, which every nightly rewrote again. By
the same rule, a loaded row whose fixed value lies beyond the stored rows' range (the table's
file statistics, with a millisecond's margin for their rounding) matches no stored row: such
rows are appended as a file of their own, and only the others merged. A crash between the two
commits is mended by the rerun's load of the same rows: they lie within the range then, and are
merged. Appended rows whose recent head a nightly re-reads (a backfill's last window) are two
files, the head apart (`pipelines/destinations/delta/heads.py`): the nightly merges then copy
less than half the rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.destinations.delta.heads import head_begins
from pipelines.destinations.delta.writes import writer_properties
from sources.repo_analytics.editions.spec import FIXED_PER_KEY

# Delta's file statistics keep a timestamp to the millisecond: a stored value may lie up to
# this far beyond the statistics' bound
STATISTICS_MARGIN: Final = timedelta(milliseconds=1)


def fixed_column(table_schema: Any) -> str | None:
    """The column of a dlt table schema hinted `FIXED_PER_KEY`, if one is."""
    for name, column in table_schema.get("columns", {}).items():
        if column.get(FIXED_PER_KEY):
            return str(name)
    return None


def value_range(data: Any, column: str) -> tuple[str, str] | None:
    """SQL literals of the smallest and largest value of `column` in `data` (an Arrow table);
    None where `column_bounds` has none."""
    found = column_bounds(data, column)
    return None if found is None else (literal(found[0]), literal(found[1]))


def column_bounds(data: Any, column: str) -> tuple[datetime | date, datetime | date] | None:
    """The smallest and largest value of `column` in `data` (an Arrow table); None when it
    has no such column, a null in it, no row, or a type `ranged_type` refuses."""
    if column not in data.column_names:
        return None
    values = data.column(column)
    if not ranged_type(values.type) or values.null_count or not len(values):
        return None
    found = pc.min_max(values).as_py()
    return found["min"], found["max"]


def ranged_type(kind: pa.DataType) -> bool:
    """Whether a column of this Arrow type can bound a range here: a timestamp of at most
    microseconds (a SQL literal's precision) or a date."""
    timestamp = pa.types.is_timestamp(kind) and kind.unit in ("s", "ms", "us")
    return timestamp or pa.types.is_date(kind)


def literal(value: datetime | date) -> str:
    """A timestamp's or date's SQL literal, exact to the microsecond (and its zone, if any)."""
    return f"'{value.isoformat()}'"


def appending(table_schema: Any) -> Appending | None:
    """How rows that can match no stored row are appended to the table of `table_schema`
    instead of merged; None where dlt's merge does more than upsert them (a source filter, a
    scope on the stored rows, another strategy)."""
    if table_schema.get("x-merge-strategy") != "upsert":
        return None
    if table_schema.get("x-merge-source-filter") or table_schema.get("x-merge-destination-scope"):
        return None
    for name, column in table_schema.get("columns", {}).items():
        if column.get("hard_delete"):
            return Appending(str(name), column.get("data_type") == "bool")
    return Appending(None, False)


@dataclass(frozen=True)
class Appending:
    """Rows to append: all but those dlt's merge would not insert, its hard-delete markers
    (a bool column true; another type, any value)."""

    hard_delete: str | None
    flag: bool

    def inserted(self, rows: pa.Table) -> pa.Table:
        if self.hard_delete is None or self.hard_delete not in rows.column_names:
            return rows
        marks = rows.column(self.hard_delete)
        deleted = pc.fill_null(marks, False) if self.flag else pc.is_valid(marks)
        return rows.filter(pc.invert(deleted))


def stored_range(table: Any, column: str) -> tuple[Any, Any] | None:
    """The smallest and largest stored value of `column` (Arrow scalars), widened by
    `STATISTICS_MARGIN` for timestamps, by the table's file statistics; None when a file has
    none, or the table has no file."""
    actions = pa.table(table.get_add_actions(flatten=True))
    low, high = f"min.{column}", f"max.{column}"
    if not actions.num_rows or low not in actions.column_names or high not in actions.column_names:
        return None
    lows, highs = actions.column(low), actions.column(high)
    if lows.null_count or highs.null_count:
        return None
    least, most = pc.min(lows), pc.max(highs)
    if pa.types.is_timestamp(lows.type):
        margin = pa.scalar(STATISTICS_MARGIN, pa.duration(lows.type.unit))
        least, most = pc.subtract(least, margin), pc.add(most, margin)
    return least, most


def head_parts(rows: pa.Table, column: str) -> Iterator[pa.Table]:
    """`rows` as the files to write: the rows before their head and the head apart, where
    `heads.head_begins` finds one (`column` a timestamp or date without a null); else
    `rows` whole. Each part is filtered from `rows` when it is written."""
    found = column_bounds(rows, column)
    start = None if found is None else head_begins(rows.num_rows, *found)
    if start is None:
        yield rows
        return
    values = rows.column(column)
    head = pc.greater_equal(values, pa.scalar(start, values.type))
    yield rows.filter(pc.invert(head))
    yield rows.filter(head)


class NothingToMerge:
    """The merge of no rows: every `when_...` clause is taken, and executing it does nothing."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("when_"):
            return lambda *args, **kwargs: self
        raise AttributeError(name)

    def execute(self) -> dict[str, Any]:
        return {}


class RangedTable:
    """A Delta table whose merges write with our writer properties (where the caller gives
    none), match only target rows within the merged rows' range of `column` (where given),
    and append (`appending`) the rows beyond the stored range instead of merging them; the
    rest of the table as it is. What dlt's `merge_delta_table` is handed as its table
    (`destination.merge`)."""

    def __init__(
        self, table: Any, column: str | None = None, append: Appending | None = None
    ) -> None:
        self._table = table
        self._column = column
        self._append = append

    def merge(self, source: Any, predicate: str, *args: Any, **kwargs: Any) -> Any:
        if not args and kwargs.get("writer_properties") is None:
            kwargs["writer_properties"] = writer_properties()
        alias = kwargs.get("target_alias")
        if not alias or self._column is None:  # dlt names its target: the column is its
            return self._table.merge(source, predicate, *args, **kwargs)
        if isinstance(source, pa.RecordBatchReader):
            source = source.read_all()
        if self._append is not None:
            source = self._append_beyond(source, self._append)
            if not source.num_rows:
                return NothingToMerge()
        bounds = value_range(source, self._column)
        if bounds is not None:
            low, high = bounds
            target = f"{alias}.{self._column}"
            predicate = f"({predicate}) AND {target} >= {low} AND {target} <= {high}"
        return self._table.merge(source, predicate, *args, **kwargs)

    def _append_beyond(self, source: pa.Table, append: Appending) -> pa.Table:
        """Appends the rows of `source` beyond the stored range (those `append` inserts);
        returns the rest, to merge."""
        if self._column is None or self._column not in source.column_names:
            return source
        stored = stored_range(self._table, self._column)
        if stored is None:
            return source
        values = source.column(self._column)
        least, most = stored
        if least.type != values.type:  # the statistics of another type: no telling
            return source
        beyond = pc.or_(pc.less(values, least), pc.greater(values, most))
        if not pc.any(beyond).as_py():
            return source
        rows = append.inserted(source.filter(beyond))
        if rows.num_rows:
            from deltalake import write_deltalake

            for part in head_parts(rows, self._column):
                write_deltalake(
                    self._table,
                    part,
                    mode="append",
                    schema_mode="merge",
                    writer_properties=writer_properties(),
                )
                self._table.update_incremental()
        return source.filter(pc.invert(beyond))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)
