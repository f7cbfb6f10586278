"""dlt source for the Repository Analytics Export API, cloud and self-hosted editions.

`repo_analytics` is the source; it has one resource per endpoint and level (e.g.
`commits.repository`), which reads all of its scopes (the workspace, each repository, each
user), `concurrency` at once, and keeps a cursor per scope in its own state, so a skipped or
newly added scope never moves another scope's cursor.
"""

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any, Optional

import dlt
from dlt.extract.resource import DltResource

from .client.transport import HostGate
from .config import RepoAnalyticsConfiguration, ResolvedInTheSource
from .editions import EDITION_SPECS, edition_spec
from .editions.spec import Endpoint
from .errors import (
    ConfigError,
    FatalApiError,
    RepoAnalyticsError,
    RetryBudgetExhausted,
    SkippableApiError,
)
from .reading.context import ReadContext, Scope, edition_client
from .reading.details import PENDING_STATE_KEY, read_pending
from .reading.fanin import fan_in
from .reading.items import read_scope, source_items, stored_cursor
from .reading.origin import SOURCE_STATE_KEY, check_state_source
from .reading.plan import RunPlan, build_plan, resolve_settings
from .reading.planned import planned_reads
from .reading.scopes import (
    CURSOR_COLUMN_STATE_KEY,
    CURSOR_STATE_KEY,
    SCOPES_STATE_KEY,
    scopes_by_level,
)
from .report import RunReport
from .run_context import RUN_KEYS, RunContext

__all__ = [
    "ConfigError",
    "EDITION_SPECS",
    "FatalApiError",
    "RepoAnalyticsConfiguration",
    "RepoAnalyticsError",
    "WINDOW_MARKER",
    "RetryBudgetExhausted",
    "RunPlan",
    "READ_SCOPES_KEY",
    "RECONCILIATION_KEY",
    "RUN_KEYS",
    "RunContext",
    "RunReport",
    "SkippableApiError",
    "repo_analytics",
]

WINDOW_MARKER = "backfill_windows"
# the marker's state: window key -> the signature it was finished for; -> the scope keys it
# read, by level; -> its reconciliation (`{"reads": n, "verdict": ..., "measure": ...}`:
# `pipelines/runs/window_ledger.py`)
FINISHED_KEY = "finished"
READ_SCOPES_KEY = "read_scopes"
RECONCILIATION_KEY = "reconciliation"


@dlt.source(name="repo_analytics", max_table_nesting=0, spec=ResolvedInTheSource)
def repo_analytics(
    config: Optional[RepoAnalyticsConfiguration] = None,
    run: Optional[RunContext] = None,
    **settings: Any,
) -> Iterator[DltResource]:
    """Commits, pull requests, statistics and users of one host, as dlt resources.

    The settings are those of `RepoAnalyticsConfiguration`, where each one's type, default and
    valid values are declared once (`docs/configuration.md` lists them): dlt resolves them from
    `.dlt/config.toml`, `.dlt/secrets.toml` and the `SOURCES__REPO_ANALYTICS__<KEY>`
    variables. A setting given here wins, by name (`repo_analytics(edition="cloud",
    base_url=...)`) or in an already resolved `config`.

    Args:
        config: settings to start from (e.g. resolved once by the caller): its values win
            over dlt's config providers.
        run: the pipelines' plumbing for this run (report, clock, backfill window, ...);
            left out in a user's own pipeline.
        **settings: any setting by name; a name that is no setting is refused.

    Yields:
        One resource per selected endpoint and level.
    """
    run = run if run is not None else RunContext()
    resolved = resolve_settings(given_settings(config, settings))
    spec = edition_spec(resolved.edition)
    backfill_window = run.backfill_window
    plan = build_plan(
        spec,
        {
            **resolved,
            "backfill": backfill_window is not None,
            "merge_strategy": run.merge_strategy or destination_merge_strategy(),
        },
        run.now,
    )
    run_report = run.report
    run_report.source = plan.source
    # a pipeline's cursors and windows are one source's: another's would skip its data
    check_state_source(
        dlt.current.source_state(), plan.source, lambda: dlt.current.pipeline().pipeline_name
    )
    yield source_marker(plan.source)
    run_report.read_range = (
        plan.start if plan.backfill else max(plan.start, plan.until - plan.lookback),
        plan.until,
    )
    client = edition_client(plan, run_report, run.host_gate or HostGate(plan.concurrency))
    ctx = ReadContext(plan, client, run_report)
    if run.range_discovery is not None:  # a backfill window: the backfill's user list
        ctx.directories = run.range_discovery.directories
    only = None if backfill_window is None else backfill_window.get("only")
    for endpoint, scopes in planned_reads(ctx, run.range_discovery):
        if only is not None:  # a finished window, read again for scopes that appeared since
            scopes = [scope for scope in scopes if scope.key in only.get(endpoint.level, ())]
            if not scopes:
                continue
        if endpoint.cursor:
            run_report.planned[endpoint.name] = {scope.key for scope in scopes}
        yield endpoint_resource(ctx, endpoint, scopes)
        if endpoint.details is not None and plan.with_files:
            yield pending_details_resource(ctx, endpoint, scopes)
    if backfill_window is not None:
        seed = backfill_window.get("seed")
        yield window_marker(
            backfill_window["key"],
            backfill_window["signature"],
            run_report,
            None if seed is None else (seed, plan.until),
            again_for=only is not None,
            reconcile=bool(backfill_window.get("reconcile")),
        )


