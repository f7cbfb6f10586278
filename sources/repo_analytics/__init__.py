"""dlt source for the Repository Analytics Export API, cloud and self-hosted editions.

`repo_analytics` is the source; its resources are made per endpoint and scope (one for the
workspace, one per repository, one per user), each with its own incremental cursor, so a
skipped or newly added scope never moves another scope's cursor.
"""

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any, Optional, Union

import dlt
from dlt.extract.resource import DltResource

from .client import ApiClient, HostGate
from .cloud import CLOUD
from .config import retry_values
from .csv_export import read_csv
from .details import read_pending
from .errors import (
    ConfigError,
    FatalApiError,
    RepoAnalyticsError,
    RetryBudgetExhausted,
    SkippableApiError,
)
from .plan import RunPlan, build_plan
from .readers import (
    ReadContext,
    Scope,
    changed_periods,
    read_directory,
    read_list,
    read_statistics,
    skipping,
    statistics_table,
)
from .report import RunReport
from .scopes import (
    Discovered,
    RangeDiscovery,
    directory_users,
    discover,
    endpoint_for,
    known_scopes,
    latest_cursor,
    project_scope,
    repository_scope,
    top_scope,
    user_scope,
)
from .server import SERVER
from .tables import EditionSpec, Endpoint

__all__ = [
    "ConfigError", "EDITION_SPECS", "FatalApiError", "RepoAnalyticsError", "WINDOW_MARKER",
    "RetryBudgetExhausted", "RunPlan", "RunReport", "SkippableApiError", "repo_analytics",
]

EDITION_SPECS: dict[str, EditionSpec] = {"cloud": CLOUD, "server": SERVER}
WINDOW_MARKER = "backfill_windows"


@dlt.source(name="repo_analytics", max_table_nesting=0)
def repo_analytics(
    edition: str = dlt.config.value,
    base_url: str = dlt.config.value,
    api_prefix: Optional[str] = None,
    workspace: Optional[str] = None,
    projects: Optional[Union[list[str], str]] = "all",
    levels: Optional[Union[list[str], str]] = None,
    resources: Optional[Union[list[str], str]] = None,
    repositories: Optional[Union[list[str], str]] = "all",
    users: Optional[Union[list[str], str]] = "all",
    start_date: Optional[str] = None,
    end_date: Optional[str] = None,
    lookback_days: float = 3,
    page_size: Optional[int] = None,
    statistics_period: str = "day",
    concurrency: int = 4,
    with_files: bool = False,
    retry: Optional[dict[str, Any]] = None,
    token: Optional[str] = dlt.secrets.value,
    username: Optional[str] = None,
    password: Optional[str] = dlt.secrets.value,
    report: Optional[RunReport] = None,
    now: Optional[datetime] = None,
    backfill_window: Optional[dict[str, Any]] = None,
    merge_strategy: Optional[str] = None,
    host_gate: Optional[HostGate] = None,
    range_discovery: Optional[RangeDiscovery] = None,
) -> Iterator[DltResource]:
    """Commits, pull requests, statistics and users of one host, as dlt resources.

    Args:
        edition: `cloud` or `server`.
        base_url: the host, e.g. `https://analytics.example.com`.
        api_prefix: the API path prefix; the edition's default when empty.
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
        statistics_period: day, week or month: the grain of statistics rows.
        concurrency: how many scopes (and single commits) are read at once, and the most
            requests open to the host at once.
        with_files: self-hosted: fetch each new commit's per-file line changes.
        retry: retry settings (max_attempts, max_wait_seconds, total_wait_seconds, ...); from
            config, the `retry` table with each `SOURCES__REPO_ANALYTICS__RETRY__<KEY>`
            variable over it.
        token: the access token (secret).
        username: the self-hosted user name, with `password` (secret).
        password: the self-hosted password (secret).
        report: where this run's counts and skips are recorded.
        now: the clock, for tests; the wall clock otherwise.
        backfill_window: set by the backfill: `{"key": ..., "signature": {...}}`. The run
            reads exactly [start_date, end_date) without touching the nightly cursors, and
            records the window as finished in the same load.
        merge_strategy: set by the pipeline: `upsert` where the destination has no
            delete-insert (Delta tables on a filesystem).
        host_gate: set by the backfill: one gate shared by the windows running at once, so
            429 waits and the `concurrency` bound on open requests hold across all of them.
        range_discovery: set by the backfill: users discovered once over its whole range,
            read by every window (a window's own lists miss users active in it only under
            alias e-mails).

    Yields:
        One resource per selected endpoint and scope.
    """
    spec = EDITION_SPECS.get(edition)
    if spec is None:
        raise ConfigError("edition", edition, "one of " + ", ".join(EDITION_SPECS))
    plan = build_plan(spec, {
        "base_url": base_url, "api_prefix": api_prefix, "workspace": workspace,
        "projects": projects,
        "levels": levels, "resources": resources, "repositories": repositories,
        "users": users, "start_date": start_date, "end_date": end_date,
        "lookback_days": lookback_days, "page_size": page_size,
        "statistics_period": statistics_period, "concurrency": concurrency,
        "retry": retry_values(retry),
        "with_files": with_files, "backfill": backfill_window is not None,
        "merge_strategy": merge_strategy,
        "token": token, "username": username, "password": password,
    }, now)
    run_report = report if report is not None else RunReport()
    run_report.read_range = (plan.start if plan.backfill
                             else max(plan.start, plan.until - plan.lookback), plan.until)
    client = ApiClient(plan.api_base, spec.auth_headers(plan.credentials), spec.error_rules,
                       spec.error_message, spec.error_envelope, plan.client, run_report,
                       host_gate or HostGate(plan.concurrency))
    ctx = ReadContext(plan, client, run_report)
    for endpoint, scope in planned_reads(ctx, range_discovery):
        resource = endpoint_resource(ctx, endpoint, scope)
        yield resource
        if endpoint.details is not None and plan.with_files:
            yield pending_details_resource(ctx, endpoint, scope)
        statistics = refreshed_statistics(ctx, endpoint)
        if statistics is not None:
            yield statistics_refresh_resource(ctx, endpoint, statistics, scope, resource)
    if backfill_window is not None:
        yield window_marker(backfill_window["key"], backfill_window["signature"], run_report)


