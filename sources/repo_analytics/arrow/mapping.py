"""The one mapper from items (decoded JSON objects) to Arrow tables, and of their lists to
child tables.

A page is read into Arrow in one conversion: its items as one struct array of the paths the
columns read (`raw_type`), each column then taken out of it and converted by Arrow kernels
(timestamps, list lengths). What Arrow cannot read that way (a value of another type than
the path's, a converter without an Arrow form) is read as `Column.read` reads it, a column at
a time. Either way the result is what `Column.read`, item by item, gives. A list page that
Arrow's JSON reader decoded (`arrow/pages.py`) comes as that struct array already (`ArrowItems`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import cached_property, lru_cache
from itertools import repeat
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from ..dates import naive_local, utc_from_epoch_ms, utc_from_iso
from ..editions.spec import (
    LIST_OF_ANY,
    REMOVED,
    ChildTable,
    Column,
    Context,
    count_of,
    first_href,
    is_merge,
)

# What Arrow cannot convert from a page's items (a value of another type than its path's)
CONVERSION_ERRORS: Final = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError)


class ArrowItems(Sequence[Any]):
    """A page's items as one struct array (`raw`) of the paths its tables read, decoded by
    Arrow (`arrow/pages.py`); read here as the decoded items would be."""

    def __init__(self, raw: pa.StructArray) -> None:
        self.raw = raw

    @cached_property
    def leaves(self) -> dict[tuple[str, ...], pa.Array] | None:
        """`fields_of(raw)`, once: the page's table and each of its child tables read them."""
        return fields_of(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return ArrowItems(self.raw[index])
        return self.raw[index].as_py()

    def __iter__(self) -> Iterator[Any]:
        return iter(self.raw.to_pylist())

    def filter(self, keep: pa.Array) -> ArrowItems:
        return ArrowItems(self.raw.filter(keep))


@lru_cache(maxsize=256)
def arrow_type_of(columns: tuple[Column, ...]) -> pa.Schema:
    """The Arrow schema of `columns`: one object per column set, so that every page of an
    endpoint shares its fields and Arrow compares their schemas by cached fingerprints (a
    fresh schema's fingerprint, per page and table, showed in a nightly's profile)."""
    return pa.schema([pa.field(c.name, c.type, nullable=c.nullable) for c in columns])


def cast_array(values: pa.Array, kind: pa.DataType) -> pa.Array:
    """Text as timestamps: ISO with a zone as UTC, zone-less as zone-less (Arrow refuses a
    text it would read otherwise than the converter: then read value by value)."""
    return pc.cast(values, kind)


def epoch_ms_array(values: pa.Array, kind: pa.DataType) -> pa.Array:
    return pc.cast(values.cast(pa.timestamp("ms", tz="UTC")), kind)


def count_array(values: pa.Array, kind: pa.DataType) -> pa.Array:
    return pc.list_value_length(values).cast(kind)


def merge_array(values: pa.Array, kind: pa.DataType) -> pa.Array:
    return pc.greater(pc.list_value_length(values), 1).cast(kind)


LINKS: Final = pa.struct([("self", pa.list_(pa.struct([("href", pa.string())])))])


def first_href_array(values: pa.Array, kind: pa.DataType) -> pa.Array:
    """Each links object's first `self` link's href; a list whose first entry is null (the
    converter skips it) is refused, then read value by value."""
    links = values.flatten()[values.type.get_field_index("self")]
    has_entries = pc.greater(pc.list_value_length(links).fill_null(0), 0)
    starts = pc.if_else(has_entries, links.offsets[:-1], pa.scalar(None, pa.int32()))
    firsts = links.values.take(starts)
    if pc.any(pc.and_(has_entries, pc.is_null(firsts))).as_py():
        raise pa.ArrowInvalid("a null link entry first")
    return firsts.flatten()[0].cast(kind)


# converter -> (the type Arrow reads the JSON value as, the Arrow form of the converter); a
# timestamp Arrow reads otherwise than the converter is refused, then read value by value
VECTORISED: Final[
    dict[Callable[[Any], Any], tuple[pa.DataType, Callable[[pa.Array, pa.DataType], pa.Array]]]
] = {
    utc_from_iso: (pa.string(), cast_array),
    utc_from_epoch_ms: (pa.int64(), epoch_ms_array),
    naive_local: (pa.string(), cast_array),
    count_of: (LIST_OF_ANY, count_array),
    is_merge: (LIST_OF_ANY, merge_array),
    first_href: (LINKS, first_href_array),
}


def read_as(c: Column) -> pa.DataType | None:
    """The type Arrow reads the column's JSON value as, None where it cannot (a converter
    without an Arrow form, a context value)."""
    if c.from_context or not c.path:
        return None
    if c.convert is None:
        return c.type
    found = VECTORISED.get(c.convert)
    return None if found is None else found[0]


@lru_cache(maxsize=256)
def raw_type(columns: tuple[Column, ...]) -> pa.StructType | None:
    """The struct type a page's items are read into at once: each column's path with the type
    Arrow reads its value as; None where two columns read one path differently (none does)."""
    tree: dict[str, Any] = {}
    for c in columns:
        kind = read_as(c)
        if kind is None:
            continue
        node = tree
        for key in c.path[:-1]:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                return None
        leaf = c.path[-1]
        if node.get(leaf, kind) != kind:
            return None
        node[leaf] = kind
    return struct_of(tree)


def struct_of(tree: dict[str, Any]) -> pa.StructType:
    return pa.struct(
        [(name, struct_of(v) if isinstance(v, dict) else v) for name, v in tree.items()]
    )


def read_raw(items: Sequence[Any], columns: tuple[Column, ...]) -> pa.StructArray | None:
    """The items as one struct array of `raw_type`, or None where Arrow cannot read them so."""
    kind = raw_type(columns)
    if kind is None or not kind.num_fields:
        return None
    try:
        return pa.array(items, type=kind)
    except CONVERSION_ERRORS:
        return None


def fields_of(raw: pa.StructArray | None) -> dict[tuple[str, ...], pa.Array] | None:
    """Each leaf of a struct array by its path, its parents' nulls applied (`flatten`)."""
    if raw is None:
        return None
    found: dict[tuple[str, ...], pa.Array] = {}
    todo: list[tuple[tuple[str, ...], pa.StructArray]] = [((), raw)]
    while todo:
        prefix, node = todo.pop()
        for field, values in zip(node.type, node.flatten(), strict=True):
            path = (*prefix, field.name)
            if pa.types.is_struct(field.type):
                todo.append((path, values))
            found[path] = values
    return found


def to_arrow(items: Sequence[Any], columns: Sequence[Column], context: Context) -> pa.Table:
    """Items as an Arrow table with the declared column types: each column as
    `Column.read` reads each item."""
    raw = (
        items.leaves
        if isinstance(items, ArrowItems)
        else fields_of(read_raw(items, tuple(columns)))
    )
    arrays = [column_array(c, items, context, raw) for c in columns]
    return pa.Table.from_arrays(arrays, schema=arrow_type_of(tuple(columns)))


def series_to_arrow(
    items: Sequence[Any], columns: Sequence[Column], contexts: Sequence[Context]
) -> pa.Table:
    """Items each with a context of its own (a statistics series: each answer its period) as
    one table, built a column at a time: equal to each item's `to_arrow` concatenated."""
    if len(items) != len(contexts):
        raise ValueError(f"{len(items)} items with {len(contexts)} contexts")
    raw = fields_of(read_raw(items, tuple(columns)))
    arrays = [
        pa.array([c.read({}, context) for context in contexts], type=c.type)
        if c.from_context
        else column_array(c, items, {}, raw)
        for c in columns
    ]
    return pa.Table.from_arrays(arrays, schema=arrow_type_of(tuple(columns)))


def column_array(
    c: Column,
    items: Sequence[Any],
    context: Context,
    raw: dict[tuple[str, ...], pa.Array] | None = None,
) -> pa.Array:
    """`[c.read(item, context) for item in items]` as an array of `c.type`: taken from the
    page's struct array (`raw`: its leaves by path) where it holds the column, else read with
    one pass over the items; then converted by Arrow where it reads values as `c.convert`
    does (ISO timestamps with a zone, epoch milliseconds, zone-less local times, list
    lengths), else value by value (Arrow refuses what it would read differently)."""
    if c.from_context:
        return pa.array([c.read({}, context)] * len(items), type=c.type)
    values: pa.Array | list[Any]
    if raw is not None and read_as(c) is not None:
        values = raw[c.path]
    else:
        values = values_at(items, c.path)
    if c.convert is None:
        return values if isinstance(values, pa.Array) else pa.array(values, type=c.type)
    vectorised = VECTORISED.get(c.convert)
    if vectorised is not None:
        try:
            if not isinstance(values, pa.Array):
                values = pa.array(values, vectorised[0])
            return vectorised[1](values, c.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            pass
    plain = values.to_pylist() if isinstance(values, pa.Array) else values
    return pa.array([None if v is None else c.convert(v) for v in plain], type=c.type)


def values_at(items: Sequence[Any], path: tuple[str, ...]) -> list[Any]:
    """The value at `path` of each item (None where a step is missing or not an object)."""
    if not path:
        return list(items)
    first, rest = path[0], path[1:]
    values = [item.get(first) if isinstance(item, dict) else None for item in items]
    for key in rest:
        values = [v.get(key) if isinstance(v, dict) else None for v in values]
    return values


def child_rows(
    items: Sequence[Any], parent: pa.Table, child: ChildTable, context: Context
) -> pa.Table:
    """Rows of a child table: the parent's key columns, a position, the child's columns.

    A parent whose list is empty gets one marker row (position -1, `removed` true): with
    dlt's hard-delete hint on `removed`, it deletes the children that parent had before and
    is itself never stored, so an emptied list replaces the old one too. Each list entry that
    is null is a row with `removed` true and no values.
    """
    entries = None
    if isinstance(items, ArrowItems):  # its type holds the child's list (`arrow/pages.py`)
        entries = (items.leaves or {})[child.list_path]
    else:
        lists = values_at(items, child.list_path)
        element = raw_type(child.columns)
        if element is not None and all(
            read_as(c) is not None or c.from_context for c in child.columns
        ):
            try:
                entries = pa.array(lists, type=pa.list_(element))
            except CONVERSION_ERRORS:
                entries = None
        if entries is None:
            return child_rows_by_entry(lists, parent, child, context)
    owners, positions, taken, removed = exploded(entries)
    return child_table(parent, child, context, owners, positions, taken, removed)


def exploded(entries: pa.ListArray) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
    """A list array's child rows, in order: each row's parent index, its position in the
    list (-1: the marker row of an empty or missing list), its entry (null for a marker) and
    whether it is removed (a marker, or a null entry).

    Each Arrow call costs the reading thread interpreter time whatever the page's size, so
    where no list is empty or missing (a page of commits' parents, as a rule) the rows are
    the lists' entries as they are, in a few calls, rather than computing where each row's
    entry is, as a page with a marker needs (`docs/decisions/arrow-decoding.md`)."""
    lengths = pc.list_value_length(entries).fill_null(0)  # a missing list has no entries
    empty = pc.equal(lengths, pa.scalar(0, lengths.type))
    if not pc.any(empty).as_py():
        owners = pc.list_parent_indices(entries)
        taken = entries.flatten()
        starts = pc.take(entries.offsets, owners)  # each row's list's first entry's offset
        first = entries.offsets[0].as_py()
        positions = pc.subtract(counting(first, len(taken), starts.type), starts)
        removed = pc.is_null(taken) if taken.null_count else pa.repeat(False, len(taken))
        return owners, positions, taken, removed
    counts = pc.max_element_wise(lengths, 1)  # an empty list: its one marker row
    ends = pc.cumulative_sum(counts)
    rows = ends[-1].as_py()
    # each row's parent: a list array of `counts` long lists gives them as parent indices
    spans = pa.ListArray.from_arrays(
        pa.concat_arrays([pa.array([0], pa.int64()), ends.cast(pa.int64())]), pa.nulls(rows)
    )
    owners = pc.list_parent_indices(spans)
    marker = pc.take(empty, owners)
    firsts = pc.take(pc.subtract(ends, counts), owners)
    positions = pc.if_else(marker, -1, pc.subtract(counting(0, rows, pa.int64()), firsts))
    starts = pc.take(entries.offsets[:-1], owners)
    at = pc.if_else(marker, pa.scalar(None, pa.int64()), pc.add(starts.cast(pa.int64()), positions))
    taken = entries.values.take(at)
    removed = pc.or_(marker, pc.is_null(taken))
    return owners, positions, taken, removed


def counting(first: int, count: int, kind: pa.DataType) -> pa.Array:
    """`first`, `first` + 1, ... (`count` of them) by Arrow: from a Python range, the reading
    thread's interpreter is held for every value."""
    return pc.cumulative_sum(pa.repeat(pa.scalar(1, kind), count), start=pa.scalar(first - 1, kind))


def child_rows_by_entry(
    lists: list[Any], parent: pa.Table, child: ChildTable, context: Context
) -> pa.Table:
    """`child_rows` an entry at a time: lists Arrow cannot read in one conversion."""
    owners: list[int] = []  # the parent row of each child row
    positions: list[int] = []
    elements: list[Any] = []
    removed: list[bool] = []
    for index, value in enumerate(lists):
        if value:
            owners.extend(repeat(index, len(value)))
            positions.extend(range(len(value)))
            elements.extend(e or {} for e in value)
            removed.extend(e is None for e in value)
        else:
            owners.append(index)
            positions.append(-1)
            elements.append({})
            removed.append(True)
    return child_table(
        parent,
        child,
        context,
        pa.array(owners, type=pa.int64()),
        pa.array(positions, type=pa.int64()),
        elements,
        pa.array(removed, type=pa.bool_()),
    )


def child_table(
    parent: pa.Table,
    child: ChildTable,
    context: Context,
    owners: pa.Array,
    positions: pa.Array,
    elements: pa.StructArray | list[Any],
    removed: pa.Array,
) -> pa.Table:
    """The child rows' table: each row's parent columns (`owners`: the parent row), its
    position, its entry's columns (from `elements`, Arrow's or Python's) and `removed`."""
    owning = parent.select(list(child.parent_columns)).take(owners).combine_chunks()
    fields = list(owning.schema)
    arrays: list[Any] = list(owning.columns)
    arrays.append(positions.cast(pa.int32()))
    if isinstance(elements, pa.StructArray):
        leaves = fields_of(elements)
        rows: list[Any] = [None] * len(elements)
        arrays += [column_array(c, rows, context, leaves) for c in child.columns]
    else:
        arrays += [column_array(c, elements, context) for c in child.columns]
    arrays.append(removed)
    return pa.Table.from_arrays(arrays, schema=pa.schema([*fields, *child_fields(child)]))


@lru_cache(maxsize=64)
def child_fields(child: ChildTable) -> tuple[pa.Field, ...]:
    """A child table's own fields (position, entry columns, removal mark), one object each
    for every table of `child`: Arrow caches a field's fingerprint (see `arrow_type_of`)."""
    return (
        pa.field(child.position, pa.int32(), nullable=False),
        *arrow_type_of(child.columns),
        pa.field(REMOVED, pa.bool_(), nullable=False),
    )
