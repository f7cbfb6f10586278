"""What crossed the wire: the requests a run made, read from the simulator's log."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.cloud.truth import LOOKBACK, SLACK, START, Truth
from tests.support.helpers import (
    GRAIN,
    as_utc,
    assert_no_list_request_twice,
    from_ms,
    period_floor,
    period_next,
)
from tests.support.loader import Loader

WIRE_FORMAT = "%Y-%m-%dT%H:%M:%S+00:00"


def wire_time(text: str) -> datetime:
    """A since/until parameter: must carry an explicit +00:00 offset."""
    moment = datetime.strptime(text, WIRE_FORMAT)
    return moment.replace(tzinfo=UTC)


def path_part(path: str, segment: str) -> str | None:
    """The path segment after `segment` (`repos` -> slug, `users` -> uuid), if any."""
    parts = path.split("/")
    if segment in parts and parts.index(segment) + 1 < len(parts):
        return parts[parts.index(segment) + 1]
    return None


@dataclass(frozen=True)
class Cursors:
    """Each scope's newest loaded cursor value, read from the tables before a run."""

    until: datetime  # the previous run's clock
    commits: dict[tuple[str, str | None], datetime]  # (level, scope) -> date_local as UTC
    pull_requests: dict[tuple[str, str | None], datetime]
    statistics: dict[tuple[str, str | None], datetime]  # (endpoint kind, scope) -> period_end

    @classmethod
    def read(cls, loader: Loader, until: datetime, workspace: str) -> Cursors:
        def newest(table: str, scope: str, column: str, level: str) -> dict:
            return {
                (level, scope_value): as_utc(value)
                for scope_value, value in loader.rows(
                    f'SELECT {scope}, max("{column}") FROM "{table}" GROUP BY 1'
                )
            }

        commits = {
            **newest("cloud_commits", "repository_slug", "date_local", "repository"),
            **newest("cloud_user_commits", "read_for_user_uuid", "date_local", "user"),
            **newest("cloud_workspace_commits", f"'{workspace}'", "date_local", "workspace"),
        }
        prs = {
            **newest("cloud_pull_requests", "repository_slug", "updated_at", "repository"),
            **newest("cloud_user_pull_requests", "read_for_user_uuid", "updated_at", "user"),
            **newest("cloud_workspace_pull_requests", f"'{workspace}'", "updated_at", "workspace"),
        }
        stats = {
            ("pull-requests", scope): as_utc(end)
            for scope, end in loader.rows(
                "SELECT scope, max(period_end) FROM cloud_pull_request_statistics GROUP BY 1"
            )
        }
        stats.update(
            {
                ("changes", scope): as_utc(end)
                for scope, end in loader.rows(
                    "SELECT repository_slug, max(period_end) FROM cloud_commit_change_statistics "
                    "GROUP BY 1"
                )
            }
        )
        return cls(until, commits, prs, stats)


def refreshed_periods(
    truth: Truth, cursors: Cursors, grain: str = GRAIN
) -> frozenset[tuple[str, datetime]]:
    """(scope, creation period) of each pull request a nightly run's list of that scope
    reads: the periods whose pull-request statistics the run reads again."""
    days = set()
    for p in truth.prs:
        for level, scope in (
            ("workspace", truth.workspace),
            ("repository", p["destination"]["repository"]["slug"]),
            ("user", truth.uuid_of[p["_sim"]["user"]]),
        ):
            cursor = cursors.pull_requests.get((level, scope))
            if from_ms(p["_sim"]["updated_ms"]) >= (START if cursor is None else cursor - LOOKBACK):
                days.add((scope, period_floor(from_ms(p["_sim"]["created_ms"]), grain)))
    return frozenset(days)


