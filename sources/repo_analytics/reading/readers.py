"""Reading one endpoint for one scope into Arrow tables: lists, statistics, directories.

These generators are what the dlt resources run. They turn skippable errors into report
entries (the scope is skipped, the run goes on) and let fatal ones end the run.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import pyarrow as pa
from dlt.common import logger

from ..arrow.mapping import ArrowItems, child_rows, series_to_arrow, to_arrow
from ..arrow.pages import page_decoder, page_shape, shape_of
from ..client.api import Answer, ApiClient, Decoder
from ..dates import period_floor, period_next, periods, wire
from ..editions.spec import REMOVED, Column, Endpoint
from ..errors import EndlessList, FatalApiError, SkippableApiError, bare_url
from ..settings import EMPTY_PAGES_MOST, KEPT_PAGES_MOST
from ..typing import Paginator
from .context import (
    SCHEMA_CONTRACT,
    Batch,
    ReadContext,
    Scope,
    emit,
    forget,
    fresh_keys,
    hand_over,
    label_of,
    nullability,
    row_keys,
    seen_at,
    table_hints,
    within_scope,
)
from .details import read_details

__all__ = [  # the shared names are re-exported: readers are what the source imports
    "SCHEMA_CONTRACT",
    "Batch",
    "ReadContext",
    "Scope",
    "emit",
    "label_of",
    "nullability",
    "table_hints",
    "read_list",
    "read_statistics",
    "read_directory",
    "skipping",
]


def bounds(ctx: ReadContext, endpoint: Endpoint, last_value: Any) -> tuple[datetime, datetime]:
    """[since, until) for this read: the cursor minus the look-back, never before the start."""
    plan = ctx.plan
    slack = plan.cursor_slack(endpoint.cursor_naive)
    earliest = plan.start - slack
    if isinstance(last_value, datetime):
        last = last_value if last_value.tzinfo else last_value.replace(tzinfo=UTC)
        return max(earliest, last - plan.lookback - slack), plan.until
    return earliest, plan.until


def date_params(ctx: ReadContext, since: datetime, until: datetime) -> dict[str, str]:
    spec = ctx.plan.edition
    return {spec.since_param: wire(since), spec.until_param: wire(until)}


def get_first_working(
    ctx: ReadContext, endpoint: Endpoint, scope: Scope, params: Mapping[str, Any]
) -> Answer:
    """GET the endpoint, trying its other path forms when one answers an HTML 404."""
    label = label_of(endpoint, scope)
    known = ctx.working_paths.get(endpoint.name)
    candidates = [known] if known else [endpoint.path, *endpoint.alt_paths]
    error: FatalApiError | None = None
    for template in candidates:
        try:
            answer = ctx.client.get_json(scope.path(template), params, label)
        except FatalApiError as failure:
            if failure.kind != "app_missing" or not endpoint.alt_paths:
                raise
            error = failure
            continue
        with ctx.lock:
            ctx.working_paths.setdefault(endpoint.name, template)
        return answer
    assert error is not None
    raise error


def with_children(
    ctx: ReadContext, endpoint: Endpoint, items: Sequence[Any], scope: Scope
) -> Iterator[Any]:
    """The items as the endpoint's table, then each child table, each with its own hints.

    The table's keys are held for this read of the scope only (its key names the scope: see
    `emit`). A child table's rows are yielded as a whole per parent, for the parents whose
    rows have not been yielded yet: one key held per parent (its `parent_key`), not one per
    child row. Where several levels of the run write the child table (a commit read at the
    top level, its project, its repository and its author has one set of parents), the run
    holds those keys to its end; else, like the parent's, for this read only, so a large
    window does not hold every parent's key to its end (`docs/decisions/reading-costs.md`).
    """
    table = to_arrow(items, endpoint.columns, scope.context)
    inside = within_scope(ctx, table, scope, label_of(endpoint, scope), endpoint.primary_key)
    if inside is not None:  # rows of another scope: dropped
        table, items, _ = kept(inside, table, items, [b""] * table.num_rows)
    keys = row_keys(table, list(endpoint.primary_key))
    # an item that shifted across pages was read before in this scope
    table, items, keys = kept(
        fresh_keys(ctx, seen_at(endpoint.table, scope), keys), table, items, keys
    )
    hints = table_hints(
        ctx,
        endpoint.table,
        endpoint.primary_key,
        nullability(table.schema),
        fixed=endpoint.fixed_column,
    )
    yield from hand_over(ctx, table, hints)
    for child in endpoint.children:
        parent_keys = (
            keys
            if child.parent_key == endpoint.primary_key
            else row_keys(table, list(child.parent_key))
        )
        shared = child.table in ctx.plan.shared_children
        fresh = fresh_keys(ctx, seen_at(child.table, None if shared else scope), parent_keys)
        owners, owner_items, _ = kept(fresh, table, items, parent_keys)
        if not owner_items:
            continue
        rows = child_rows(owner_items, owners, child, scope.context)
        columns = nullability(rows.schema)
        columns[REMOVED]["hard_delete"] = True  # marker rows empty a parent's list
        yield from hand_over(
            ctx,
            rows,
            table_hints(
                ctx,
                child.table,
                child.primary_key,
                columns,
                merge_key=child.parent_key,
                fixed=endpoint.fixed_in(child.carry),
            ),
        )
    if endpoint.details is not None and ctx.plan.with_files:
        yield from read_details(ctx, endpoint, table, scope)


def kept(
    keep: pa.Array | None, table: pa.Table, items: Sequence[Any], keys: list[bytes]
) -> tuple[pa.Table, Sequence[Any], list[bytes]]:
    """The rows of `table`, `items` and `keys` (one per row) that `keep` keeps (None: all)."""
    if keep is None:
        return table, items, keys
    rows = [i for i, fresh in enumerate(keep.to_pylist()) if fresh]
    kept_items = items.filter(keep) if isinstance(items, ArrowItems) else [items[i] for i in rows]
    return table.filter(keep), kept_items, [keys[i] for i in rows]


def tagged(
    ctx: ReadContext, endpoint: Endpoint, table: pa.Table, scope: Scope | None = None
) -> Iterator[Any]:
    """The endpoint's own table with its hints (keys held per `scope` read: see `emit`)."""
    yield from emit(
        ctx,
        table,
        table_hints(
            ctx,
            endpoint.table,
            endpoint.primary_key,
            nullability(table.schema),
            fixed=endpoint.fixed_column,
        ),
        scope,
    )


