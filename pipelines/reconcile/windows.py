"""Windows against the API's statistics: what landed per repository and window (one grouped
DuckDB query per window and measure), the API's numbers for a repository or the top level, and
their comparison (the cloud's zone-less commit dates within a tolerance at the edges).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

import duckdb

from pipelines.reconcile.model import (
    Difference,
    EditionChecks,
    Measures,
    Reconciliation,
    measure,
    required_endpoint,
)
from sources.repo_analytics.dates import wire
from sources.repo_analytics.editions.spec import EditionSpec, Endpoint
from sources.repo_analytics.errors import SkippableApiError
from sources.repo_analytics.reading.context import Scope
from sources.repo_analytics.reading.origin import SOURCE
from sources.repo_analytics.reading.readers import ReadContext
from sources.repo_analytics.reading.scopes import endpoint_for, repository_scope, top_scope

EDGE: Final = timedelta(hours=14)


# `api_statistics`, or a stand-in that answers from what was asked ahead
AskStatistics = Callable[
    [ReadContext, EditionChecks, Measures, tuple[str, ...] | None, datetime, datetime],
    tuple[Any, Any] | str,
]


def api_statistics(
    ctx: ReadContext,
    checks: EditionChecks,
    measures: Measures,
    names: tuple[str, ...] | None,
    start: datetime,
    end: datetime,
) -> tuple[Any, Any] | str:
    """The API's commit and pull-request statistics of one repository (`names`; None: the
    edition's top level) and window, or why they could not be read (a scope the host skips:
    forbidden, not indexed). The query is the repository level's, on the scope's path."""
    spec = ctx.plan.edition
    scope = top_scope(ctx) if names is None else repository_scope(ctx, names)
    dates = {spec.since_param: wire(start), spec.until_param: wire(end)}
    stats = pr_stats = None
    try:
        if measures.commits:
            commit_stats = required_endpoint(ctx, checks.spec.commit_statistics)
            path = scope_path(ctx, commit_stats, scope)
            body = ctx.client.get_json(path, {**commit_stats.params, **dates}, "reconcile").body
            stats = tuple(measure(commit_stats, name, body) for name in checks.spec.commit_measures)
        if not measures.pull_requests:
            return stats, None
        pr_endpoint = required_endpoint(ctx, "pull_request_statistics")
        by_update = {
            k: v
            for k, v in required_endpoint(ctx, "pull_requests").params.items()
            if k in pr_endpoint.params
        }  # the list's date type: updated
        path = scope_path(ctx, pr_endpoint, scope)
        params = {**pr_endpoint.params, **by_update, **dates}
        body = ctx.client.get_json(path, params, "reconcile").body
        pr_stats = {state: measure(pr_endpoint, state, body) for state in checks.spec.pr_states}
    except SkippableApiError as error:
        where = spec.top_level if names is None else "/".join(names)
        return f"{where} {start.date()}..{end.date()} not checked: {error}"
    return stats, pr_stats


def scope_path(ctx: ReadContext, endpoint: Endpoint, scope: Scope) -> str:
    """The path of `endpoint`'s resource at the level of `scope` (the repository endpoint's
    own, or the same resource's endpoint at the top level)."""
    if scope.level == endpoint.level:
        return scope.path(endpoint.path)
    other = endpoint_for(ctx, endpoint.resource, scope.level)
    if other is None:
        raise ValueError(
            f"the {ctx.plan.edition.name} edition has no {scope.level}-level {endpoint.resource}"
        )
    return scope.path(other.path)


def top_level_families(ctx: ReadContext, checks: EditionChecks, measures: Measures) -> Measures:
    """The families whose windows can be confirmed by the top level's statistics: the edition
    has the statistics endpoint at its top level, and (commits) the commit time has a zone: a
    zone-less one may sit on either side of an edge in the API's count."""
    top = ctx.plan.edition.top_level
    return Measures(
        measures.commits
        and not checks.commit_time_is_local
        and endpoint_for(ctx, checks.spec.commit_statistics, top) is not None,
        measures.pull_requests and endpoint_for(ctx, "pull_request_statistics", top) is not None,
    )


