"""Which scopes a run reads: the top level, repositories and users, configured or discovered."""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from ..arrow.mapping import to_arrow
from ..dates import windows as half_open_windows
from ..dates import wire
from ..editions.spec import Endpoint
from ..settings import DISCOVERY_PART_SHORTEST
from .context import ReadContext, Scope
from .readers import directory_items, endpoint_pages, list_page_size


def top_scope(ctx: ReadContext) -> Scope:
    plan = ctx.plan
    key = plan.workspace or plan.edition.top_level
    values = {"workspace": plan.workspace} if plan.workspace else {}
    return Scope(plan.edition.top_level, key, values)


def repository_scope(ctx: ReadContext, names: tuple[str, ...]) -> Scope:
    spec = ctx.plan.edition
    values = dict(top_scope(ctx).path_values)
    values.update(zip(spec.repository_path, names, strict=True))
    return Scope("repository", "/".join(names), values, {"repository": "/".join(names)})


def user_scope(ctx: ReadContext, user: str) -> Scope:
    values = {**top_scope(ctx).path_values, "user": user}
    return Scope("user", user, values, {"user": user})


def endpoint_for(ctx: ReadContext, resource: str, level: str) -> Endpoint | None:
    for endpoint in ctx.plan.edition.endpoints:
        if endpoint.resource == resource and endpoint.level == level:
            return endpoint
    return None


@dataclass
class Discovered:
    """What the top-level lists showed: repositories (by their key columns) and users."""

    repositories: set[tuple[str, ...]] = field(default_factory=set)
    users: set[str] = field(default_factory=set)

    def add(self, other: Discovered) -> Discovered:
        self.repositories |= other.repositories
        self.users |= other.users
        return self


def discovery_families(resources: Sequence[str]) -> list[str]:
    """The list families whose top-level lists show the scopes of `resources`: their own
    lists; statistics alone still need the commit list."""
    return [r for r in ("commits", "pull_requests") if r in resources] or ["commits"]


def discover(
    ctx: ReadContext,
    since: datetime,
    until: datetime | None = None,
    resources: Sequence[str] | None = None,
    keep: bool = False,
    stop: threading.Event | None = None,
) -> Discovered:
    """Repositories and users with activity in [since, until) (until: the run's end), from
    the top-level lists of the run's resource families (or `resources`); `keep`: their pages
    are kept for the top-level resource's read of the same request (`endpoint_pages`);
    `stop`, once set, ends the read at the next page (what was found so far is returned)."""
    plan, spec = ctx.plan, ctx.plan.edition
    found = Discovered()
    top = top_scope(ctx)
    families = discovery_families(plan.resources if resources is None else resources)
    for resource in families:
        endpoint = endpoint_for(ctx, resource, spec.top_level)
        if endpoint is None or endpoint.paging is None or endpoint.page_size is None:
            continue
        params = {
            **endpoint.params,
            spec.since_param: wire(since),
            spec.until_param: wire(until or plan.until),
        }
        wanted = set(spec.repository_key) | set(spec.user_columns)
        key_columns = [c for c in endpoint.columns if c.name in wanted]
        for items in endpoint_pages(
            ctx,
            endpoint,
            top.path(endpoint.path),
            params,
            list_page_size(ctx, endpoint),
            f"discovery.{endpoint.name}",
            keep,
            None if keep else tuple(key_columns),
        ):
            if stop is not None and stop.is_set():
                return found
            table = to_arrow(items, key_columns, {})
            found.repositories.update(
                zip(*(table.column(name).to_pylist() for name in spec.repository_key), strict=True)
            )
            for name in spec.user_columns:
                if name in table.column_names:
                    found.users.update(u for u in table.column(name).to_pylist() if u)
    return found


