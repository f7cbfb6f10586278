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
from typing import Any, Optional, Union

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
    RangeDiscovery,
)
from .report import RunReport

__all__ = [
    "ConfigError",
    "EDITION_SPECS",
    "FatalApiError",
    "RepoAnalyticsConfiguration",
    "RepoAnalyticsError",
    "WINDOW_MARKER",
    "RetryBudgetExhausted",
    "RunPlan",
    "RunReport",
    "SkippableApiError",
    "repo_analytics",
]

WINDOW_MARKER = "backfill_windows"


@dlt.source(name="repo_analytics", max_table_nesting=0, spec=ResolvedInTheSource)
def repo_analytics(
    edition: Optional[str] = None,
    base_url: Optional[str] = None,
    api_prefix: Optional[str] = None,
    ca_bundle: Optional[str] = None,
    workspace: Optional[str] = None,
    projects: Optional[Union[list[str], str]] = None,
    levels: Optional[Union[list[str], str]] = None,
    resources: Optional[Union[list[str], str]] = None,
    repositories: Optional[Union[list[str], str]] = None,
    users: Optional[Union[list[str], str]] = None,
    start_date: Optional[str] = None,
    end_date: Optional[str] = None,
    lookback_days: Optional[float] = None,
    page_size: Optional[int] = None,
    statistics_period: Optional[str] = None,
    concurrency: Optional[int] = None,
    with_files: Optional[bool] = None,
    retry: Optional[dict[str, Any]] = None,
    token: Optional[str] = None,
    username: Optional[str] = None,
    password: Optional[str] = None,
    report: Optional[RunReport] = None,
    now: Optional[datetime] = None,
    backfill_window: Optional[dict[str, Any]] = None,
    merge_strategy: Optional[str] = None,
    host_gate: Optional[HostGate] = None,
    range_discovery: Optional[RangeDiscovery] = None,
) -> Iterator[DltResource]:
    """Commits, pull requests, statistics and users of one host, as dlt resources.

    The settings (`edition` to `password`) are those of `RepoAnalyticsConfiguration`, where
    each one's type, default and valid values are declared: an argument given here (not None)
    wins over `.dlt/`, `.dlt/secrets.toml` and the environment. The arguments after them are
    set by the pipelines, never by config.

    Args:
        edition: `cloud` or `server`.
        base_url: the host, e.g. `https://analytics.example.com`.
        api_prefix: the API path prefix; the edition's default when empty.
        ca_bundle: the PEM file of the CAs an HTTPS host is verified against.
        workspace: the cloud workspace slug.
        projects: self-hosted: `all` (discovered) or project keys.
        levels: levels to read (cloud: workspace, repository, user); all by default.
        resources: resource families to read (commits, pull_requests, ...); all by default.
        repositories: `all` (discovered) or repository slugs (self-hosted: `KEY/slug`).
        users: `all` (cloud: the user list; self-hosted: users seen in the global lists) or
            user uuids (cloud) or user slugs (self-hosted).
        start_date: the first instant of a first run (default: 30 days before `end_date`).
        end_date: the frozen upper bound (default: now, at the start of the run).
        lookback_days: how far before each cursor every run re-reads, for late data.
        page_size: page size; the edition's maximum by default.
        statistics_period: month (default), week or day: the grain of statistics rows.
        concurrency: how many scopes each resource (and single commits) reads at once, and
            the most requests open to the host at once.
        with_files: self-hosted: fetch each new commit's per-file line changes.
        retry: retry settings (max_attempts, max_wait_seconds, total_wait_seconds, ...); from
            config, `[sources.repo_analytics.retry]` or `SOURCES__REPO_ANALYTICS__RETRY__<KEY>`.
        token: the access token (secret).
        username: the self-hosted user name, with `password` (secret).
        password: the self-hosted password (secret).
        report: where this run's counts and skips are recorded.
        now: the clock, for tests; the wall clock otherwise.
        backfill_window: set by the backfill: `{"key": ..., "signature": {...}}`. The run
            reads exactly [start_date, end_date) without touching the nightly cursors, and
            records the window as finished in the same load. The last window of a backfill
            that reaches the clock also has `"seed": {resource: [scope keys]}`, the scopes
            of its earlier windows: with its own, their nightly cursors move up to
            `end_date` in the same load, unless a scope is skipped: the first nightly
            then reads only its look-back.
        merge_strategy: set by the pipeline: `upsert` where the destination has no
            delete-insert (Delta tables on a filesystem).
        host_gate: set by the backfill: one gate shared by the windows running at once, so
            429 waits and the `concurrency` bound on open requests hold across all of them.
        range_discovery: set by the backfill: users discovered once over its whole range,
            read by every window (a window's own lists miss users active in it only under
            alias e-mails).

    Yields:
        One resource per selected endpoint and level.
    """
    settings = resolve_settings(
        {
            key: value
            for key, value in {
                "edition": edition,
                "base_url": base_url,
                "api_prefix": api_prefix,
                "ca_bundle": ca_bundle,
                "workspace": workspace,
                "projects": projects,
                "levels": levels,
                "resources": resources,
                "repositories": repositories,
                "users": users,
                "start_date": start_date,
                "end_date": end_date,
                "lookback_days": lookback_days,
                "page_size": page_size,
                "statistics_period": statistics_period,
                "concurrency": concurrency,
                "with_files": with_files,
                "retry": retry,
                "token": token,
                "username": username,
                "password": password,
            }.items()
            if value is not None
        }
    )
    spec = edition_spec(settings.edition)
    plan = build_plan(
        spec,
        {**settings, "backfill": backfill_window is not None, "merge_strategy": merge_strategy},
        now,
    )
    run_report = report if report is not None else RunReport()
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
    client = edition_client(plan, run_report, host_gate or HostGate(plan.concurrency))
    ctx = ReadContext(plan, client, run_report)
    for endpoint, scopes in planned_reads(ctx, range_discovery):
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
        )


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
) -> DltResource:
    """Records a backfill window as finished; dlt commits it with the window's data.

    A window with a skipped scope is not finished (its data is not all in): a skip, before or
    after this resource runs, withdraws the record before dlt commits the state at the end of
    the extract, so a rerun reads the window again.

    `seed`: the scopes of the backfill's earlier windows, by resource, and the backfill's
    end: the last window moves their nightly cursors and its own up to that end in its own
    load (a separate state-only load took ~0.25 s after the last request); a skip puts them
    back, like the record.
    """

    def finished() -> Iterator[Any]:
        records = dlt.current.resource_state().setdefault("finished", {})
        records[key] = signature
        report.on_skip(lambda: records.pop(key, None))
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
