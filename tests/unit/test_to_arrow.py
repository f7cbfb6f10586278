"""`to_arrow` builds a column at a time, converting timestamps with Arrow where Arrow reads
them as the column's own converter does (issue 11). Every column of every endpoint of both
editions gives what `Column.read`, item by item, gives: on items with the shapes a host may
send (values missing, null, of another type, nested objects absent, timestamps with and
without a zone, with fractions, epoch milliseconds). Real answers: the end-to-end tests
compare every level's loaded tables of both editions with the simulators' truth.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from sources.repo_analytics.arrow.mapping import child_rows, exploded, to_arrow
from sources.repo_analytics.editions import edition_spec
from sources.repo_analytics.editions.spec import REMOVED, ChildTable, Column, Endpoint

CONTEXT = {"level": "repository", "scope": "CORE/api", "project_key": "CORE", "slug": "api"}


def by_cell(items: list[Any], columns: tuple[Column, ...]) -> list[dict[str, Any]]:
    """The definition: each column's value read item by item."""
    return [{c.name: c.read(item, CONTEXT) for c in columns} for item in items]


def edge_items(columns: tuple[Column, ...]) -> list[Any]:
    """For each column's path, the values a host may put there."""
    shapes: list[Any] = [
        None,
        "",
        "2026-05-31T23:52:05Z",
        "2026-05-31T23:52:05.123456+05:30",
        "2026-05-31 23:52:05",
        "2026-05-31T23:52:05.5",
        1780271999999,
        0,
        {"nested": 1},
    ]
    items: list[Any] = [{}, {"unrelated": 1}]
    for shape in shapes:
        item: dict[str, Any] = {}
        for c in columns:
            if not c.path or c.path[0].startswith("@"):
                continue
            target = item
            for key in c.path[:-1]:
                target = target.setdefault(key, {}) if isinstance(target, dict) else {}
            if isinstance(target, dict):
                target[c.path[-1]] = shape
        items.append(item)
    return items


def endpoints() -> list[tuple[str, Endpoint]]:
    found = []
    for edition in ("cloud", "server"):
        for endpoint in edition_spec(edition).endpoints:
            if endpoint.columns:
                found.append((edition, endpoint))
    return found


ENDPOINTS = endpoints()


@pytest.mark.parametrize(
    ("edition", "endpoint"), ENDPOINTS, ids=[f"{e}-{p.name}" for e, p in ENDPOINTS]
)
def test_every_endpoints_columns_read_as_item_by_item(edition: str, endpoint: Endpoint) -> None:
    """Each value shape alone in a column: the column a time equals the item-by-item read,
    or both refuse it alike (a converter that cannot read the value)."""
    for item in edge_items(endpoint.columns):
        for c in endpoint.columns:
            try:
                expected: Any = pa.array([c.read(item, CONTEXT)], type=c.type).to_pylist()
            except Exception as refused:  # noqa: BLE001 - compared with the column's answer
                with pytest.raises(type(refused)):
                    to_arrow([item], (c,), CONTEXT)
                continue
            assert to_arrow([item], (c,), CONTEXT).column(0).to_pylist() == expected, (c, item)


def test_mixed_timestamps_in_one_column_read_as_item_by_item() -> None:
    """A page whose timestamps Arrow reads but for one (zone-less): the whole column is read
    item by item, as it would be alone; the same page without it takes Arrow's casts."""
    column = next(c for _, e in ENDPOINTS for c in e.columns if c.name == "author_timestamp")
    items = [
        {column.path[0]: "2026-05-31T23:52:05Z"},
        {column.path[0]: "2026-05-31T23:52:05+02:00"},
        {column.path[0]: None},
        {column.path[0]: "2026-05-31 23:52:05.250Z"},
    ]
    zoneless = [*items, {column.path[0]: "2026-05-31T23:52:05"}]
    for page in (items, zoneless):
        got = to_arrow(page, (column,), CONTEXT).to_pylist()
        assert got == by_cell(page, (column,))
    assert to_arrow(zoneless, (column,), CONTEXT).column(0).to_pylist()[-1] is not None


def children_by_row(items: list[Any], parent: pa.Table, child: ChildTable) -> list[dict[str, Any]]:
    """The definition of a child table, a row at a time: each list entry (or one marker row
    for an absent or empty list) with its parent's key, its position and its columns."""
    rows = []
    for index, item in enumerate(items):
        value: Any = item
        for key in child.list_path:
            value = value.get(key) if isinstance(value, dict) else None
        for position, element in list(enumerate(value or ())) or [(-1, None)]:
            row = {name: parent.column(name)[index].as_py() for name in child.parent_columns}
            row[child.position] = position
            row.update({c.name: c.read(element or {}, CONTEXT) for c in child.columns})
            row[REMOVED] = element is None
            rows.append(row)
    return rows