def window_marker(key: str, signature: dict[str, Any], report: RunReport) -> DltResource:
    """Records a backfill window as finished; dlt commits it with the window's data.

    A window with a skipped scope is not finished (its data is not all in): a skip, before or
    after this resource runs, withdraws the record before dlt commits the state at the end of
    the extract, so a rerun reads the window again.
    """
    def finished() -> Iterator[Any]:
        records = dlt.current.resource_state().setdefault("finished", {})
        records[key] = signature
        report.on_skip(lambda: records.pop(key, None))
        yield from ()

    return dlt.resource(finished, name=WINDOW_MARKER, section="repo_analytics")()


def pending_details_resource(ctx: ReadContext, endpoint: Endpoint, scope: Scope) -> DltResource:
    """Fetches the details the list resource of `endpoint` and `scope` had to skip in earlier
    runs (its state holds them), however old: without the list's incremental filter."""
    owner = f"{endpoint.name}:{scope.key}"
    spec = endpoint.details

    def pending() -> Iterator[Any]:
        resources = dlt.current.source_state().setdefault("resources", {})
        yield from read_pending(ctx, spec, endpoint, scope, resources.setdefault(owner, {}))

    return dlt.resource(pending, name=f"{spec.table}.pending.{endpoint.level}:{scope.key}",
                        table_name=spec.table, section="repo_analytics")().parallelize()


def refreshed_statistics(ctx: ReadContext, listing: Endpoint) -> Optional[Endpoint]:
    """The statistics endpoint a nightly read of `listing` refreshes, when both are read."""
    plan = ctx.plan
    if plan.backfill or listing.refreshes is None or listing.refreshes[0] not in plan.resources:
        return None
    return endpoint_for(ctx, listing.refreshes[0], listing.level)


def statistics_refresh_resource(ctx: ReadContext, listing: Endpoint, statistics: Endpoint,
                                scope: Scope, parent: DltResource) -> DltResource:
    """Reads again the statistics periods in which items of `listing` that this run read
    (they changed) were created, where older than the statistics' own look-back, however old
    (a backfill may have loaded them): counted by creation period, those periods' numbers by
    state changed. A transformer of the list resource, so it sees every page the list reads,
    in the same run."""
    assert listing.refreshes is not None
    created_column = listing.refreshes[1]
    seen: set[datetime] = set()

    def refresh(page: Any, meta: Any = None) -> Iterator[Any]:
        if (getattr(meta, "hints", None) or {}).get("table_name") != listing.table:
            return  # the list's child tables (reviewers, participants) pass by
        spans = changed_periods(ctx, created_column, page, seen)
        if spans:
            yield from skipping(ctx, statistics, scope,
                                statistics_table(ctx, statistics, scope, spans))

    return dlt.transformer(refresh, name=f"{statistics.name}.refresh:{scope.key}",
                           data_from=parent, table_name=statistics.table,
                           section="repo_analytics").parallelize()


