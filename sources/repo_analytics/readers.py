"""Reading one endpoint for one scope into Arrow tables: lists, statistics, directories.

These generators are what the dlt resources run. They turn skippable errors into report
entries (the scope is skipped, the run goes on) and let fatal ones end the run.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import dlt
import pyarrow as pa
import pyarrow.compute as pc
from dlt.common import logger

from .client import Answer, ApiClient
from .dates import period_floor, period_next, periods, wire
from .errors import FatalApiError, SkippableApiError
from .paging import pages
from .plan import RunPlan
from .report import RunReport
from .tables import REMOVED, Endpoint, child_rows, to_arrow

# Types are frozen (BI never sees a variant column); new columns may arrive (a new release
# of this package, a host's CSV header growing) without breaking existing installations.
SCHEMA_CONTRACT: Any = {"tables": "evolve", "columns": "evolve", "data_type": "freeze"}


@dataclass(frozen=True)
class Scope:
    """Where an endpoint is read: its level, a stable key, and the values for its path."""

    level: str
    key: str
    path_values: Mapping[str, str]
    context: Mapping[str, Any] = field(default_factory=dict)
    # this scope's part of the reading resource's state (its cursor, fetched details); set
    # per endpoint when the resource reads the scope
    state: MutableMapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def path(self, template: str) -> str:
        return template.format(**{k: quote(v, safe="") for k, v in self.path_values.items()})


@dataclass
class ReadContext:
    """What every reader of one run shares."""

    plan: RunPlan
    client: ApiClient
    report: RunReport
    working_paths: dict[str, str] = field(default_factory=dict)
    directories: dict[str, Any] = field(default_factory=dict)  # unpaged answers, read once
    # natural keys yielded so far in this run, per table (see `emit`)
    emitted: dict[str, set[tuple[Any, ...]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class Batch:
    """Rows for one table with that table's hints: what the readers yield. The resource
    hands the hints to dlt once per table (`source_items`), not with every page."""

    table: pa.Table
    hints: Any

    @property
    def table_name(self) -> str:
        return str(self.hints["table_name"])


def label_of(endpoint: Endpoint, scope: Scope) -> str:
    return f"{endpoint.name}:{scope.key}"


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


def get_first_working(ctx: ReadContext, endpoint: Endpoint, scope: Scope,
                      params: Mapping[str, Any]) -> Answer:
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


def table_hints(ctx: ReadContext, table: str, primary_key: tuple[str, ...],
                columns: dict[str, Any], merge_key: tuple[str, ...] = ()) -> Any:
    """Hints for one table of a resource's output; each table gets its own variant.

    `merge_key` (delete-insert only) makes a re-read key replace every row it had: a
    parent's children, a CSV window. Destinations without delete-insert (Delta tables on a
    filesystem) upsert by primary key instead, without that replacement.
    """
    strategy = ctx.plan.merge_strategy
    hints = dlt.mark.make_hints(
        table_name=table, primary_key=list(primary_key),
        write_disposition={"disposition": "merge", "strategy": strategy},  # type: ignore[arg-type]
        columns=columns, schema_contract=SCHEMA_CONTRACT)
    if merge_key and strategy == "delete-insert":
        hints["merge_key"] = list(merge_key)
    return hints


def emit(ctx: ReadContext, table: pa.Table, hints: Any) -> Iterator[Batch]:
    """`table` with its hints, less the rows that must not reach the destination twice.

    Each natural key is yielded once per run: several levels read the same commit (one set
    of child rows, not one per level), a statistics period can be read by its resource and by
    the refresh, and an item can shift across pages while a list is read. A load whose rows
    repeat a key fails on Delta tables (`MERGE matched a target row with multiple source
    rows`) and depends on dlt's de-duplication elsewhere. The first copy is kept: a later
    change is the next run's (its look-back reads it again).

    Where the destination upserts (Delta tables), hard-delete marker rows are dropped: a Delta
    table stores them on its first load, and an emptied list is pruned after the load instead
    (`pipelines/lake.py`).
    """
    name = hints["table_name"]
    if ctx.plan.merge_strategy == "upsert" and REMOVED in table.column_names:
        table = table.filter(pc.invert(table.column(REMOVED)))
    key_columns = [table.column(c).to_pylist() for c in hints["primary_key"]]
    with ctx.lock:
        seen = ctx.emitted.setdefault(name, set())
        keep = []
        for key in zip(*key_columns, strict=True):
            keep.append(key not in seen)
            seen.add(key)
    if not all(keep):
        table = table.filter(pa.array(keep, type=pa.bool_()))
    if table.num_rows:
        yield Batch(table, hints)


def with_children(ctx: ReadContext, endpoint: Endpoint, items: list[Any],
                  scope: Scope) -> Iterator[Any]:
    """The items as the endpoint's table, then each child table, each with its own hints."""
    table = to_arrow(items, endpoint.columns, scope.context)
    yield from tagged(ctx, endpoint, table)
    for child in endpoint.children:
        rows = child_rows(items, table, child, scope.context)
        columns = nullability(rows.schema)
        columns[REMOVED]["hard_delete"] = True  # marker rows empty a parent's list
        hints = table_hints(ctx, child.table, child.primary_key, columns,
                            merge_key=child.parent_key)
        yield from emit(ctx, rows, hints)
    if endpoint.details is not None and ctx.plan.with_files:
        yield from fetch_details(ctx, endpoint.details, table, scope)


