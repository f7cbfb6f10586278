"""A list page decoded straight into Arrow (`arrow_pages`, issue 11) reads as the same page
decoded by `orjson` and mapped item by item: every paged endpoint of both editions, its table
and its child tables, on pages of the value shapes a host may send; a page Arrow would read
otherwise is left to `orjson` (None). Real answers: the end-to-end tests load every level of
both editions through this path (the simulators' pages are above `ARROW_PAGE_BYTES`) and
compare the tables with the simulators' truth.
"""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa
import pytest

from sources.repo_analytics.arrow.mapping import ArrowItems, child_rows, raw_type, to_arrow
from sources.repo_analytics.arrow.pages import decode_page, item_type, page_shape
from sources.repo_analytics.client.paging import NextLink, StartLimit
from sources.repo_analytics.client.rules import ErrorEnvelope
from sources.repo_analytics.editions import edition_spec
from sources.repo_analytics.editions.spec import Endpoint
from tests.unit.test_to_arrow import (
    ABSENT,
    CONTEXT,
    edge_items,
    refusal_free,
    sample_value,
)


def paged() -> list[tuple[str, Endpoint, ErrorEnvelope]]:
    found = []
    for edition in ("cloud", "server"):
        spec = edition_spec(edition)
        for endpoint in spec.endpoints:
            if endpoint.paging is not None and endpoint.kind == "list":
                found.append((edition, endpoint, spec.error_envelope))
    return found


PAGED = paged()
IDS = [f"{e}-{p.name}" for e, p, _ in PAGED]


def head_of(endpoint: Endpoint) -> dict[str, Any]:
    """A middle page's paging fields."""
    if isinstance(endpoint.paging, StartLimit):
        return {endpoint.paging.last_page_key: False, endpoint.paging.next_start_key: 1000}
    assert isinstance(endpoint.paging, NextLink)
    return {endpoint.paging.next_key: "https://host/rest/latest/next?page=2"}


def body_of(endpoint: Endpoint, items: Any, **head: Any) -> bytes:
    assert endpoint.paging is not None
    return orjson.dumps({**head_of(endpoint), **head, endpoint.paging.items_key: items})


