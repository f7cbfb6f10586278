"""CSV exports: read in blocks by Arrow, header read from the answer, typed by column name.

The exact header is not published, so nothing here names a column the host must send:
types come from name patterns, and the natural key from the endpoint table's candidates when
the header has them (otherwise the export window is the key, and a re-read window replaces
its rows).
"""

from __future__ import annotations

import csv
import io
import re
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from functools import lru_cache
from typing import IO, TYPE_CHECKING, Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import csv as pa_csv

from ..arrow.export_keys import ExportKeys
from ..dates import utc_from_iso, windows
from ..editions.spec import FIXED_PER_KEY, UTC_TS, Endpoint
from .context import (
    ReadContext,
    Scope,
    hand_over,
    key_texts,
    label_of,
    nullability,
    table_hints,
)
from .origin import SOURCE
from .readers import bounds, date_params

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

BATCH_ROWS: Final = 5_000
MAX_WINDOW: Final = timedelta(days=366)
SCOPE_COLUMNS: Final = ("level", "scope")  # lead every export key; one value per scope read
# (pattern on the normalised column name, Arrow type); the first match wins.
TYPE_RULES: Final = (
    (re.compile(r"(^|_)date$|_at$|timestamp"), UTC_TS),
    (re.compile(r"^merge_commit$|^is_|_flag$"), pa.bool_()),
    (re.compile(r"^lines_|_id$|_s$|_seconds$|count$"), pa.int64()),
)
TRUE_WORDS: Final = frozenset({"true", "yes", "1"})
TRUE_ARRAY: Final = pa.array(sorted(TRUE_WORDS))
# Arrow's streaming CSV reader reads up to 32 blocks ahead in a thread of its own, so small
# blocks, gathered into tables of `batch_rows` rows, bound what an export being read holds
# (`docs/decisions/csv-exports.md`).
BLOCK_BYTES: Final = 128 * 1024
# Arrow's reader has a fixed cost an export whatever its size; Python's `csv` module reads a
# small one in less, and a nightly run reads hundreds of exports of a few rows of one user
# (`docs/decisions/csv-exports.md`).
SMALL_BODY_BYTES: Final = 16 * 1024


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
    body: IO[bytes], context: dict[str, Any], batch_rows: int = BATCH_ROWS
) -> Iterator[pa.Table]:
    """Arrow tables of about `batch_rows` rows from a CSV body (a seekable file at its
    start); `context` columns first.

    Parsed by Arrow's CSV reader, all cells as text, then typed column by column
    (`typed`); a row whose cells do not match the header in number (which Arrow refuses)
    sends the rest of the export, from the first row not yet handed on, through Python's
    `csv` module, which pads a short row with empty cells and drops a long row's extra ones.
    Rows of `SMALL_BODY_BYTES` or less are read by Python's `csv` module from the start: the
    same values, sooner.
    """
    header = next(csv.reader(line.decode("utf-8-sig") for line in iter(body.readline, b"")), None)
    if header is None:
        return
    # a header column named like one the rows get (`source`, `level`, ...) is renamed
    names = unique([normalise(h) for h in header], (SOURCE, "row_number", *context))
    kinds = [type_of(n) for n in names]
    rows_start = body.tell()
    small = body.seek(0, io.SEEK_END) - rows_start <= SMALL_BODY_BYTES
    body.seek(rows_start)
    if small:
        yield from python_tables(body, names, kinds, context, 0, batch_rows)
        return
    first = 0  # rows handed on
    gathered: list[pa.RecordBatch] = []
    view = OwnPosition(body, rows_start)
    try:
        for batch in arrow_batches(view, len(names)):
            gathered.append(batch)
            if sum(b.num_rows for b in gathered) >= batch_rows:
                table = typed_table(gathered, names, kinds, context, first)
                gathered = []
                yield table
                first += table.num_rows
        if gathered:
            yield typed_table(gathered, names, kinds, context, first)
    except pa.ArrowInvalid:
        view.detach()
        body.seek(rows_start)
        yield from python_tables(body, names, kinds, context, first, batch_rows)
    finally:  # read no more once the caller is done with the body (and closes it)
        view.detach()