def tagged(ctx: ReadContext, endpoint: Endpoint, table: pa.Table) -> Iterator[Any]:
    yield from emit(ctx, table, table_hints(
        ctx, endpoint.table, endpoint.primary_key, nullability(table.schema)))


def nullability(schema: pa.Schema) -> dict[str, Any]:
    """Column hints from an Arrow schema; zone-less timestamps stay zone-less in the table."""
    hints: dict[str, Any] = {f.name: {"nullable": f.nullable} for f in schema}
    for f in schema:
        if pa.types.is_timestamp(f.type) and f.type.tz is None:
            hints[f.name].update(data_type="timestamp", timezone=False)
    return hints


def fetch_details(ctx: ReadContext, spec: Any, table: pa.Table,
                  scope: Scope) -> Iterator[Any]:
    from .details import read_details

    yield from read_details(ctx, spec, table, scope)


def read_list(ctx: ReadContext, endpoint: Endpoint, scope: Scope,
              last_value: Any) -> Iterator[Any]:
    """Every page of a list endpoint for one scope, oldest first where the API allows."""
    label = label_of(endpoint, scope)
    since, until = bounds(ctx, endpoint, last_value)
    params: dict[str, Any] = {**endpoint.params, **date_params(ctx, since, until)}
    page_size = min(ctx.plan.page_size or endpoint.page_size or 1, endpoint.page_size or 1)
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


def read_pages(ctx: ReadContext, endpoint: Endpoint, scope: Scope, params: dict[str, Any],
               page_size: int) -> Iterator[Any]:
    label = label_of(endpoint, scope)
    paginator = ctx.plan.edition.paginator(page_size, ctx.plan.api_base)
    for items in pages(ctx.client, paginator, scope.path(endpoint.path), params, label):
        if items:
            ctx.report.count_rows(label, len(items))
            yield from with_children(ctx, endpoint, items, scope)


def read_statistics(ctx: ReadContext, endpoint: Endpoint, scope: Scope,
                    last_value: Any) -> Iterator[pa.Table]:
    """One row per calendar period (day by default) and scope: a time series."""
    since, until = bounds(ctx, endpoint, last_value)
    period = ctx.plan.statistics_period
    # a backfill's partial last period would replace a complete row
    spans = [(start, end) for start, end in periods(since, until, period)
             if not (ctx.plan.backfill and end < period_next(start, period))]
    yield from statistics_table(ctx, endpoint, scope, spans)


def statistics_table(ctx: ReadContext, endpoint: Endpoint, scope: Scope,
                     spans: list[tuple[datetime, datetime]]) -> Iterator[pa.Table]:
    """One row per [start, end) of `spans`, as one table."""
    label = label_of(endpoint, scope)
    period = ctx.plan.statistics_period
    rows: list[Any] = []
    contexts: list[dict[str, Any]] = []
    for start, end in spans:
        params = {**endpoint.params, **date_params(ctx, start, end)}
        body = get_first_working(ctx, endpoint, scope, params).body
        rows.append(body)
        contexts.append({**scope.context, "level": scope.level, "scope": scope.key,
                         "period_start": start, "period_end": end, "period": period,
                         **endpoint.params})
    if rows:
        ctx.report.count_rows(label, len(rows))
        tables = [to_arrow([row], endpoint.columns, context)
                  for row, context in zip(rows, contexts, strict=True)]
        yield from tagged(ctx, endpoint, pa.concat_tables(tables))


def changed_periods(ctx: ReadContext, created_column: str, table: pa.Table,
                    seen: set[datetime]) -> list[tuple[datetime, datetime]]:
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


def skipping(ctx: ReadContext, endpoint: Endpoint, scope: Scope,
             rows: Iterator[Batch]) -> Generator[Batch, None, bool]:
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