def typed(item: Any, kind: pa.DataType) -> bool:
    """Whether each value of the item has its path's JSON type."""
    try:
        pa.array([item], kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return False
    return True


def good_items(endpoint: Endpoint) -> list[Any]:
    """Items of every value shape of its path's JSON type each of the endpoint's columns
    reads, with lists of entries of every shape the child tables read (absent, null, empty,
    a null entry)."""
    kind = item_type(endpoint.columns, endpoint.children)
    assert kind is not None
    items = [
        i
        for i in edge_items(endpoint.columns)
        if refusal_free(i, endpoint.columns) and typed(i, kind)
    ]
    for number, child in enumerate(endpoint.children):
        entry = raw_type(child.columns)  # the type of the child's list entries in `kind`
        assert entry is not None
        entries = [
            e
            for e in edge_items(child.columns)
            if refusal_free(e, child.columns) and typed(e, entry)
        ]
        assert entries
        lists: list[Any] = [ABSENT, None, [], [None], entries, [entries[-1], None]]
        for listed in lists:
            item: dict[str, Any] = {}
            for c in endpoint.columns:
                if c.path and not c.from_context and c.name in child.parent_columns:
                    target = item
                    for key in c.path[:-1]:
                        target = target.setdefault(key, {})
                    target[c.path[-1]] = sample_value(c, number * 10 + len(items))
            if listed is not ABSENT:
                target = item
                for key in child.list_path[:-1]:
                    target = target.setdefault(key, {})
                target[child.list_path[-1]] = listed
            items.append(item)
    return items


def test_the_list_endpoints_pages_are_read_by_arrow() -> None:
    """Every paged list of both editions has a shape: none is left to `orjson` by a column
    Arrow cannot type (a new converter without an Arrow form would silently slow it)."""
    missing = [
        name
        for name, (_, e, envelope) in zip(IDS, PAGED, strict=True)
        if page_shape(e, envelope) is None
    ]
    assert not missing


@pytest.mark.parametrize(("edition", "endpoint", "envelope"), PAGED, ids=IDS)
def test_a_page_read_by_arrow_maps_as_the_decoded_page(
    edition: str, endpoint: Endpoint, envelope: ErrorEnvelope
) -> None:
    """The page of every value shape, and each item alone: Arrow's page gives the table, the
    child tables and the paging fields `orjson`'s gives, or is left to it (None)."""
    shape = page_shape(endpoint, envelope)
    assert shape is not None and endpoint.paging is not None
    items = good_items(endpoint)
    pages = [items, *([item] for item in edge_items(endpoint.columns))]
    assert decode_page(body_of(endpoint, items), shape) is not None  # the shapes a host sends
    for page_items in pages:
        body = body_of(endpoint, page_items)
        page = decode_page(body, shape)
        if page is None:  # a value of another type than its column's: orjson's
            continue
        decoded = orjson.loads(body)
        for name, _ in shape.head:
            assert page[name] == decoded.get(name), name
        arrow_items = page[endpoint.paging.items_key]
        assert isinstance(arrow_items, ArrowItems)
        table = to_arrow(arrow_items, endpoint.columns, CONTEXT)
        expected = to_arrow(page_items, endpoint.columns, CONTEXT)
        assert table.to_pylist() == expected.to_pylist()
        assert table.schema == expected.schema
        for child in endpoint.children:
            got = child_rows(arrow_items, table, child, CONTEXT)
            assert got.to_pylist() == child_rows(page_items, expected, child, CONTEXT).to_pylist()


@pytest.mark.parametrize(("edition", "endpoint", "envelope"), PAGED, ids=IDS)
def test_a_page_arrow_would_read_otherwise_is_left_to_orjson(
    edition: str, endpoint: Endpoint, envelope: ErrorEnvelope
) -> None:
    shape = page_shape(endpoint, envelope)
    assert shape is not None and endpoint.paging is not None
    body = body_of(endpoint, good_items(endpoint))
    assert decode_page(body, shape) is not None
    key_path = next(c.path for c in endpoint.columns if c.name == endpoint.primary_key[-1])
    wrong_type: dict[str, Any] = {}
    target = wrong_type
    for key in key_path[:-1]:
        target = target.setdefault(key, {})
    target[key_path[-1]] = [1, 2]  # a list where the key's value is
    refused = {
        "not UTF-8": body.replace(b'"', b'"\xff', 1),
        "a list at the top": orjson.dumps([orjson.loads(body)]),
        "two objects": body + b"\n" + body,
        "a duplicate key": body[:-1] + b',"' + endpoint.paging.items_key.encode() + b'":[]}',
        "a value of another type": body_of(endpoint, [wrong_type]),
        "an item that is not an object": body_of(endpoint, ["x"]),
        "cut short": body[: len(body) // 2],
    }
    if isinstance(endpoint.paging, StartLimit):  # absent: the last page, unlike a null
        refused["the last-page flag absent"] = orjson.dumps(
            {endpoint.paging.items_key: good_items(endpoint)}
        )
    for why, bad in refused.items():
        assert decode_page(bad, shape) is None, why


@pytest.mark.parametrize(("edition", "endpoint", "envelope"), PAGED, ids=IDS)
def test_an_error_body_read_by_arrow_is_still_an_error(
    edition: str, endpoint: Endpoint, envelope: ErrorEnvelope
) -> None:
    """The edition's error object, whatever else the body holds: Arrow's page matches the
    envelope as `orjson`'s does (the client then raises it with its message)."""
    shape = page_shape(endpoint, envelope)
    assert shape is not None
    error: dict[str, Any] = (
        {envelope.key: envelope.value, "error": {"message": "licence expired"}}
        if envelope.value is not None
        else {envelope.key: [{"message": "licence expired"}]}
    )
    body = body_of(endpoint, good_items(endpoint), **error)
    page = decode_page(body, shape)
    assert page is not None
    assert envelope.matches(page) and envelope.matches(orjson.loads(body))
    plain = decode_page(body_of(endpoint, good_items(endpoint)), shape)
    assert plain is not None and not envelope.matches(plain)


def test_arrow_items_read_as_the_items_they_hold() -> None:
    """`ArrowItems` as a sequence (what a fallback path reads): the items' values by path."""
    raw = pa.array(
        [{"a": {"b": 1}}, None, {"a": None}], pa.struct([("a", pa.struct([("b", pa.int64())]))])
    )
    items = ArrowItems(raw)
    assert len(items) == 3
    assert list(items) == [{"a": {"b": 1}}, None, {"a": None}]
    assert items[0] == {"a": {"b": 1}}
    assert len(items.filter(pa.array([True, False, True]))) == 2


def test_a_links_object_reads_its_first_self_href_both_ways() -> None:
    """The self-hosted pull request's `link`: the first `self` entry that is an object, on a
    page decoded by `orjson` (the struct conversion) and by Arrow alike."""
    endpoint = next(e for _, e, _ in PAGED if e.name == "pull_requests.repository" and e.children)
    spec = edition_spec("server")
    link = next(c for c in endpoint.columns if c.name == "link")
    values: list[Any] = [
        {"self": [{"href": "https://h/a"}, {"href": "https://h/b"}]},
        {"self": []},
        {"self": None},
        {},
        None,
        {"self": [None, {"href": "https://h/c"}]},  # a null entry first: skipped
        {"self": [{"href": None}, {"href": "https://h/d"}]},
        {"self": [{}]},
        {"self": [{"href": "https://h/e"}], "other": [{"href": "x"}]},
    ]
    items = [{link.path[0]: value} for value in values]
    expected = [link.read(item, CONTEXT) for item in items]
    assert expected[0] == "https://h/a" and expected[5] == "https://h/c" and expected[6] is None
    assert to_arrow(items, (link,), CONTEXT).column(0).to_pylist() == expected
    shape = page_shape(endpoint, spec.error_envelope)
    assert shape is not None
    page = decode_page(body_of(endpoint, items), shape)
    assert page is not None
    got = to_arrow(page[endpoint.paging.items_key], (link,), CONTEXT)  # type: ignore[union-attr]
    assert got.column(0).to_pylist() == expected
    without_null_first = [i for n, i in enumerate(items) if n != 5]
    page = decode_page(body_of(endpoint, without_null_first), shape)
    assert page is not None
    got = to_arrow(page[endpoint.paging.items_key], (link,), CONTEXT)  # type: ignore[union-attr]
    assert got.column(0).to_pylist() == [e for n, e in enumerate(expected) if n != 5]
