"""Self-reconciliation: what landed, compared with the API's own statistics.

For each repository and window: commit counts and lines added (the commit statistics
endpoint) and pull requests created, by state (the pull-request statistics endpoint), against
the loaded tables. The cloud commit `date` has no zone, so for the cloud edition a commit near
a window edge may fall on either side: a difference no larger than what the commits within
14 hours of an edge (the widest offsets) add up to — in count, or in lines — is reported as
`within_edge_tolerance`, not as a mismatch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, Final

import duckdb

from sources.repo_analytics import EDITION_SPECS, RunReport
from sources.repo_analytics.client import ApiClient
from sources.repo_analytics.dates import wire
from sources.repo_analytics.plan import build_plan
from sources.repo_analytics.readers import ReadContext
from sources.repo_analytics.scopes import endpoint_for, repository_scope
from sources.repo_analytics.tables import Endpoint

EDGE: Final = timedelta(hours=14)


@dataclass(frozen=True)
class EditionChecks:
    """Where each edition keeps what is compared; the API side comes from its endpoint table."""

    commit_table: str
    commit_time: str  # column compared with the window
    commit_time_is_local: bool
    commit_statistics: str  # resource family of the repository-level commit statistics
    commits_field: tuple[str, ...]
    added_field: tuple[str, ...]
    pr_table: str
    pr_states: tuple[str, ...]


CHECKS: Final = {
    "cloud": EditionChecks("cloud_commits", "date_local", True, "change_statistics",
                           ("commits",), ("lines_of_code", "added", "total"),
                           "cloud_pull_requests", ("open", "merged", "declined", "superseded")),
    "server": EditionChecks("server_commits", "author_timestamp", False, "commit_statistics",
                            ("commits",), ("linesOfCode", "added"),
                            "server_pull_requests", ("open", "merged", "declined")),
}


@dataclass
class Difference:
    repository: str
    window: str
    measure: str
    api: int
    landed: int
    verdict: str  # mismatch | within_edge_tolerance


@dataclass
class Reconciliation:
    checked: int
    differences: list[Difference]

    @property
    def ok(self) -> bool:
        return not any(d.verdict == "mismatch" for d in self.differences)

    def as_dict(self) -> dict[str, Any]:
        return {"checked": self.checked, "ok": self.ok,
                "differences": [asdict(d) for d in self.differences]}


def required_endpoint(ctx: ReadContext, resource: str) -> Endpoint:
    endpoint = endpoint_for(ctx, resource, "repository")
    if endpoint is None:
        raise ValueError(f"the {ctx.plan.edition.name} edition has no repository-level "
                         f"`{resource}` endpoint")
    return endpoint


def dig(body: Any, path: tuple[str, ...]) -> int:
    for key in path:
        body = body.get(key) if isinstance(body, dict) else None
    return int(body or 0)


def reconcile(db_file: str, dataset: str, windows: list[tuple[datetime, datetime]],
              source_args: dict[str, Any]) -> Reconciliation:
    """Compare every repository of the dataset, window by window, with the API."""
    spec = EDITION_SPECS[source_args["edition"]]
    plan = build_plan(spec, source_args)
    checks = CHECKS[spec.name]
    client = ApiClient(plan.api_base, spec.auth_headers(plan.credentials), spec.error_rules,
                       spec.error_message, plan.client, RunReport())
    ctx = ReadContext(plan, client, client.report)
    result = Reconciliation(0, [])
    with duckdb.connect(db_file, read_only=True) as con:
        con.execute(f"SET schema '{dataset}'")
        key = ", ".join(spec.repository_key)
        repositories = con.execute(
            f"SELECT DISTINCT {key} FROM {checks.commit_table} ORDER BY ALL").fetchall()
        for names in repositories:
            for start, end in windows:
                compare_window(con, ctx, checks, tuple(names), start, end, result)
    return result


def compare_window(con: duckdb.DuckDBPyConnection, ctx: ReadContext, checks: EditionChecks,
                   names: tuple[str, ...], start: datetime, end: datetime,
                   result: Reconciliation) -> None:
    spec = ctx.plan.edition
    scope = repository_scope(ctx, names)
    dates = {spec.since_param: wire(start), spec.until_param: wire(end)}
    label = "reconcile"
    where_repo = " AND ".join(f"{c} = ?" for c in spec.repository_key)
    window = f"{start.date()}..{end.date()}"
    repo = "/".join(names)
    commit_stats = required_endpoint(ctx, checks.commit_statistics)
    stats = ctx.client.get_json(scope.path(commit_stats.path),
                                {**commit_stats.params, **dates}, label).body
    low, high = (start.replace(tzinfo=None), end.replace(tzinfo=None)) \
        if checks.commit_time_is_local else (start, end)
    landed = con.execute(
        f"SELECT count(*), coalesce(sum(lines_added), 0) FROM {checks.commit_table} "
        f"WHERE {where_repo} AND {checks.commit_time} >= ? AND {checks.commit_time} < ?",
        [*names, low, high]).fetchone() or (0, 0)
    edge = {"commits": 0, "lines_added": 0}  # what commits near an edge could account for
    if checks.commit_time_is_local:
        near = con.execute(
            f"SELECT count(*), coalesce(sum(lines_added), 0) FROM {checks.commit_table} "
            f"WHERE {where_repo} AND "
            f"(({checks.commit_time} >= ? AND {checks.commit_time} < ?) OR "
            f"({checks.commit_time} >= ? AND {checks.commit_time} < ?))",
            [*names, low - EDGE, low + EDGE, high - EDGE, high + EDGE]).fetchone() or (0, 0)
        edge = {"commits": int(near[0]), "lines_added": int(near[1])}
    for measure, api_value, landed_value in (
            ("commits", dig(stats, checks.commits_field), landed[0]),
            ("lines_added", dig(stats, checks.added_field), landed[1])):
        result.checked += 1
        if api_value != landed_value:
            verdict = ("within_edge_tolerance"
                       if abs(api_value - landed_value) <= edge[measure] else "mismatch")
            result.differences.append(Difference(repo, window, measure, api_value,
                                                 int(landed_value), verdict))
    pr_endpoint = required_endpoint(ctx, "pull_request_statistics")
    pr_stats = ctx.client.get_json(scope.path(pr_endpoint.path),
                                   {**pr_endpoint.params, **dates}, label).body
    counts = dict(con.execute(
        f"SELECT lower(state), count(*) FROM {checks.pr_table} WHERE {where_repo} AND "
        "created_at >= ? AND created_at < ? GROUP BY 1", [*names, start, end]).fetchall())
    for state in checks.pr_states:
        result.checked += 1
        api_value = dig(pr_stats, ("state", state))
        if api_value != counts.get(state, 0):
            result.differences.append(Difference(repo, window, f"pull_requests_{state}",
                                                 api_value, counts.get(state, 0), "mismatch"))