class OwnPosition(io.RawIOBase):
    """`body` from `start` on, read at a position of its own, for Arrow's CSV reader.

    Arrow's reader reads ahead in a thread of its own and may still be reading when a parse
    error reaches us: read straight from `body`, a late read would move the position Python's
    reader starts from, and rows would be skipped or cut (seen under load). Once `detach`ed,
    the view reads nothing more from `body`, and `detach` waits for a read under way.
    """

    def __init__(self, body: IO[bytes], start: int) -> None:
        super().__init__()
        self._body = body
        self._position = start
        self._lock = threading.Lock()
        self._detached = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        target = memoryview(buffer).cast("B")
        with self._lock:
            if self._detached:
                return 0
            self._body.seek(self._position)
            data = self._body.read(len(target))
            target[: len(data)] = data
            self._position += len(data)
            return len(data)

    def detach(self) -> None:
        """No more reads from `body`; returns once a read under way has ended."""
        with self._lock:
            self._detached = True


def arrow_batches(body: io.RawIOBase, width: int) -> Iterator[pa.RecordBatch]:
    """The rows after the header as record batches of text cells ("" for an empty one),
    one per block of `BLOCK_BYTES`."""
    reader = pa_csv.open_csv(
        body,
        read_options=pa_csv.ReadOptions(
            column_names=[f"c{i}" for i in range(width)],
            block_size=BLOCK_BYTES,
            use_threads=False,  # the scopes' readers already run in threads
        ),
        parse_options=pa_csv.ParseOptions(newlines_in_values=True),
        convert_options=pa_csv.ConvertOptions(
            column_types={f"c{i}": pa.string() for i in range(width)},
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )
    for batch in reader:
        if batch.num_rows:
            yield batch


def typed_table(
    batches: list[pa.RecordBatch],
    names: list[str],
    kinds: list[pa.DataType],
    context: dict[str, Any],
    first: int,
) -> pa.Table:
    """Batches of text cells as one table of typed columns (`typed`), with `context`."""
    cells = pa.Table.from_batches(batches).combine_chunks()
    columns = [typed(cells.column(i).chunk(0), kind) for i, kind in enumerate(kinds)]
    return with_context(columns, names, context, first)


def typed(cells: pa.Array, kind: pa.DataType) -> pa.Array:
    """Text cells as `kind`, as `convert` reads each: Arrow's casts where they read the
    same, `convert` value by value where they refuse (a timestamp without a zone, a number
    with spaces)."""
    empty = pc.equal(cells, "")
    if pa.types.is_string(kind):
        return pc.if_else(empty, pa.scalar(None, pa.string()), cells)
    if pa.types.is_boolean(kind):
        words = pc.utf8_lower(pc.utf8_trim_whitespace(cells))
        return pc.if_else(empty, pa.scalar(None, pa.bool_()), pc.is_in(words, TRUE_ARRAY))
    present = pc.if_else(empty, pa.scalar(None, pa.string()), cells)
    try:
        if pa.types.is_timestamp(kind):
            return pc.cast(pc.replace_substring(present, " ", "T", max_replacements=1), kind)
        return pc.cast(pc.cast(present, pa.float64()), kind, safe=False)  # int(float(v))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.array([convert(v, kind) for v in cells.to_pylist()], type=kind)


def with_context(
    columns: Sequence[pa.Array], names: list[str], context: dict[str, Any], first: int
) -> pa.Table:
    """The typed columns, led by the `context` columns and each row's number in the export."""
    rows = len(columns[0]) if columns else 0
    kinds = tuple(
        (key, UTC_TS if isinstance(value, datetime) else pa.string())
        for key, value in context.items()
    )
    arrays = [
        pa.repeat(pa.scalar(value, type=kind), rows)
        for (_, kind), value in zip(kinds, context.values(), strict=True)
    ]
    arrays.append(pa.array(range(first, first + rows), type=pa.int64()))
    schema = export_schema(kinds, tuple(names), tuple(c.type for c in columns))
    return pa.Table.from_arrays([*arrays, *columns], schema=schema)


@lru_cache(maxsize=64)
def export_schema(
    context: tuple[tuple[str, pa.DataType], ...],
    names: tuple[str, ...],
    kinds: tuple[pa.DataType, ...],
) -> pa.Schema:
    """An export batch's schema: one object for every batch alike (see `arrow_type_of`)."""
    fields = [pa.field(key, kind, nullable=False) for key, kind in context]
    fields.append(pa.field("row_number", pa.int64(), nullable=False))
    fields += [pa.field(n, kind) for n, kind in zip(names, kinds, strict=True)]
    return pa.schema(fields)


def python_tables(
    body: IO[bytes],
    names: list[str],
    kinds: list[pa.DataType],
    context: dict[str, Any],
    first: int,
    batch_rows: int,
) -> Iterator[pa.Table]:
    """The rows after the header from row `first` on, read by Python's `csv` module."""
    reader = csv.reader(line.decode("utf-8") for line in iter(body.readline, b""))
    batch: list[list[str]] = []
    # blank lines are no rows, as for Arrow's reader
    for number, row in enumerate(row for row in reader if row):
        if number < first:
            continue
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
    """Rows of text cells as a table; a short row is padded with empty cells."""
    columns = [
        pa.array([convert(r[index] if index < len(r) else "", kind) for r in rows], type=kind)
        for index, kind in enumerate(kinds)
    ]
    return with_context(columns, names, context, first)


def read_csv(ctx: ReadContext, endpoint: Endpoint, scope: Scope, last_value: Any) -> Iterator[Any]:
    """An export endpoint for one scope, in windows of at most 366 days, streamed."""
    label = label_of(endpoint, scope)
    since, until = bounds(ctx, endpoint, last_value)
    keys = ExportKeys(ctx.digester)  # the scope's, over its windows
    for start, end in export_windows(since, until):
        params = {**endpoint.params, **date_params(ctx, start, end)}
        context = {
            "level": scope.level,
            "scope": scope.key,
            "window_start": start,
            "window_end": end,
        }
        with ctx.client.get_body(scope.path(endpoint.path), params, label) as body:
            for table in csv_tables(body, context):
                ctx.report.count_rows(label, table.num_rows)
                yield from export_rows(ctx, table, export_hints(ctx, endpoint, table), keys)


def export_rows(ctx: ReadContext, table: pa.Table, hints: Any, keys: ExportKeys) -> Iterator[Any]:
    """An export's rows for dlt, less a row whose key the export yielded before (a host's
    error: a scope's windows do not overlap). Every destination needs it: an upsert whose
    rows repeat a key fails on Delta tables, and a delete-insert merge inserts the staged
    rows as they are (`context.table_hints`). The scope's level and key are the same on
    every row: they are left out of the digests."""
    names = [c for c in hints["primary_key"] if c != SOURCE and c not in SCOPE_COLUMNS]
    keep = keys.fresh(key_texts(table, names))
    yield from hand_over(ctx, table if keep is None else table.filter(keep), hints)


def export_hints(ctx: ReadContext, endpoint: Endpoint, table: pa.Table) -> Any:
    """The natural key when the header has it (and the fixed column); else the window,
    replaced when re-read."""
    names = set(table.column_names)
    columns = nullability(table.schema)
    if endpoint.csv_key and set(endpoint.csv_key) <= names:
        key: tuple[str, ...] = (*SCOPE_COLUMNS, *endpoint.csv_key)
        merge_key: tuple[str, ...] = ()
        fixed = endpoint.fixed_column
    else:
        key = (*SCOPE_COLUMNS, "window_start", "row_number")
        merge_key = (*SCOPE_COLUMNS, "window_start")
        fixed = None
        # a row's number names another row when the export is read again: the hint is
        # cleared, should the table's rows have had their natural key before
        if endpoint.fixed_column in columns:
            columns[endpoint.fixed_column][FIXED_PER_KEY] = False
    return table_hints(ctx, endpoint.table, key, columns, merge_key, fixed)
