"""Which scopes each endpoint of a run reads: configured, or discovered once and shared by
every endpoint of the level (a backfill window: its slice of the backfill's discovery)."""

from __future__ import annotations

from collections.abc import Iterator

import dlt

from ..editions.spec import Endpoint
from .context import ReadContext, Scope
from .scopes import (
    Discovered,
    RangeDiscovery,
    directory_users,
    known_scopes,
    nightly_discovery,
    project_scope,
    repository_scope,
    top_scope,
    user_scope,
)


def planned_reads(
    ctx: ReadContext, range_discovery: RangeDiscovery | None = None
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
    ctx: ReadContext, need_users: bool, range_discovery: RangeDiscovery | None = None
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
