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

from sources.repo_analytics.editions import edition_spec
from sources.repo_analytics.tables import Column, Endpoint, to_arrow

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