def read_list(ctx: ReadContext, endpoint: Endpoint, scope: Scope, last_value: Any) -> Iterator[Any]:
    """Every page of a list endpoint for one scope, oldest first where the API allows."""
    label = label_of(endpoint, scope)
    since, until = bounds(ctx, endpoint, last_value)
    params: dict[str, Any] = {**endpoint.params, **date_params(ctx, since, until)}
    page_size = list_page_size(ctx, endpoint)
    try:
        yield from read_pages(ctx, endpoint, scope, params, page_size)
    except SkippableApiError as error:
        if error.kind != endpoint.degrade_on:
            raise
        ctx.report.note(f"{label}: {error}; read without {', '.join(endpoint.degrade_drops)}")
        logger.warning(f"{label}: {error}; reading without {endpoint.degrade_drops}")
        for name in endpoint.degrade_drops:
            params.pop(name, None)
        yield from read_pages(ctx, endpoint, scope, params, page_size)
    finally:
        # the scope's list is read once a run
        for table in (endpoint.table, *(child.table for child in endpoint.children)):
            forget(ctx, table, scope)


def list_page_size(ctx: ReadContext, endpoint: Endpoint) -> int:
    """The run's page size (`page_size`), never above the endpoint's largest."""
    return min(ctx.plan.page_size or endpoint.page_size or 1, endpoint.page_size or 1)