def planned_reads(ctx: ReadContext, range_discovery: Optional[RangeDiscovery] = None
                  ) -> Iterator[tuple[Endpoint, Scope]]:
    """(endpoint, scope) pairs of this run, scopes discovered once and shared."""
    plan = ctx.plan
    wanted = [e for e in plan.edition.endpoints
              if e.level in plan.levels and e.resource in plan.resources]
    levels = {e.level for e in wanted}
    scopes: dict[str, list[Scope]] = {plan.edition.top_level: [top_scope(ctx)]}
    if levels & {"project", "repository", "user"}:
        repositories, users = scopes_to_read(ctx, "user" in levels, range_discovery)
        scopes["repository"] = [repository_scope(ctx, names) for names in sorted(repositories)]
        projects = plan.projects if plan.projects is not None else sorted(
            {names[0] for names in repositories if len(names) > 1})
        scopes["project"] = [project_scope(ctx, key) for key in projects]
        scopes["user"] = [user_scope(ctx, user) for user in users]
    for endpoint in wanted:
        for scope in scopes.get(endpoint.level, ()):
            yield endpoint, scope


def scopes_to_read(ctx: ReadContext, need_users: bool,
                   range_discovery: Optional[RangeDiscovery] = None
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
    if not configured_repos or (discover_users and range_discovery is None):
        newest = latest_cursor(resource_states)
        slack = plan.cursor_slack(True)
        since = plan.start - slack
        if not plan.backfill and newest is not None and newest - plan.lookback - slack < plan.until:
            since = max(since, newest - plan.lookback - slack)
        discovered = discover(ctx, since)
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
        ranged = (range_discovery.discovered(ctx).users if discover_users and range_discovery
                  else set())
        users = sorted(known | discovered.users | ranged)
    return repositories, users


def endpoint_resource(ctx: ReadContext, endpoint: Endpoint, scope: Scope) -> DltResource:
    """One dlt resource reading `endpoint` for `scope`, with its own cursor."""
    plan = ctx.plan
    # Table hints travel with each yielded table (readers.tagged): one resource feeds a table
    # and its child tables, and each must keep its own keys.
    # `.parallelize()` after the call: dlt drops a decorator's `parallelized=True` when the
    # resource is called with an incremental argument, and the scopes then run one by one.
    hints: dict[str, Any] = dict(name=f"{endpoint.name}:{scope.key}", table_name=endpoint.table,
                                 section="repo_analytics")
    if endpoint.kind == "directory":
        def directory() -> Iterator[Any]:
            yield from skipping(ctx, endpoint, scope, read_directory(ctx, endpoint, scope))

        return dlt.resource(directory, **hints)().parallelize()

    slack = plan.cursor_slack(endpoint.cursor_naive)
    initial = plan.start - slack
    # A backfill window reads exactly its range: dlt then keeps the stored cursor untouched,
    # so a backfill never moves the nightly cursor (back or forth). The end is closed: a
    # statistics period or export window ending at the window's end has that end as its
    # cursor (`period_end`, `window_end`), and an open end would drop it.
    end = plan.until + slack if plan.backfill else None
    if endpoint.cursor_naive:
        initial = initial.replace(tzinfo=None)
        end = end.replace(tzinfo=None) if end is not None else None
    reader = {"list": read_list, "statistics": read_statistics, "csv": read_csv}[endpoint.kind]

    def dated(cursor: Any = dlt.sources.incremental(
            endpoint.cursor or "", initial_value=initial, end_value=end, primary_key=(),
            range_end="closed",
            lag=(plan.lookback + 2 * slack) / timedelta(seconds=1))) -> Iterator[Any]:
        # `cursor.last_value` is already stepped back by `lag` (dlt applies it, so that its
        # filter keeps re-read rows); `bounds` subtracts the look-back from the stored value.
        stored = None if plan.backfill else cursor.get_state().get("last_value")
        yield from skipping(ctx, endpoint, scope, reader(ctx, endpoint, scope, stored))

    return dlt.resource(dated, **hints)().parallelize()