def nightly_discovery(ctx: ReadContext, resource_states: Mapping[str, Any]) -> Discovered:
    """The scopes active since the last run: each family's top-level list read from where
    its top-level resource reads it (its cursor less the look-back and the cursor's slack),
    so that resource takes the pages read here; with no such cursor, from the newest
    cursor of all, less the widest slack. Never before the start."""
    plan = ctx.plan
    found = Discovered()
    newest = latest_cursor(resource_states)
    top = top_scope(ctx)
    for family in discovery_families(plan.resources):
        endpoint = endpoint_for(ctx, family, plan.edition.top_level)
        if endpoint is None:
            continue
        states = resource_states.get(endpoint.name) or {}
        cursor = ((states.get(SCOPES_STATE_KEY) or {}).get(top.key) or {}).get(CURSOR_STATE_KEY)
        anchor, slack = newest, plan.cursor_slack(True)
        if isinstance(cursor, datetime):
            anchor = cursor if cursor.tzinfo else cursor.replace(tzinfo=UTC)
            slack = plan.cursor_slack(endpoint.cursor_naive)
        since = plan.start - slack
        if anchor is not None and anchor - plan.lookback - slack < plan.until:
            since = max(since, anchor - plan.lookback - slack)
        read_next = (
            not plan.backfill and plan.edition.top_level in plan.levels and family in plan.resources
        )
        found.add(discover(ctx, since, resources=[family], keep=read_next))
    return found


@dataclass
class RangeDiscovery:
    """Discovery over a whole backfill range, read once and shared by all its windows.

    The top-level lists show a self-hosted user only through a commit's `user` object (absent
    for an alias e-mail) or a pull request's author, while the user-level lists count alias
    commits too: a user whose only activity in a window is alias commits is invisible in that
    window's lists. Windows therefore read the users active anywhere in the range. The range
    is read in the slices of its `windows` (each from its start less the cursor slack), each
    slice and family once: a window's repositories are those of its own slice, the range's
    scopes those of all slices, so what a window reads does not depend on which windows ran
    before it, or at the same time, and no slice is read twice.

    A slice's pages follow one another (each page's link or start leads to the next), so a
    slice alone keeps one request open, and a remote host's latency adds up page after page
    (`docs/decisions/reading-costs.md`): each slice is read in `concurrency` consecutive parts at
    once (none
    shorter than `DISCOVERY_PART_SHORTEST`: a part costs a request even where it holds
    nothing). The first ask reads its window's slice and leaves the later slices to read in
    the background, `concurrency` parts at once, in window order, within the same
    open-request bound as the windows' reads: the first window starts after its own slice,
    not the whole range's, and discovery's waits on the host overlap the windows' work.
    `close` stops what is left, for good (an
    ask after it is an error).
    """

    start: datetime
    until: datetime
    # the backfill's resource families: its CSV exports' window reads no list of its own
    resources: tuple[str, ...] | None = None
    windows: tuple[tuple[datetime, datetime], ...] = ()  # the slices; none: the whole range
    # the unpaged answers (the cloud user list), read once for every window: the windows'
    # users are the range's (`ReadContext.directories`)
    directories: dict[str, Any] = field(default_factory=dict)
    # each slice and family: its parts, read or being read
    _parts: dict[tuple[datetime, datetime, str], list[Future[Discovered]]] = field(
        default_factory=dict
    )
    _pool: ThreadPoolExecutor | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closed: threading.Event = field(default_factory=threading.Event)

    def spans(self, start: datetime, until: datetime) -> bool:
        """Whether [start, until) is this whole range."""
        return (self.start, self.until) == (start, until)

    def slices(self) -> tuple[tuple[datetime, datetime], ...]:
        return self.windows or ((self.start, self.until),)

    def has_window(self, start: datetime, until: datetime) -> bool:
        """Whether [start, until) is one of the range's slices."""
        return (start, until) in self.slices()

    def window(
        self, ctx: ReadContext, start: datetime, until: datetime, resources: Sequence[str]
    ) -> Discovered:
        """The scopes active in the slice [start, until) in the lists of `resources`; the
        later slices go on being read in the background."""
        self._ask(ctx, resources, start)
        found = Discovered()
        for family in discovery_families(resources):
            for part in self._parts[start, until, family]:
                found.add(part.result())
        return found

    def discovered(self, ctx: ReadContext) -> Discovered:
        """The scopes active anywhere in the range, in the lists of the range's families."""
        resources = ctx.plan.resources if self.resources is None else self.resources
        self._ask(ctx, resources)
        found = Discovered()
        for start, until in self.slices():
            found.add(self.window(ctx, start, until, resources))
        return found

    def close(self) -> None:
        """Drop the parts not read yet and stop those under way at their next page (a
        failed or interrupted backfill need not wait for the later slices)."""
        self._closed.set()
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def _ask(
        self, ctx: ReadContext, resources: Sequence[str], onward: datetime | None = None
    ) -> None:
        """Start reading the slices of the families of `resources` not asked yet (those from
        `onward` on: the windows before it ran already, or a rerun skips them), in order."""
        concurrency = ctx.plan.concurrency
        with self._lock:
            if self._closed.is_set():
                raise RuntimeError("the backfill's discovery was closed")
            for start, until in self.slices():
                if onward is not None and start < onward:
                    continue
                for family in discovery_families(resources):
                    if (start, until, family) in self._parts:
                        continue
                    if self._pool is None:
                        self._pool = ThreadPoolExecutor(concurrency, "repo_analytics_discovery")
                    since = start - ctx.plan.cursor_slack(True)
                    self._parts[start, until, family] = [
                        self._pool.submit(self._read_part, ctx, a, b, family)
                        for a, b in half_open_windows(
                            since, until, part_length(since, until, concurrency)
                        )
                    ]

    def _read_part(
        self, ctx: ReadContext, since: datetime, until: datetime, family: str
    ) -> Discovered:
        return discover(ctx, since, until, [family], stop=self._closed)


