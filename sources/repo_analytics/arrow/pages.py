"""A list page decoded straight into Arrow, where Arrow reads it exactly as the JSON decoder
and the mapper would.

A year's list pages were decoded into Python objects (`orjson`), then read into Arrow by the
mapper: together ~30 % of the CPU a backfill holds the interpreter for. Arrow's JSON reader
gives the page's items as one struct array of the paths the tables read, with the
interpreter let go while it parses (the other reads run meanwhile). It is used only where its
result is the mapper's: every column of the endpoint and its child tables read by a path Arrow
types (`mapping.read_as`), and the page read as one JSON object of the types asked for. A page
Arrow reads otherwise (a value of another type, a duplicate key, bytes that are not UTF-8, a
top level that is not one object) or an answer too small for it to pay (`ARROW_PAGE_BYTES`)
is decoded by `orjson` as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any, Final

import pyarrow as pa
import pyarrow.json as pa_json

from ..client.rules import ErrorEnvelope
from ..editions.spec import LIST_OF_ANY, ChildTable, Column, Endpoint
from ..typing import Paging
from .mapping import ArrowItems, raw_type, read_as, struct_of

# Arrow's reader has a fixed cost a call that orjson has not; at this size the two take
# about as long (`docs/decisions/arrow-decoding.md`)
ARROW_PAGE_BYTES: Final = 16 * 1024
ARROW_ERRORS: Final = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError)


@dataclass(frozen=True)
class PageShape:
    """What a page is read as: its top-level fields (`head`: paging and error-body keys,
    with their types) and its items under `items_key`."""

    items_key: str
    item_type: pa.StructType
    head: tuple[tuple[str, pa.DataType], ...] = ()
    required: tuple[str, ...] = ()  # head fields whose null (or absence) Arrow cannot tell

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([*self.head, (self.items_key, pa.list_(self.item_type))])


def page_shape(endpoint: Endpoint, envelope: ErrorEnvelope) -> PageShape | None:
    """How a page of the paged list `endpoint` is read into Arrow (its paging scheme's and
    the edition's error body's top-level fields with it); None where Arrow cannot read it
    as the mapper would."""
    if endpoint.paging is None:
        return None
    return shape_of(endpoint.columns, endpoint.children, endpoint.paging, envelope)


@lru_cache(maxsize=256)
def shape_of(
    columns: tuple[Column, ...],
    children: tuple[ChildTable, ...],
    paging: Paging,
    envelope: ErrorEnvelope,
) -> PageShape | None:
    kind = item_type(columns, children)
    if kind is None:
        return None
    head = dict(paging.head)
    head.setdefault(envelope.key, envelope_type(envelope))
    head.pop(paging.items_key, None)
    return PageShape(paging.items_key, kind, tuple(head.items()), paging.required)


@lru_cache(maxsize=256)
def item_type(
    columns: tuple[Column, ...], children: tuple[ChildTable, ...]
) -> pa.StructType | None:
    """The struct type of an item holding every path the columns and the child tables read
    (a child's list with its entries' paths); None where one of them is not Arrow-typed."""
    child_columns = [c for child in children for c in child.columns]
    if any(read_as(c) is None for c in child_columns if not c.from_context):
        return None
    tree: dict[str, Any] = {}
    for c in columns:
        if not c.from_context and not add_path(tree, c.path, read_as(c)):
            return None
    for child in children:
        entry = raw_type(child.columns)
        if entry is None or not child.list_path:
            return None
        if not add_path(tree, child.list_path, pa.list_(entry)):
            return None
    return struct_of(tree)


def add_path(tree: dict[str, Any], path: tuple[str, ...], kind: pa.DataType | None) -> bool:
    """Put `kind` at `path` of the tree; a list whose entries are not read gives way to one
    whose entries are (the same lengths). False where two paths disagree."""
    if kind is None or not path:
        return False
    node = tree
    for key in path[:-1]:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            return False
    found = node.get(path[-1])
    if found is None or found == LIST_OF_ANY and pa.types.is_list(kind):
        node[path[-1]] = kind
        return True
    return found == kind or (kind == LIST_OF_ANY and pa.types.is_list(found))


def envelope_type(envelope: ErrorEnvelope) -> pa.DataType:
    """The type the error envelope's key is read as: its text, or a list whose entries are
    not read."""
    return pa.string() if envelope.value is not None else LIST_OF_ANY


def page_decoder(shape: PageShape | None) -> Callable[[bytes], dict[str, Any] | None] | None:
    """What the client decodes a list page of `shape` with (`ApiClient.get_json`): Arrow for
    an answer large enough to pay (`ARROW_PAGE_BYTES`), else None, and orjson decodes it."""
    if shape is None:
        return None
    return partial(decode_large_page, shape=shape)


def decode_large_page(content: bytes, shape: PageShape) -> dict[str, Any] | None:
    return decode_page(content, shape) if len(content) >= ARROW_PAGE_BYTES else None


def is_utf8(content: bytes) -> None:
    """Raises `ArrowInvalid` unless the bytes are UTF-8 (Arrow's check: a sixth of the time
    of decoding them to a `str`)."""
    offsets = pa.array([0, len(content)], pa.int32()).buffers()[1]
    text = pa.BinaryArray.from_buffers(pa.binary(), 1, [None, offsets, pa.py_buffer(content)])
    text.cast(pa.string())


def decode_page(content: bytes, shape: PageShape) -> dict[str, Any] | None:
    """The page as its head fields and its items (`ArrowItems`), or None where Arrow would
    read it otherwise than `orjson` (then the caller decodes it so)."""
    try:
        if not content.isascii():
            is_utf8(content)  # Arrow takes strings as they come; orjson refuses them
        table = pa_json.read_json(
            pa.BufferReader(content),
            read_options=pa_json.ReadOptions(use_threads=False, block_size=len(content) + 1),
            parse_options=pa_json.ParseOptions(
                explicit_schema=shape.schema,
                unexpected_field_behavior="ignore",
                newlines_in_values=True,
            ),
        )
    except ARROW_ERRORS:
        return None
    if table.num_rows != 1:
        return None
    if any(table.column(name).null_count for name in shape.required):
        return None
    page: dict[str, Any] = {name: table.column(name)[0].as_py() for name, _ in shape.head}
    items = table.column(shape.items_key).combine_chunks()
    if items.null_count:
        page[shape.items_key] = None
    else:
        page[shape.items_key] = ArrowItems(items.flatten())
    return page
