"""Per-item detail requests (the self-hosted single commit with `withFiles`), in parallel.

Opt-in (`with_files`). Items already fetched are remembered in the list resource's own
state, pruned to the look-back horizon: a nightly run re-reads only that window, so nothing
older can come back, and the state stays small. Items skipped for a reason the host clears
(unindexed changes) are remembered as pending, and a resource of their own fetches them on
every later run until it gets them, however old: the list resource reads only its look-back.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from ..arrow.mapping import arrow_type_of, to_arrow
from ..editions.spec import DetailSpec, Endpoint
from ..errors import SkippableApiError
from .context import ReadContext, Scope, emit, nullability, table_hints

FETCHED_STATE_KEY = "details_fetched"
PENDING_STATE_KEY = "details_pending"


def read_details(
    ctx: ReadContext, endpoint: Endpoint, table: pa.Table, scope: Scope
) -> Iterator[Any]:
    """Detail rows for the items of one page of `endpoint` (which has `details`) not
    fetched before, as one table."""
    spec = endpoint.details
    assert spec is not None  # read only for endpoints with details
    state = scope.state
    fetched = state.setdefault(FETCHED_STATE_KEY, {})
    pending = state.setdefault(PENDING_STATE_KEY, {})
    ids = table.column(spec.id_column).to_pylist()
    times = table.column(spec.time_column).to_pylist()
    wanted = [(i, t) for i, t in zip(ids, times, strict=True) if i not in fetched]
    if not wanted:
        return
    columns = {name: table.column(name).to_pylist() for name in spec.copied}
    position = {item_id: index for index, item_id in enumerate(ids)}
    label = label_of_details(spec, scope)
    found = []
    for (item_id, when), answer in zip(
        wanted, fetch_all(ctx, spec, scope, wanted, label), strict=True
    ):
        if isinstance(answer, SkippableApiError):
            if answer.retryable:
                pending[item_id] = stamp(when)
            continue
        found.append(({n: columns[n][position[item_id]] for n in spec.copied}, answer))
        fetched[item_id] = stamp(when)
        pending.pop(item_id, None)
    prune(fetched, ctx)
    fields = [table.schema.field(name) for name in spec.copied]
    detail = detail_table(spec, found, fields)
    yield from emit_details(ctx, spec, detail, label, endpoint.fixed_in(spec.copied))


def read_pending(
    ctx: ReadContext,
    spec: DetailSpec,
    endpoint: Endpoint,
    scope: Scope,
    owner: MutableMapping[str, Any],
    wanted: list[tuple[str, Any]],
) -> Iterator[Any]:
    """Detail rows of the items `wanted`, which an earlier run of the list resource (whose
    state is `owner`) had to skip; each answer is the item itself too, so its key and time
    come from it. `wanted` is read before the run: the list resource adds to the pending
    items while it runs, and those it has just tried."""
    pending = owner.setdefault(PENDING_STATE_KEY, {})
    if not wanted:
        return
    label = label_of_details(spec, scope)
    found = []
    for (item_id, when), answer in zip(
        wanted, fetch_all(ctx, spec, scope, wanted, label), strict=True
    ):
        if isinstance(answer, SkippableApiError):
            if not answer.retryable:  # gone or ambiguous now: asking again cannot help
                pending.pop(item_id, None)
            continue
        item = to_arrow([answer], endpoint.columns, scope.context)
        found.append(({n: item.column(n)[0].as_py() for n in spec.copied}, answer))
        owner.setdefault(FETCHED_STATE_KEY, {})[item_id] = when
        pending.pop(item_id, None)
    schema = arrow_type_of(endpoint.columns)  # as the list's pages: types and nullability
    fields = [schema.field(name) for name in spec.copied]
    detail = detail_table(spec, found, fields)
    yield from emit_details(ctx, spec, detail, label, endpoint.fixed_in(spec.copied))


def fetch_all(
    ctx: ReadContext, spec: DetailSpec, scope: Scope, wanted: Sequence[tuple[str, Any]], label: str
) -> list[Any]:
    """Each item's answer, or the skippable error it got (reported), `concurrency` at once."""
    with ThreadPoolExecutor(max_workers=ctx.plan.concurrency) as pool:
        return list(pool.map(lambda pair: fetch_one(ctx, spec, scope, pair[0], label), wanted))


def detail_table(
    spec: DetailSpec, found: Sequence[tuple[dict[str, Any], Any]], fields: Sequence[pa.Field]
) -> pa.Table | None:
    """One row per element of each answer's list, led by the item's copied columns."""
    rows: dict[str, list[Any]] = {field.name: [] for field in fields}
    elements: list[Any] = []
    for values, answer in found:
        for element in read_path(answer, spec.list_path):
            for field in fields:
                rows[field.name].append(values[field.name])
            elements.append(element)
    if not elements:
        return None
    detail = to_arrow(elements, spec.columns, {})
    for field in reversed(fields):
        detail = detail.add_column(0, field, pa.array(rows[field.name], type=field.type))
    return detail


def emit_details(
    ctx: ReadContext, spec: DetailSpec, detail: pa.Table | None, label: str, fixed: str | None
) -> Iterator[Any]:
    """The detail rows with their hints (`fixed`: the list's fixed column, where copied)."""
    if detail is None:
        return
    hints = table_hints(
        ctx,
        spec.table,
        (*spec.parent_key, spec.element_key),
        nullability(detail.schema),
        merge_key=spec.parent_key,
        fixed=fixed,
    )
    ctx.report.count_rows(label, detail.num_rows)
    yield from emit(ctx, detail, hints)


def label_of_details(spec: DetailSpec, scope: Scope) -> str:
    return f"{spec.table}:{scope.key}"


def fetch_one(ctx: ReadContext, spec: DetailSpec, scope: Scope, item_id: str, label: str) -> Any:
    """One item's detail, or the skippable error (missing, ambiguous, unindexed) reported."""
    path = scope.path(spec.path).replace("{id}", item_id)
    try:
        return ctx.client.get_json(path, spec.params, label).body
    except SkippableApiError as error:
        ctx.report.skip(f"{label}/{item_id}", error.kind, str(error))
        return error


def read_path(value: Any, path: tuple[str, ...]) -> list[Any]:
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return list(value or ())


def stamp(when: Any) -> str:
    return when.isoformat() if isinstance(when, datetime) else str(when)


def prune(state: dict[str, str], ctx: ReadContext) -> None:
    """Forget items older than anything a later run can re-read."""
    horizon = (ctx.plan.until - ctx.plan.lookback * 2).astimezone(UTC).isoformat()
    for item_id in [i for i, t in state.items() if t < horizon]:
        del state[item_id]


__all__ = ["DetailSpec", "read_details", "read_pending"]