CHILDREN = [(e, p, c) for e, p in ENDPOINTS for c in p.children]


@pytest.mark.parametrize(
    ("edition", "endpoint", "child"),
    CHILDREN,
    ids=[f"{e}-{p.name}-{c.table}" for e, p, c in CHILDREN],
)
def test_every_child_table_reads_as_row_by_row(
    edition: str, endpoint: Endpoint, child: ChildTable
) -> None:
    """A page of parents whose lists are absent, null, empty, hold a null entry, or hold
    entries of every value shape: the child table built a column at a time equals the
    row-by-row definition, parent keys and positions included."""
    entries = [e for e in edge_items(child.columns) if refusal_free(e, child.columns)]

    def parent(number: int, listed: Any) -> dict[str, Any]:
        item: dict[str, Any] = {}
        for c in endpoint.columns:
            if c.name in child.parent_columns and c.path and not c.path[0].startswith("@"):
                target = item
                for key in c.path[:-1]:
                    target = target.setdefault(key, {})
                target[c.path[-1]] = sample_value(c, number)
        target = item
        for key in child.list_path[:-1]:
            target = target.setdefault(key, {})
        if listed is not ABSENT:
            target[child.list_path[-1]] = listed
        return item

    lists: list[Any] = [ABSENT, None, [], [None], entries, [entries[0], None, entries[-1]]]
    items = [parent(n, listed) for n, listed in enumerate(lists)]
    table = to_arrow(items, endpoint.columns, CONTEXT)
    got = child_rows(items, table, child, CONTEXT)
    assert got.to_pylist() == children_by_row(items, table, child)
    assert got.num_rows == 4 + len(entries) + 3


ABSENT = object()


def refusal_free(item: Any, columns: tuple[Column, ...]) -> bool:
    """Whether every column reads the item (a shape a converter refuses is another test's)."""
    try:
        for c in columns:
            pa.array([c.read(item, CONTEXT)], type=c.type)
    except Exception:  # noqa: BLE001 - any refusal leaves the shape out
        return False
    return True


def sample_value(column: Column, number: int) -> Any:
    """A value the column reads, different per parent: the first candidate it accepts."""
    candidates = (
        f"2026-05-{number + 1:02d}T10:00:00+00:00",
        1_780_000_000_000 + number,
        number,
        f"key-{number}",
    )
    for candidate in candidates:
        if refusal_free(single(column, candidate), (column,)):
            return candidate
    raise AssertionError(f"no sample value for {column.name}")


def single(column: Column, value: Any) -> dict[str, Any]:
    item: dict[str, Any] = {}
    target = item
    for key in column.path[:-1]:
        target = target.setdefault(key, {})
    target[column.path[-1]] = value
    return item


def exploded_by_hand(lists: list[Any]) -> list[tuple[int, int, Any, bool]]:
    """The definition: each entry a row (a null entry removed), an empty or missing list one
    removed marker row at position -1."""
    rows: list[tuple[int, int, Any, bool]] = []
    for owner, entries in enumerate(lists):
        if not entries:
            rows.append((owner, -1, None, True))
        for position, entry in enumerate(entries or ()):
            rows.append((owner, position, entry, entry is None))
    return rows


ENTRY = pa.struct([("id", pa.string())])
LISTS = [
    [[{"id": "a"}], [{"id": "b"}, {"id": "c"}], [{"id": "d"}, None, {"id": "e"}]],  # no marker
    [[{"id": "a"}], [], None, [{"id": "b"}, {"id": "c"}], [None]],  # markers
    [[{"id": "a"}, {"id": "b"}]],
    [[]],
]


@pytest.mark.parametrize("lists", LISTS)
@pytest.mark.parametrize("offset", [0, 1])
def test_exploded_lists_are_their_entries_and_markers_in_order(
    lists: list[Any], offset: int
) -> None:
    """Both ways `exploded` takes (no list empty: the entries as they are; else each row's
    entry computed) give the definition's rows, on a list array that is a slice of another
    too (a page's leaves can be)."""
    whole = pa.array([[{"id": "before"}], *lists], pa.list_(ENTRY))
    entries = whole.slice(1) if offset else pa.array(lists, pa.list_(ENTRY))
    owners, positions, taken, removed = exploded(entries)
    got = list(
        zip(
            owners.to_pylist(),
            positions.to_pylist(),
            taken.to_pylist(),
            removed.to_pylist(),
            strict=True,
        )
    )
    assert got == exploded_by_hand(lists)