def confirmed_by_top_level(
    totals: WindowTotals, answers: tuple[Any, Any] | str, families: Measures
) -> Measures:
    """The families of a window whose top-level statistics (`answers`) equal the sums of what
    landed.

    Every landed row was read from the API, so a repository holds more than the API counts
    only through a row the API has changed since (a pull request updated again, counted in
    its later window, where the dataset then lacks it): equal sums need such faults to
    cancel exactly. Its repositories are then not asked one by one. A host that refuses the
    top level, or counts repositories the run did not read, confirms nothing: each
    repository is asked, as without the top level."""
    if isinstance(answers, str):
        return Measures(False, False)
    stats, pr_stats = answers
    commits = families.commits and list(stats) == [
        sum(int(v[i] or 0) for v in totals.commits().values()) for i in range(2)
    ]
    # only the families asked for: a run that read no pull requests may have no such table
    pull_requests = families.pull_requests and all(
        pr_stats[state] == sum(counts.get(state, 0) for counts in totals.pull_requests().values())
        for state in totals.checks.spec.pr_states
    )
    return Measures(commits, pull_requests)


# the columns of the list tables that `WindowTotals` reads besides the repository key, the
# source and the commit time (`reconcile.columns_read` names every column reconciliation reads)
LINES_ADDED = "lines_added"
PR_STATE = "state"
PR_UPDATED = "updated_at"

RepositoryJob = tuple[tuple[str, ...], datetime, datetime, Measures]  # names, window, families


def repository_jobs(
    ctx: ReadContext,
    checks: EditionChecks,
    measures: Measures,
    totals: dict[tuple[datetime, datetime], WindowTotals],
    repositories: list[tuple[str, ...]],
    every_repository: bool,
    result: Reconciliation,
    ask: AskStatistics = api_statistics,
) -> list[RepositoryJob]:
    """The (repository, window, families) to ask the API for: each window is first asked at
    the top level (when the run read `every_repository` and the edition has the endpoints),
    and a family whose totals match there (`confirmed_by_top_level`) is counted as checked
    for every repository, not asked one by one."""
    windows = list(totals)
    families = top_level_families(ctx, checks, measures)
    asked = every_repository and (families.commits or families.pull_requests)
    top_windows = windows if asked else []
    with ThreadPoolExecutor(max_workers=ctx.plan.concurrency) as pool:
        top_answers = list(pool.map(lambda w: ask(ctx, checks, families, None, *w), top_windows))
    confirmed = {
        window: confirmed_by_top_level(totals[window], answer, families)
        for window, answer in zip(top_windows, top_answers, strict=True)
    }
    jobs: list[RepositoryJob] = []
    for start, end in windows:
        done = confirmed.get((start, end), Measures(False, False))
        left = Measures(
            measures.commits and not done.commits, measures.pull_requests and not done.pull_requests
        )
        result.checked += len(repositories) * (
            len(checks.spec.commit_measures) * done.commits
            + len(checks.spec.pr_states) * done.pull_requests
        )
        result.windows_confirmed += done.commits + done.pull_requests
        if left.commits or left.pull_requests:
            jobs += [(names, start, end, left) for names in repositories]
    return jobs


def compare_window(
    totals: WindowTotals,
    names: tuple[str, ...],
    answers: tuple[Any, Any],
    result: Reconciliation,
    measures: Measures,
) -> None:
    """One repository (`names`: its key columns) in the window of `totals`."""
    stats, pr_stats = answers
    window = WindowCheck(totals, names, result)
    if measures.commits:
        window.commits(stats)
    if measures.pull_requests:
        window.pull_requests(pr_stats)