def given_settings(
    config: RepoAnalyticsConfiguration | None, settings: dict[str, Any]
) -> dict[str, Any]:
    """The settings given to the source: `settings` by name over `config`'s values. A name
    that is no setting raises `ConfigError` naming the valid ones."""
    fields = RepoAnalyticsConfiguration.get_resolvable_fields()
    for key, value in settings.items():
        if key not in fields:
            raise ConfigError(key, value, "no such setting; the settings: " + ", ".join(fields))
    given = {key: getattr(config, key) for key in fields} if config is not None else {}
    return {key: value for key, value in {**given, **settings}.items() if value is not None}


def destination_merge_strategy() -> str | None:
    """`upsert` where the active pipeline's destination has no delete-insert (Delta tables on
    a filesystem, where dlt's merge upserts by primary key); dlt's default otherwise."""
    destination = dlt.current.pipeline().destination
    if destination is not None and destination.destination_name == "filesystem":
        return "upsert"
    return None


def move_cursors(
    resource_state: dict[str, Any], cursors: dict[str, datetime]
) -> Callable[[], None]:
    """Moves the cursors of a resource's scopes up to the given values (never back); returns
    what puts them back as they were."""
    states = resource_state.setdefault(SCOPES_STATE_KEY, {})
    before = {key: (states.get(key) or {}).get(CURSOR_STATE_KEY) for key in cursors}
    for key, value in cursors.items():
        state = states.setdefault(key, {})
        state[CURSOR_STATE_KEY] = max(
            stored_cursor(state.get(CURSOR_STATE_KEY)) + stored_cursor(value)
        )

    def put_back() -> None:
        for key, value in before.items():
            if value is None:
                states[key].pop(CURSOR_STATE_KEY, None)
            else:
                states[key][CURSOR_STATE_KEY] = value

    return put_back


def source_marker(source: str) -> DltResource:
    """Records the source this pipeline's state belongs to (the source function's own state
    writes are discarded by dlt); reads nothing."""

    def record() -> Iterator[Any]:
        dlt.current.source_state()[SOURCE_STATE_KEY] = source
        yield from ()

    return dlt.resource(record, name="source_marker", section="repo_analytics")()