def endpoint_pages(
    ctx: ReadContext,
    endpoint: Endpoint,
    path: str,
    params: Mapping[str, Any],
    page_size: int,
    label: str,
    keep: bool = False,
    only: tuple[Column, ...] | None = None,
) -> Iterator[Sequence[Any]]:
    """Every page's items of a paged list, with the paging scheme its endpoint names.

    `keep`: the pages are also kept (up to `KEPT_PAGES_MOST`) for the one later read of the
    very same request, which takes them instead of asking again: a nightly's discovery
    reads the top-level lists its top-level resources read next. `only`: the items are
    read for these of the endpoint's columns alone (a backfill's discovery reads only the
    keys of a year's top-level lists, which Arrow decodes faster than every column and
    child), never with `keep`."""
    if endpoint.paging is None:
        raise ValueError(f"`{endpoint.name}` is not a paged list: its endpoint names no paging")
    if keep and only is not None:
        raise ValueError("pages read for some columns only are not kept for a later read")
    request = (path, tuple(sorted(params.items())), page_size)
    with ctx.lock:
        kept = ctx.kept_pages.pop(request, None)
    if kept is not None:
        yield from kept
        return
    paginator = endpoint.paging.paginator(page_size, ctx.plan.api_base)
    envelope = ctx.plan.edition.error_envelope
    shape = (
        page_shape(endpoint, envelope)
        if only is None
        else shape_of(only, (), endpoint.paging, envelope)
    )
    read = pages(ctx.client, paginator, path, params, label, page_decoder(shape))
    if not keep:
        yield from read
        return
    keeping: list[Sequence[Any]] | None = []
    for items in read:
        if keeping is not None and len(keeping) < KEPT_PAGES_MOST:
            keeping.append(items)
        else:  # a long gap since the last run: the resource reads its pages itself
            keeping = None
        yield items
    if keeping is not None:
        with ctx.lock:
            ctx.kept_pages[request] = keeping


def pages(
    client: ApiClient,
    paginator: Paginator,
    path: str,
    params: Mapping[str, Any],
    label: str,
    decode: Decoder | None = None,
) -> Iterator[Sequence[Any]]:
    """Every page's items, in the host's order; the only paging loop of the extractor.
    `decode`: how the client may read a page (`arrow.pages.page_decoder`).

    A list that would not end stops with `EndlessList` (a skippable error naming the
    request): `EMPTY_PAGES_MOST` empty pages in a row that say more follow, or a paginator's
    own finding (a next start no page made plausible)."""
    query = dict(params)
    paginator.init_request(query)
    url = path
    empty = 0  # empty pages in a row that said more follow
    while True:
        body = client.get_json(url, query, label, decode).body
        try:
            paginator.update_state(body)
        except EndlessList as error:
            raise EndlessList(error.reason, request_text(url, query)) from None
        items = paginator.items(body)
        empty = 0 if len(items) or not paginator.has_next else empty + 1
        if empty >= EMPTY_PAGES_MOST:
            raise EndlessList(
                f"answered {empty} empty pages in a row, each saying more follow",
                request_text(url, query),
            )
        yield items
        if not paginator.has_next:
            return
        following = paginator.update_request(query)
        if following is None:
            return
        if following:
            url = following


def request_text(url: str, query: Mapping[str, Any]) -> str:
    """A request as a message names it: its path (or link, without user info) and query
    (paging and dates: no secret travels in a list's query)."""
    where = bare_url(url) if "://" in url else url
    return f"{where}?{urlencode(query, safe=':')}" if query else where


def read_pages(
    ctx: ReadContext, endpoint: Endpoint, scope: Scope, params: dict[str, Any], page_size: int
) -> Iterator[Any]:
    label = label_of(endpoint, scope)
    for items in endpoint_pages(ctx, endpoint, scope.path(endpoint.path), params, page_size, label):
        if items:
            ctx.report.count_rows(label, len(items))
            yield from with_children(ctx, endpoint, items, scope)


