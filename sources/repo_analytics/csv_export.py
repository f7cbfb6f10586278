"""CSV exports: streamed line by line, header read from the answer, typed by column name.

The exact header is not published, so nothing here names a column the host must send:
types come from name patterns, and the natural key from the endpoint table's candidates when
the header has them (otherwise the export window is the key, and a re-read window replaces
its rows).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, Final

import pyarrow as pa

from .context import ReadContext, Scope, emit, forget, label_of, nullability, table_hints
from .dates import utc_from_iso, windows
from .origin import SOURCE
from .readers import bounds, date_params
from .tables import Endpoint

BATCH_ROWS: Final = 5_000
MAX_WINDOW: Final = timedelta(days=366)
# (pattern on the normalised column name, Arrow type); the first match wins.
TYPE_RULES: Final = (
    (re.compile(r"(^|_)date$|_at$|timestamp"), pa.timestamp("us", tz="UTC")),
    (re.compile(r"^merge_commit$|^is_|_flag$"), pa.bool_()),
    (re.compile(r"^lines_|_id$|_s$|_seconds$|count$"), pa.int64()),
)
TRUE_WORDS: Final = frozenset({"true", "yes", "1"})


def normalise(name: str) -> str:
    """`Time to open (s)` -> `time_to_open_s`."""
    return re.sub(r"[^0-9a-z]+", "_", name.strip().lower()).strip("_") or "column"


def type_of(name: str) -> pa.DataType:
    for pattern, kind in TYPE_RULES:
        if pattern.search(name):
            return kind
    return pa.string()


def convert(value: str, kind: pa.DataType) -> Any:
    if value == "":
        return None
    if pa.types.is_timestamp(kind):
        return utc_from_iso(value.replace(" ", "T"))
    if pa.types.is_boolean(kind):
        return value.strip().lower() in TRUE_WORDS
    if pa.types.is_integer(kind):
        return int(float(value))
    return value


def export_windows(since: datetime, until: datetime) -> Iterator[tuple[datetime, datetime]]:
    """Half-open windows of at most 366 days, the CSV exports' limit."""
    return windows(since, until, MAX_WINDOW)


def csv_tables(
    lines: Iterator[bytes], context: dict[str, Any], batch_rows: int = BATCH_ROWS
) -> Iterator[pa.Table]:
    """Arrow tables of `batch_rows` rows from a streamed CSV body; `context` columns first."""
    reader = csv.reader(line.decode("utf-8-sig") for line in lines)
    header = next(reader, None)
    if header is None:
        return
    # a header column named like one the rows get (`source`, `level`, ...) is renamed
    names = unique([normalise(h) for h in header], (SOURCE, "row_number", *context))
    kinds = [type_of(n) for n in names]
    batch: list[list[str]] = []
    first = 0
    for row in reader:
        batch.append(row)
        if len(batch) >= batch_rows:
            yield to_table(batch, names, kinds, context, first)
            first += len(batch)
            batch = []
    if batch:
        yield to_table(batch, names, kinds, context, first)


def unique(names: Sequence[str], taken: Sequence[str] = ()) -> list[str]:
    seen: dict[str, int] = dict.fromkeys(taken, 1)
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}_{seen[name]}")
    return out


def to_table(
    rows: list[list[str]],
    names: list[str],
    kinds: list[pa.DataType],
    context: dict[str, Any],
    first: int,
) -> pa.Table:
    arrays: list[pa.Array] = []
    fields: list[pa.Field] = []
    for key, value in context.items():
        kind = pa.timestamp("us", tz="UTC") if isinstance(value, datetime) else pa.string()
        fields.append(pa.field(key, kind, nullable=False))
        arrays.append(pa.array([value] * len(rows), type=kind))
    fields.append(pa.field("row_number", pa.int64(), nullable=False))
    arrays.append(pa.array(range(first, first + len(rows)), type=pa.int64()))
    for index, (name, kind) in enumerate(zip(names, kinds, strict=True)):
        fields.append(pa.field(name, kind))
        arrays.append(
            pa.array([convert(r[index] if index < len(r) else "", kind) for r in rows], type=kind)
        )
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def read_csv(ctx: ReadContext, endpoint: Endpoint, scope: Scope, last_value: Any) -> Iterator[Any]:
    """An export endpoint for one scope, in windows of at most 366 days, streamed."""
    label = label_of(endpoint, scope)
    since, until = bounds(ctx, endpoint, last_value)
    for start, end in export_windows(since, until):
        params = {**endpoint.params, **date_params(ctx, start, end)}
        lines = ctx.client.get_lines(scope.path(endpoint.path), params, label)
        context = {
            "level": scope.level,
            "scope": scope.key,
            "window_start": start,
            "window_end": end,
        }
        for table in csv_tables(lines, context):
            ctx.report.count_rows(label, table.num_rows)
            yield from emit(ctx, table, export_hints(ctx, endpoint, table), scope)
    forget(ctx, endpoint.table, scope)  # a scope's export is read once a run


def export_hints(ctx: ReadContext, endpoint: Endpoint, table: pa.Table) -> Any:
    """The natural key when the header has it; else the window, replaced when re-read."""
    names = set(table.column_names)
    if endpoint.csv_key and set(endpoint.csv_key) <= names:
        key: tuple[str, ...] = ("level", "scope", *endpoint.csv_key)
        merge_key: tuple[str, ...] = ()
    else:
        key = ("level", "scope", "window_start", "row_number")
        merge_key = ("level", "scope", "window_start")
    return table_hints(ctx, endpoint.table, key, nullability(table.schema), merge_key)
