"""What the resources hand to dlt: one scope's read of an endpoint (`read_scope`), the
readers' batches gathered per table, and what a scope's read leaves behind (its newest cursor
value, the statistics periods to refresh)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import dlt
import pyarrow as pa
import pyarrow.compute as pc

from ..editions.spec import Endpoint
from ..settings import ROWS_PER_ITEM
from .csv_exports import read_csv
from .readers import (
    Batch,
    ReadContext,
    Scope,
    changed_periods,
    read_directory,
    read_list,
    read_statistics,
    skipping,
    statistics_table,
)
from .scopes import CURSOR_STATE_KEY, endpoint_for

READERS = {"list": read_list, "statistics": read_statistics, "csv": read_csv}


def with_refresh(
    ctx: ReadContext,
    listing: Endpoint,
    statistics: Endpoint,
    scope: Scope,
    batches: Iterator[Batch],
) -> Iterator[Batch]:
    """The list's batches, each followed by the statistics periods in which items of it
    were created, where older than the statistics' own look-back, however old (a backfill may
    have loaded them): counted by creation period, those periods' numbers changed with the
    items. A failed refresh skips the refresh of this scope, not its list."""
    assert listing.refreshes is not None
    created_column = listing.refreshes[1]
    seen: set[datetime] = set()
    for batch in batches:
        yield batch
        if batch.table_name != listing.table:
            continue  # the list's child tables (reviewers, participants)
        spans = changed_periods(ctx, created_column, batch.table, seen)
        if spans:
            yield from skipping(
                ctx, statistics, scope, statistics_table(ctx, statistics, scope, spans)
            )


def tracking(
    endpoint: Endpoint, batches: Iterator[Batch], newest: list[datetime]
) -> Iterator[Batch]:
    """The batches; each one's newest cursor value (of the endpoint's own table) is added to
    `newest`, as UTC: a zone-less cursor column is read as UTC, as `readers.bounds` does."""
    for batch in batches:
        if endpoint.cursor and batch.table_name == endpoint.table:
            newest.extend(stored_cursor(pc.max(batch.table.column(endpoint.cursor)).as_py()))
        yield batch


def stored_cursor(stored: Any) -> list[datetime]:
    """A cursor value as an aware instant, in a list; an empty list for no value."""
    if not isinstance(stored, datetime):
        return []
    return [stored if stored.tzinfo else stored.replace(tzinfo=UTC)]


def source_items(batches: Iterator[Batch], rows_per_item: int = ROWS_PER_ITEM) -> Iterator[Any]:
    """Batches as dlt items, each table's pages gathered up to `rows_per_item` rows.

    dlt computes and validates a table's schema for every Arrow item and for every item
    carrying hints: so a table's hints go with its first item only (again only if they
    change), and pages are gathered into larger items.
    """
    sent: dict[str, Any] = {}
    gathered: dict[str, list[Batch]] = {}
    rows: dict[str, int] = {}

    def handed(name: str) -> Iterator[Any]:
        group = gathered.pop(name)
        rows.pop(name)
        table = pa.concat_tables([b.table for b in group]) if len(group) > 1 else group[0].table
        hints = group[0].hints
        if sent.get(name) is not hints and sent.get(name) != hints:
            sent[name] = hints
            yield dlt.mark.with_hints(table, hints, create_table_variant=True)
        else:
            yield dlt.mark.with_table_name(table, name)

    for batch in batches:
        name = batch.table_name
        group = gathered.get(name)
        if group and (
            (group[0].hints is not batch.hints and group[0].hints != batch.hints)
            or group[0].table.schema != batch.table.schema
        ):
            yield from handed(name)
        gathered.setdefault(name, []).append(batch)
        rows[name] = rows.get(name, 0) + batch.table.num_rows
        if rows[name] >= rows_per_item:
            yield from handed(name)
    for name in list(gathered):
        yield from handed(name)


def refreshed_statistics(ctx: ReadContext, listing: Endpoint) -> Endpoint | None:
    """The statistics endpoint a nightly read of `listing` refreshes, when both are read."""
    plan = ctx.plan
    if plan.backfill or listing.refreshes is None or listing.refreshes[0] not in plan.resources:
        return None
    return endpoint_for(ctx, listing.refreshes[0], listing.level)


def read_scope(ctx: ReadContext, endpoint: Endpoint, scope: Scope) -> Iterator[Batch]:
    """Every batch of `endpoint` for one scope, from its cursor less the look-back (a
    backfill window: exactly the window). Once the scope is read completely, its cursor
    becomes the newest cursor value read (as dlt's incremental cursors did)."""
    plan = ctx.plan
    if endpoint.kind == "directory":
        yield from skipping(ctx, endpoint, scope, read_directory(ctx, endpoint, scope))
        return
    stored = None if plan.backfill else scope.state.get(CURSOR_STATE_KEY)
    batches = READERS[endpoint.kind](ctx, endpoint, scope, stored)
    statistics = refreshed_statistics(ctx, endpoint)
    if statistics is not None:
        batches = with_refresh(ctx, endpoint, statistics, scope, batches)
    newest: list[datetime] = []
    complete = yield from skipping(ctx, endpoint, scope, tracking(endpoint, batches, newest))
    # A backfill window never touches the nightly cursors (its pipeline is its own anyway).
    if complete and newest and not plan.backfill:
        scope.state[CURSOR_STATE_KEY] = max(newest + stored_cursor(stored))