def assert_reads_only_look_back(
    log: list[dict[str, Any]],
    cursors: Cursors,
    start: datetime,
    workspace: str,
    refreshed: frozenset[tuple[str, datetime]] = frozenset(),
    grain: str = GRAIN,
) -> None:
    """A nightly run re-reads only the look-back behind each scope's cursor: every dated
    request's since_date is no earlier than (cursor - look-back), minus 26 h for commits;
    repository discovery reads the workspace lists from there too, and no list page is asked
    twice (the workspace resources take discovery's pages). Older pull-request statistics
    are read only for the (scope, period) pairs in `refreshed`, one period each: the
    creation periods of pull requests the run read."""
    checked = 0
    for entry in log:
        since_text = entry["params"].get("since_date")
        if since_text is None:
            continue
        since = wire_time(since_text)
        endpoint, path = entry["endpoint"], entry["path"]
        level = endpoint.split(".")[2]
        scope = {
            "repository": path_part(path, "repos"),
            "user": path_part(path, "users"),
            "workspace": workspace,
        }[level]
        if endpoint.startswith("commits.list"):
            cursor = cursors.commits.get((level, scope))
            bound = None if cursor is None else max(start - SLACK, cursor - LOOKBACK - SLACK)
        elif endpoint.startswith("pull-requests.list"):
            cursor = cursors.pull_requests.get((level, scope))
            bound = None if cursor is None else max(start, cursor - LOOKBACK)
        else:
            kind = "changes" if "changes" in endpoint else "pull-requests"
            cursor = cursors.statistics.get((kind, scope))
            bound = None if cursor is None else period_floor(max(start, cursor - LOOKBACK), grain)
            until = wire_time(entry["params"]["until_date"])
            if (
                kind == "pull-requests"
                and (scope, since) in refreshed
                and until == period_next(since, grain)
            ):
                checked += 1
                continue
        if bound is None:  # a scope new in this run starts at the start
            assert since >= start - SLACK, entry
            continue
        # the wire form has whole seconds: a bound inside a second may be floored to it
        assert since >= bound.replace(microsecond=0), (
            f"{endpoint} {scope}: since {since} is before the look-back bound {bound} "
            f"(cursor {cursor})"
        )
        checked += 1
    assert checked > 0
    assert_no_list_request_twice(log)


def assert_request_parameters(
    log: list[dict[str, Any]], clock: datetime, grain: str = GRAIN
) -> None:
    """Every request: raw-token auth, JSON, explicit +00:00 offsets, the endpoint's params,
    list requests with the run's frozen until_date, statistics in whole UTC periods of the
    run's grain."""
    until = clock.strftime(WIRE_FORMAT)
    seen: Counter[str] = Counter()
    for entry in log:
        endpoint, params = entry["endpoint"], entry["params"]
        seen[endpoint.rsplit(".", 1)[0] if endpoint.startswith("users.") else endpoint] += 1
        assert entry["auth"] == "token" and entry["accept"] == "application/json", entry
        assert entry["status"] == 200, entry
        if endpoint.startswith("users.list"):
            assert not {"since_date", "until_date"} & set(params), entry
            continue
        since = wire_time(params["since_date"])
        wire_time(params["until_date"])
        assert since < clock, entry
        if ".list." in endpoint:
            assert params["until_date"] == until, entry
            assert params["pagelen"] == "500", entry
        if endpoint.startswith("commits.list"):
            assert params["merges"] == "include" and params["order"] == "oldest", entry
            assert params.get("with_lines") == (
                "true" if endpoint == "commits.list.repository" else None
            ), entry
        elif endpoint.startswith("pull-requests.list"):
            assert params["date_type"] == "updated" and params["state"] == "all", entry
        elif endpoint.startswith("pull-requests.statistics"):
            assert params["date_type"] == "created" and params["state"] == "all", entry
        elif endpoint == "commits.changes-statistics.repository":
            assert params["merges"] == "include", entry
        else:
            pytest.fail(f"unexpected endpoint {endpoint}")
        if ".list." not in endpoint:
            assert since == period_floor(since, grain), entry
            assert wire_time(params["until_date"]) == min(period_next(since, grain), clock), entry
            assert "pagelen" not in params, entry
    assert {e for e in seen if e != "users.list"} == {
        "commits.list.workspace",
        "commits.list.repository",
        "commits.list.user",
        "commits.changes-statistics.repository",
        "pull-requests.list.workspace",
        "pull-requests.list.repository",
        "pull-requests.list.user",
        "pull-requests.statistics.workspace",
        "pull-requests.statistics.repository",
        "pull-requests.statistics.user.short",
    }
    assert seen["users.list"] >= 1