def window_marker(
    key: str,
    signature: dict[str, Any],
    report: RunReport,
    seed: tuple[dict[str, list[str]], datetime] | None = None,
    again_for: bool = False,
    reconcile: bool = False,
) -> DltResource:
    """Records a backfill window as finished, with the scopes it read by level; dlt commits
    it with the window's data.

    A window with a skipped scope is not finished (its data is not all in): a skip, before or
    after this resource runs, withdraws the record before dlt commits the state at the end of
    the extract, so a rerun reads the window again.

    `again_for`: a finished window read again for scopes that appeared since (the run's
    planned scopes): they join its scopes, unless a scope is skipped (then the next backfill
    tries them again); its reconciliation's record is left as it is (the reconciliation
    compares the repository level, which such a read does not write). `reconcile`: the
    window's reconciliation is recorded as pending, its reads counted
    (`pipelines/runs/window_ledger.py`); else any record of it is dropped.

    `seed`: the scopes of the backfill's earlier windows, by resource, and the backfill's
    end: the last window moves their nightly cursors and its own up to that end in its own
    load, not in a state-only load after the last request (`docs/decisions/reading-costs.md`);
    a skip puts them back, like the record.
    """

    def finished() -> Iterator[Any]:
        state = dlt.current.resource_state()
        records = state.setdefault(FINISHED_KEY, {})
        if not again_for:
            records[key] = signature
            report.on_skip(lambda: records.pop(key, None))
        read = scopes_by_level(report.planned)
        if again_for:
            read = scopes_by_level(report.planned, state.get(READ_SCOPES_KEY, {}).get(key) or {})
        report.on_skip(replacing(state.setdefault(READ_SCOPES_KEY, {}), key, read))
        if not again_for:  # a user's lists alone change nothing the reconciliation compares
            checks = state.setdefault(RECONCILIATION_KEY, {})
            reads = int((checks.get(key) or {}).get("reads", 0)) + 1
            pending = {"reads": reads, "verdict": "pending"} if reconcile else None
            report.on_skip(replacing(checks, key, pending))
        if seed is not None:
            earlier, end = seed
            resources = dlt.current.source_state().setdefault("resources", {})
            for name in sorted({*earlier, *report.planned}):
                scopes = {*earlier.get(name, ()), *report.planned.get(name, ())}
                report.on_skip(
                    move_cursors(resources.setdefault(name, {}), dict.fromkeys(scopes, end))
                )
        yield from ()

    return dlt.resource(finished, name=WINDOW_MARKER, section="repo_analytics")()


def replacing(records: dict[str, Any], key: str, value: Any) -> Callable[[], None]:
    """Sets `records[key]` to `value` (None: drops it); returns what puts it back."""
    before = records.get(key)
    if value is None:
        records.pop(key, None)
    else:
        records[key] = value

    def put_back() -> None:
        if before is None:
            records.pop(key, None)
        else:
            records[key] = before

    return put_back


def pending_details_resource(
    ctx: ReadContext, endpoint: Endpoint, scopes: Sequence[Scope]
) -> DltResource:
    """Fetches the details the list resource of `endpoint` had to skip in earlier runs (its
    state holds them, per scope), however old: the list reads only its look-back."""
    spec = endpoint.details
    assert spec is not None  # made only for endpoints with details

    # read now, in the source function: while the resources run, the list resource adds
    # the items it has just tried
    stored = dlt.current.source_state().get("resources", {}).get(endpoint.name, {})
    wanted = {
        key: list((state.get(PENDING_STATE_KEY) or {}).items())
        for key, state in (stored.get(SCOPES_STATE_KEY) or {}).items()
    }

    def pending() -> Iterator[Any]:
        resources = dlt.current.source_state().setdefault("resources", {})
        states = resources.setdefault(endpoint.name, {}).setdefault(SCOPES_STATE_KEY, {})
        tasks = [
            partial(
                read_pending,
                ctx,
                spec,
                endpoint,
                scope,
                states.setdefault(scope.key, {}),
                wanted.get(scope.key, []),
            )
            for scope in scopes
            if wanted.get(scope.key)
        ]
        yield from source_items(fan_in(tasks, ctx.plan.concurrency))

    return dlt.resource(
        pending,
        name=f"{spec.table}.pending.{endpoint.level}",
        table_name=spec.table,
        section="repo_analytics",
    )()


def endpoint_resource(ctx: ReadContext, endpoint: Endpoint, scopes: Sequence[Scope]) -> DltResource:
    """One dlt resource reading `endpoint` for all of its scopes, `concurrency` at once.

    Each scope keeps its own cursor in the resource's state (`scopes.<key>.last_value`), set
    to the run's end once the scope was read completely: a skipped scope keeps its cursor,
    and a new scope starts at `start_date`, whatever the other scopes' cursors.
    """

    def read_scopes() -> Iterator[Any]:
        state = dlt.current.resource_state()
        if endpoint.cursor:
            state[CURSOR_COLUMN_STATE_KEY] = endpoint.cursor  # shown by `repo-analytics state`
        states = state.setdefault(SCOPES_STATE_KEY, {})
        tasks = [
            partial(
                read_scope, ctx, endpoint, replace(scope, state=states.setdefault(scope.key, {}))
            )
            for scope in scopes
        ]
        yield from source_items(fan_in(tasks, ctx.plan.concurrency))

    return dlt.resource(
        read_scopes, name=endpoint.name, table_name=endpoint.table, section="repo_analytics"
    )()
