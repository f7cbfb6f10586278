"""Per-item detail requests (the self-hosted single commit with `withFiles`), in parallel.

Opt-in (`with_files`). Items already fetched are remembered in the resource's own state,
pruned to the look-back horizon: a nightly run re-reads only that window, so nothing older
can come back, and the state stays small.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import dlt
import pyarrow as pa

from .errors import SkippableApiError
from .readers import ReadContext, Scope, label_of, nullability, table_hints
from .tables import Column, to_arrow

FETCHED_STATE_KEY = "details_fetched"


@dataclass(frozen=True)
class DetailSpec:
    """GET `path` (with `{id}`) for each item; the list at `list_path` becomes `table`."""

    path: str
    params: dict[str, str]
    table: str
    id_column: str
    parent_key: tuple[str, ...]  # columns of the list row copied into every detail row
    time_column: str  # the item's cursor column, for pruning the fetched set
    list_path: tuple[str, ...]
    columns: tuple[Column, ...]  # read from each element of the list
    element_key: str  # the element column completing the primary key (the file path)


def read_details(ctx: ReadContext, spec: DetailSpec, table: pa.Table,
                 scope: Scope) -> Iterator[Any]:
    """Detail rows for the items of one page not fetched before, as one table."""
    state = dlt.current.resource_state().setdefault(FETCHED_STATE_KEY, {})
    ids = table.column(spec.id_column).to_pylist()
    times = table.column(spec.time_column).to_pylist()
    wanted = [(i, t) for i, t in zip(ids, times, strict=True) if i not in state]
    if not wanted:
        return
    copied = (*spec.parent_key, spec.time_column)  # the cursor column rides along (dlt's filter)
    keys = {name: table.column(name).to_pylist() for name in copied}
    position = {item_id: index for index, item_id in enumerate(ids)}
    label = f"{label_of_details(spec, scope)}"
    with ThreadPoolExecutor(max_workers=ctx.plan.concurrency) as pool:
        answers = list(pool.map(lambda pair: fetch_one(ctx, spec, scope, pair[0], label),
                                wanted))
    rows: dict[str, list[Any]] = {name: [] for name in copied}
    elements: list[Any] = []
    for (item_id, when), answer in zip(wanted, answers, strict=True):
        if answer is None:
            continue
        for element in read_path(answer, spec.list_path):
            for name in copied:
                rows[name].append(keys[name][position[item_id]])
            elements.append(element)
        state[item_id] = stamp(when)
    prune(state, ctx)
    if elements:
        detail = to_arrow(elements, spec.columns, {})
        for name in reversed(copied):
            detail = detail.add_column(0, table.schema.field(name), pa.array(
                rows[name], type=table.schema.field(name).type))
        hints = table_hints(ctx, spec.table, (*spec.parent_key, spec.element_key),
                            nullability(detail.schema), merge_key=spec.parent_key)
        ctx.report.count_rows(label, detail.num_rows)
        yield dlt.mark.with_hints(detail, hints, create_table_variant=True)


def label_of_details(spec: DetailSpec, scope: Scope) -> str:
    return f"{spec.table}:{scope.key}"


def fetch_one(ctx: ReadContext, spec: DetailSpec, scope: Scope, item_id: str,
              label: str) -> Any:
    """One item's detail; a missing, ambiguous or unindexed item is skipped and reported."""
    path = scope.path(spec.path).replace("{id}", item_id)
    try:
        return ctx.client.get_json(path, spec.params, label).body
    except SkippableApiError as error:
        ctx.report.skip(f"{label}/{item_id}", error.kind, str(error))
        return None


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


__all__ = ["DetailSpec", "read_details", "label_of"]
