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

from .client import edition_client
from .config import RepoAnalyticsConfiguration, ResolvedInTheSource
from .csv_export import read_csv
from .details import PENDING_STATE_KEY, read_pending
from .editions import EDITION_SPECS, edition_spec
from .errors import (
    ConfigError,
    FatalApiError,
    RepoAnalyticsError,
    RetryBudgetExhausted,
    SkippableApiError,
)
from .fanin import fan_in
from .items import source_items, stored_cursor, tracking, with_refresh
from .origin import SOURCE_STATE_KEY, check_state_source
from .plan import RunPlan, build_plan, resolve_settings
from .readers import (
    Batch,
    ReadContext,
    Scope,
    read_directory,
    read_list,
    read_statistics,
    skipping,
)
from .report import RunReport
from .scopes import (
    CURSOR_COLUMN_STATE_KEY,
    CURSOR_STATE_KEY,
    SCOPES_STATE_KEY,
    Discovered,
    RangeDiscovery,
    directory_users,
    endpoint_for,
    known_scopes,
    nightly_discovery,
    project_scope,
    repository_scope,
    scopes_by_level,
    top_scope,
    user_scope,
)
from .tables import Endpoint
from .transport import HostGate

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
# the marker's state: window key -> the signature it was finished for; -> the scope keys it
# read, by level; -> its reconciliation (`{"reads": n, "verdict": ..., "measure": ...}`:
# `pipelines/window_ledger.py`)
FINISHED_KEY = "finished"
READ_SCOPES_KEY = "read_scopes"
RECONCILIATION_KEY = "reconciliation"
READERS = {"list": read_list, "statistics": read_statistics, "csv": read_csv}


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
            records the window as finished in the same load, with the scopes it read. The
            last window of a backfill that reaches the clock also has `"seed": {resource:
            [scope keys]}`, the scopes of its earlier windows: with its own, their nightly
            cursors move up to `end_date` in the same load, unless a scope is skipped: the
            first nightly then reads only its look-back. `"only": {level: [scope keys]}`:
            a finished window read again for these scopes alone (they appeared since).
            `"reconcile": true`: the window's reconciliation is to follow the backfill, and
            is recorded as pending until it did (`pipelines/window_ledger.py`).
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
    only = None if backfill_window is None else backfill_window.get("only")
    for endpoint, scopes in planned_reads(ctx, range_discovery):
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
    (`pipelines/window_ledger.py`); else any record of it is dropped.

    `seed`: the scopes of the backfill's earlier windows, by resource, and the backfill's
    end: the last window moves their nightly cursors and its own up to that end in its own
    load (a separate state-only load took ~0.25 s after the last request); a skip puts them
    back, like the record.
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


def refreshed_statistics(ctx: ReadContext, listing: Endpoint) -> Optional[Endpoint]:
    """The statistics endpoint a nightly read of `listing` refreshes, when both are read."""
    plan = ctx.plan
    if plan.backfill or listing.refreshes is None or listing.refreshes[0] not in plan.resources:
        return None
    return endpoint_for(ctx, listing.refreshes[0], listing.level)


def planned_reads(
    ctx: ReadContext, range_discovery: Optional[RangeDiscovery] = None
) -> Iterator[tuple[Endpoint, list[Scope]]]:
    """Each endpoint of this run with its scopes, discovered once and shared."""
    plan = ctx.plan
    wanted = plan.endpoints
    levels = {e.level for e in wanted}
    scopes: dict[str, list[Scope]] = {plan.edition.top_level: [top_scope(ctx)]}
    if levels & {"project", "repository", "user"}:
        repositories, users = scopes_to_read(ctx, "user" in levels, range_discovery)
        scopes["repository"] = [repository_scope(ctx, names) for names in sorted(repositories)]
        projects = (
            plan.projects
            if plan.projects is not None
            else sorted({names[0] for names in repositories if len(names) > 1})
        )
        scopes["project"] = [project_scope(ctx, key) for key in projects]
        if "user" in levels:
            scopes["user"] = [user_scope(ctx, user) for user in users]
    for endpoint in wanted:
        yield endpoint, scopes.get(endpoint.level, [])


def scopes_to_read(
    ctx: ReadContext, need_users: bool, range_discovery: Optional[RangeDiscovery] = None
) -> tuple[set[tuple[str, ...]], list[str]]:
    """Repositories and users: configured, or read before plus active since the newest cursor
    (a backfill window: repositories active in the window, users active in the backfill's
    whole range, `range_discovery`).

    The source function's own state writes are discarded by dlt, so the scopes read before
    are those with a stored resource state. Discovery re-reads only the look-back behind the
    newest cursor (the last run's end): an old cursor (a dormant user, a scope with no items)
    must not make every nightly run re-read the top-level lists from the start.
    """
    plan = ctx.plan
    configured_repos = plan.repositories is not None
    directory = directory_users(ctx) if need_users and plan.users is None else None
    discover_users = need_users and plan.users is None and directory is None
    discovered = Discovered()
    # A backfill window reads the scopes active in it (or configured), and the users of the
    # whole backfill: what a window reads must not depend on which earlier windows its
    # pipeline happened to load.
    resource_states = {} if plan.backfill else dlt.current.source_state().get("resources", {})
    if range_discovery is not None and range_discovery.spans(plan.start, plan.until):
        # a window as long as the backfill (its CSV exports): the range's discovery is its own
        discovered = range_discovery.discovered(ctx)
    elif (
        range_discovery is not None
        and not configured_repos
        and range_discovery.has_window(plan.start, plan.until)
    ):  # a backfill window: its slice of the range, read once for all the windows
        discovered = range_discovery.window(ctx, plan.start, plan.until, plan.resources)
    elif not configured_repos or (discover_users and range_discovery is None):
        discovered = nightly_discovery(ctx, resource_states)
    if configured_repos:
        repositories = {tuple(name.split("/")) for name in plan.repositories or ()}
    else:
        repositories = known_scopes(resource_states, "repository") | discovered.repositories
    if plan.users is not None:
        users = list(plan.users)
    elif directory is not None:
        users = directory
    else:
        known = {key[0] for key in known_scopes(resource_states, "user")}
        ranged = (
            range_discovery.discovered(ctx).users if discover_users and range_discovery else set()
        )
        users = sorted(known | discovered.users | ranged)
    return repositories, users


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
