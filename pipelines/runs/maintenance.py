"""`state`, `reset` and `check`: look at and adjust what the pipeline remembers, and test a host."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import dlt
from dlt.pipeline.helpers import pipeline_drop

from pipelines.destinations.duckdb.file import (
    NOTHING_CHANGED,
    RESET_KEPT,
    configured_lock_wait,
    waiting,
)
from pipelines.destinations.warehouse import exclusive_load
from pipelines.runs.backfill import finished_windows
from pipelines.runs.window_ledger import MOST_READS, records
from sources.repo_analytics import RECONCILIATION_KEY, WINDOW_MARKER, RunReport
from sources.repo_analytics.dates import wire
from sources.repo_analytics.editions import edition_spec
from sources.repo_analytics.errors import ConfigError, DuckDBFileHeld
from sources.repo_analytics.reading.context import edition_client
from sources.repo_analytics.reading.origin import SOURCE_STATE_KEY
from sources.repo_analytics.reading.plan import build_plan
from sources.repo_analytics.reading.scopes import (
    CURSOR_COLUMN_STATE_KEY,
    CURSOR_STATE_KEY,
    SCOPES_STATE_KEY,
    scope_states,
)


def resource_states(pipeline: dlt.Pipeline) -> dict[str, Any]:
    try:  # a DuckDB file another process holds is waited for, as a run does
        waiting(pipeline.sync_destination, configured_lock_wait(), NOTHING_CHANGED)
    except DuckDBFileHeld:
        raise
    except Exception:  # noqa: BLE001 - nothing loaded yet: only local state
        pass
    sources = pipeline.state.get("sources", {})
    return dict(sources.get("repo_analytics", {}).get("resources", {}))


def state_lines(pipeline: dlt.Pipeline) -> Iterator[str]:
    """One line per resource and scope with its cursor, then the finished backfill windows."""
    states = resource_states(pipeline)
    finished = sorted(finished_windows(pipeline))
    if not states and not finished:
        yield "no state yet: nothing has been loaded by this pipeline"
        return
    recorded = pipeline.state.get("sources", {}).get("repo_analytics", {}).get(SOURCE_STATE_KEY)
    yield f"source: {recorded or 'not recorded yet (state of an older version)'}"
    for name, key, state in sorted(scope_states(states), key=lambda each: each[:2]):
        label = f"{name}:{key}"
        if CURSOR_STATE_KEY in state:
            column = states[name].get(CURSOR_COLUMN_STATE_KEY, "")
            yield f"{label}: cursor {column} = {state[CURSOR_STATE_KEY]}"
        fetched = state.get("details_fetched")
        if fetched:
            yield f"{label}: {len(fetched)} commits with files fetched in the look-back window"
        pending = state.get("details_pending")
        if pending:
            yield f"{label}: {len(pending)} commits whose files are pending (fetched next run)"
    yield f"backfill windows finished: {len(finished)}"
    checks = records(pipeline, RECONCILIATION_KEY)
    for key in finished:
        yield f"  {key}{reconciliation_text(checks.get(key))}"
    again = sorted(k for k, v in checks.items() if v.get("verdict") == "mismatch")
    if again:
        yield f"backfill windows the next backfill reads again (a mismatch): {len(again)}"
        for key in again:
            yield f"  {key}{reconciliation_text(checks[key])}"
    last = last_load(pipeline)
    yield f"last successful load: {last or 'unknown'}"


def reconciliation_text(entry: dict[str, Any] | None) -> str:
    """A window's reconciliation as `state` shows it after the window's key."""
    if not entry:
        return ""
    verdict = entry.get("verdict")
    if verdict == "pending":
        return ": reconciliation pending (the next backfill reconciles it)"
    what = "given up, not read again" if verdict == "given_up" else "mismatch"
    reads = f"{entry.get('reads')} of at most {MOST_READS} reads"
    return f": {what} after {reads} ({entry.get('measure')})"


def last_load(pipeline: dlt.Pipeline) -> Any:
    try:
        with pipeline.sql_client() as client:
            rows = client.execute_sql(
                f"SELECT max(inserted_at) FROM {client.make_qualified_table_name('_dlt_loads')}"
                " WHERE status = 0"
            )
            return rows[0][0] if rows else None
    except Exception:  # noqa: BLE001 - no destination tables yet
        return None


def reset(pipeline: dlt.Pipeline, prefix: str, windows: bool) -> list[str]:
    """Forget the cursors of the scopes whose `resource:scope` name starts with `prefix`
    (and, with `windows`, the finished backfill windows), so the next run reads them from
    `start_date` again. Tables are kept; merge keys make the re-read harmless.

    The state is read and written under the dataset's load lock (`exclusive_load`): on a
    warehouse other processes load into (backfill windows, Dagster partitions), no load
    runs between reset's read of the state and its write.
    """
    with exclusive_load(pipeline):
        return forget_state(pipeline, prefix, windows)


def forget_state(pipeline: dlt.Pipeline, prefix: str, windows: bool) -> list[str]:
    states = resource_states(pipeline)
    names = sorted(
        f"{name}:{key}"
        for name, key, _ in scope_states(states)
        if f"{name}:{key}".startswith(prefix)
    )
    if not names and not windows:
        raise ConfigError(
            "resource", prefix, "the start of a resource name shown by `repo-analytics state`"
        )
    if names:
        forget_scopes(pipeline, names)
    if windows:
        names.append(WINDOW_MARKER)
        if finished_windows(pipeline):
            pipeline_drop(pipeline, resources=["re:^" + WINDOW_MARKER + "$"], state_only=True)()
    return names


def forget_scopes(pipeline: dlt.Pipeline, names: list[str]) -> None:
    """Drop the state of each `resource:scope` in `names`, then load the changed state, so
    that the destination's copy (restored on a fresh machine) forgets them too."""
    with pipeline.managed_state(extract_state=True) as state:
        resources = state["sources"]["repo_analytics"]["resources"]  # type: ignore[typeddict-item]
        for name in names:
            resource, _, key = name.partition(":")
            resources[resource][SCOPES_STATE_KEY].pop(key, None)
    pipeline.normalize()
    waiting(pipeline.load, configured_lock_wait(), RESET_KEPT)


def check(source_args: dict[str, Any]) -> list[str]:
    """Validate config, then reach the host with one small request; one line per finding."""
    spec = edition_spec(source_args.get("edition"))
    plan = build_plan(spec, source_args)
    lines = [f"config: ok ({spec.name}, {plan.api_base}, levels {', '.join(plan.levels)})"]
    client = edition_client(plan, RunReport())
    endpoint = next(
        e for e in spec.endpoints if e.level == spec.top_level and e.resource == "commits"
    )
    path = endpoint.path.replace("{workspace}", plan.workspace or "")
    now = datetime.now(UTC)
    params: dict[str, Any] = {
        **endpoint.params,
        spec.since_param: wire(now - timedelta(days=1)),
        spec.until_param: wire(now),
    }
    if endpoint.paging is not None:
        params[endpoint.paging.page_size_param] = 1
    client.get_json(path, params, "check")
    lines.append("host: reachable; credentials, licence and app version: ok")
    return lines