@dataclass
class WindowTotals:
    """What landed in one window, per repository of the run's source: one grouped query per
    measure and window, each made when first asked, not one per repository."""

    con: duckdb.DuckDBPyConnection
    spec: EditionSpec
    checks: EditionChecks
    source: str
    start: datetime
    end: datetime
    _asked: dict[str, dict[tuple[Any, ...], list[Any]]] = field(default_factory=dict)

    def bounds(self) -> tuple[datetime, datetime]:
        if self.checks.commit_time_is_local:
            return self.start.replace(tzinfo=None), self.end.replace(tzinfo=None)
        return self.start, self.end

    def commits(self) -> dict[tuple[Any, ...], list[Any]]:
        """Commits and lines added whose time is in the window."""
        low, high = self.bounds()
        at = self.checks.commit_time
        return self.grouped("commits", f"{at} >= ? AND {at} < ?", [low, high])

    def near_edges(self) -> dict[tuple[Any, ...], list[Any]]:
        """Commits and lines added within `EDGE` of either end of the window (a zone-less
        commit time may sit on either side of it)."""
        low, high = self.bounds()
        at = self.checks.commit_time
        return self.grouped(
            "near",
            f"(({at} >= ? AND {at} < ?) OR ({at} >= ? AND {at} < ?))",
            [low - EDGE, low + EDGE, high - EDGE, high + EDGE],
        )

    def pull_requests(self) -> dict[tuple[Any, ...], dict[str, int]]:
        """Pull requests updated in the window, by state."""
        found = self.asked(
            "pull_requests",
            f"SELECT {self.key}, lower({PR_STATE}), count(*) FROM {self.checks.pr_table} "
            f"WHERE {SOURCE} = ? AND {PR_UPDATED} >= ? AND {PR_UPDATED} < ? GROUP BY ALL",
            [self.source, self.start, self.end],
            len(self.spec.repository_key) + 1,
        )
        by_state: dict[tuple[Any, ...], dict[str, int]] = {}
        for (*names, state), (count,) in found.items():
            by_state.setdefault(tuple(names), {})[state] = int(count)
        return by_state

    @property
    def key(self) -> str:
        return ", ".join(self.spec.repository_key)

    def grouped(self, name: str, where: str, params: list[Any]) -> dict[tuple[Any, ...], list[Any]]:
        return self.asked(
            name,
            f"SELECT {self.key}, count(*), coalesce(sum({LINES_ADDED}), 0) "
            f"FROM {self.checks.commit_table} WHERE {SOURCE} = ? AND {where} GROUP BY ALL",
            [self.source, *params],
            len(self.spec.repository_key),
        )

    def asked(
        self, name: str, query: str, params: list[Any], width: int
    ) -> dict[tuple[Any, ...], list[Any]]:
        if name not in self._asked:
            self._asked[name] = {
                tuple(row[:width]): list(row[width:])
                for row in self.con.execute(query, params).fetchall()
            }
        return self._asked[name]


@dataclass
class WindowCheck:
    """One repository and window: landed rows against the API's answers."""

    totals: WindowTotals
    names: tuple[str, ...]  # the repository's key columns
    result: Reconciliation

    def differs(self, measure: str, api: int, landed: int, verdict: str) -> None:
        self.result.differences.append(
            Difference(
                "/".join(self.names),
                f"{self.totals.start.date()}..{self.totals.end.date()}",
                measure,
                api,
                int(landed),
                verdict,
            )
        )

    def commits(self, stats: Any) -> None:
        landed = self.totals.commits().get(self.names, [0, 0])
        edge = {"commits": 0, "lines_added": 0}  # what commits near an edge could account for
        if self.totals.checks.commit_time_is_local:
            near = self.totals.near_edges().get(self.names, [0, 0])
            edge = {"commits": int(near[0]), "lines_added": int(near[1])}
        for name, api_value, landed_value in (
            ("commits", stats[0], landed[0]),
            ("lines_added", stats[1], landed[1]),
        ):
            self.result.checked += 1
            if api_value != landed_value:
                self.differs(
                    name,
                    api_value,
                    landed_value,
                    "within_edge_tolerance"
                    if abs(api_value - landed_value) <= edge[name]
                    else "mismatch",
                )

    def pull_requests(self, pr_stats: Any) -> None:
        counts = self.totals.pull_requests().get(self.names, {})
        for state in self.totals.checks.spec.pr_states:
            self.result.checked += 1
            api_value = pr_stats[state]
            if api_value != counts.get(state, 0):
                self.differs(f"pull_requests_{state}", api_value, counts.get(state, 0), "mismatch")