def read_statistics(
    ctx: ReadContext, endpoint: Endpoint, scope: Scope, last_value: Any
) -> Iterator[pa.Table]:
    """One row per calendar period (day by default) and scope: a time series."""
    since, until = bounds(ctx, endpoint, last_value)
    period = ctx.plan.statistics_period
    # a backfill's partial last period would replace a complete row
    spans = [
        (start, end)
        for start, end in periods(since, until, period)
        if not (ctx.plan.backfill and end < period_next(start, period))
    ]
    yield from statistics_table(ctx, endpoint, scope, spans)


def statistics_table(
    ctx: ReadContext, endpoint: Endpoint, scope: Scope, spans: list[tuple[datetime, datetime]]
) -> Iterator[pa.Table]:
    """One row per [start, end) of `spans`, as one table."""
    label = label_of(endpoint, scope)
    period = ctx.plan.statistics_period
    rows: list[Any] = []
    contexts: list[dict[str, Any]] = []
    for start, end in spans:
        params = {**endpoint.params, **date_params(ctx, start, end)}
        body = get_first_working(ctx, endpoint, scope, params).body
        rows.append(body)
        contexts.append(
            {
                **scope.context,
                "level": scope.level,
                "scope": scope.key,
                "period_start": start,
                "period_end": end,
                "period": period,
                **endpoint.params,
            }
        )
    if rows:
        ctx.report.count_rows(label, len(rows))
        yield from tagged(ctx, endpoint, series_to_arrow(rows, endpoint.columns, contexts))


def changed_periods(
    ctx: ReadContext, created_column: str, table: pa.Table, seen: set[datetime]
) -> list[tuple[datetime, datetime]]:
    """The complete statistics periods, older than the ones the statistics resources re-read,
    in which items of this page were created; each period once per run (`seen`).

    However old: `start_date` is no bound, since a backfill (on pipelines of its own) may
    have loaded the period, and a period the dataset did not hold gets a complete, true row.
    """
    period = ctx.plan.statistics_period
    horizon = period_floor(ctx.plan.until - ctx.plan.lookback, period)
    spans = []
    for created in table.column(created_column).to_pylist():
        start = period_floor(created, period) if created is not None else horizon
        if start < horizon and start not in seen:
            seen.add(start)
            spans.append((start, period_next(start, period)))
    return sorted(spans)


def directory_items(ctx: ReadContext, endpoint: Endpoint, scope: Scope) -> list[Any]:
    """A whole, unpaged list, requested once per run (discovery and the resource share it)."""
    with ctx.lock:
        cached = ctx.directories.get(endpoint.name)
    if cached is None:
        body = get_first_working(ctx, endpoint, scope, dict(endpoint.params)).body
        cached = list(body.get("values") or ())
        with ctx.lock:
            ctx.directories[endpoint.name] = cached
    return cached


def read_directory(ctx: ReadContext, endpoint: Endpoint, scope: Scope) -> Iterator[pa.Table]:
    """A whole, unpaged list (the cloud user list)."""
    items = directory_items(ctx, endpoint, scope)
    ctx.report.count_rows(label_of(endpoint, scope), len(items))
    if items:
        yield from tagged(ctx, endpoint, to_arrow(items, endpoint.columns, scope.context))


def skipping(
    ctx: ReadContext, endpoint: Endpoint, scope: Scope, rows: Iterator[Batch]
) -> Generator[Batch, None, bool]:
    """Run a reader; a skippable error ends this scope only, and is reported. Returns
    whether the scope was read completely (its cursor may move)."""
    try:
        yield from rows
    except SkippableApiError as error:
        label = label_of(endpoint, scope)
        if error.kind in endpoint.absent_on:
            ctx.report.note(f"{label}: {error}; nothing to read")
            logger.info(f"{label}: {error}; nothing to read")
            return True
        ctx.report.skip(label, error.kind, str(error))
        logger.warning(f"skipped {label}: {error}")
        return False
    return True