def part_length(since: datetime, until: datetime, count: int) -> timedelta:
    """The length, in whole seconds, that cuts [since, until) in at most `count` parts, none
    shorter than `DISCOVERY_PART_SHORTEST` (a slice shorter than two of those: one part)."""
    count = max(1, min(count, (until - since) // DISCOVERY_PART_SHORTEST))
    return timedelta(seconds=max(1, -(-int((until - since).total_seconds()) // count)))


def project_scope(ctx: ReadContext, key: str) -> Scope:
    return Scope("project", key, {"project": key}, {"project": key})


def directory_users(ctx: ReadContext) -> list[str] | None:
    """Every user of the edition's user list, or None when the edition has none."""
    endpoint = endpoint_for(ctx, "users", ctx.plan.edition.top_level)
    if endpoint is None:
        return None
    table: pa.Table = to_arrow(directory_items(ctx, endpoint, top_scope(ctx)), endpoint.columns, {})
    return sorted(table.column(ctx.plan.edition.user_key).to_pylist())


SCOPES_STATE_KEY = "scopes"  # a resource's state: its scopes' own states, by scope key
CURSOR_STATE_KEY = "last_value"  # a scope's state: the newest cursor value it read
CURSOR_COLUMN_STATE_KEY = "cursor_column"  # a resource's state: the column its cursors follow


def scope_states(
    resource_states: Mapping[str, Any], prefix: str = ""
) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(resource name, scope key, scope state) of resources whose name starts with `prefix`."""
    for name, state in resource_states.items():
        if name.startswith(prefix) and isinstance(state, Mapping):
            for key, scope_state in (state.get(SCOPES_STATE_KEY) or {}).items():
                yield name, key, scope_state


def stored_cursors(resource_states: Mapping[str, Any], prefix: str = "") -> list[datetime]:
    """Stored cursors (as UTC) of resources whose name starts with `prefix`."""
    values: list[datetime] = []
    for _, _, state in scope_states(resource_states, prefix):
        last = state.get(CURSOR_STATE_KEY)
        if isinstance(last, datetime):
            values.append(last if last.tzinfo else last.replace(tzinfo=UTC))
    return values


def latest_cursor(resource_states: Mapping[str, Any], prefix: str = "") -> datetime | None:
    """The newest stored cursor among resources whose name starts with `prefix`."""
    return max(stored_cursors(resource_states, prefix), default=None)


def scopes_by_level(
    planned: Mapping[str, Collection[str]], also: Mapping[str, Collection[str]] | None = None
) -> dict[str, list[str]]:
    """The scope keys of `planned` (by resource, named `<family>.<level>`) by level, with
    those of `also` (by level), each level's sorted: what a backfill window read."""
    found: dict[str, set[str]] = {level: set(keys) for level, keys in (also or {}).items()}
    for name, keys in planned.items():
        found.setdefault(name.rpartition(".")[2], set()).update(keys)
    return {level: sorted(keys) for level, keys in sorted(found.items())}


def known_scopes(resource_states: Mapping[str, Any], level: str) -> set[tuple[str, ...]]:
    """Scopes of `level` read before: resources are named `<resource>.<level>`, and keep a
    state per scope (the source function's own state writes are discarded by dlt)."""
    return {
        tuple(key.split("/"))
        for name, key, _ in scope_states(resource_states)
        if name.endswith("." + level)
    }
