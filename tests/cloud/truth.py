"""The cloud host's ground truth, and each table compared with it."""

from __future__ import annotations

import dataclasses
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from simulator import Simulator
from tests.support.helpers import (
    GRAIN,
    assert_window_rows,
    by_key,
    column_types,
    count,
    data_tables,
    from_ms,
    from_z,
    periods,
    select,
)
from tests.support.loader import CLOUD_PRIMARY_KEYS, Loader

START = datetime(2026, 3, 1, tzinfo=UTC)  # the Loader's default start_date
SLACK = timedelta(hours=26)  # the zone-less commit date's extra re-read
LOOKBACK = timedelta(days=3)  # the default lookback_days
STATES = ("DECLINED", "MERGED", "OPEN", "SUPERSEDED")
PRIMARY_KEYS = CLOUD_PRIMARY_KEYS
ALL_TABLES = frozenset(PRIMARY_KEYS)
COMMIT_COLUMNS = (
    "repository_slug",
    "hash",
    "author_display_name",
    "author_uuid",
    "date_local",
    "parent_count",
    "is_merge",
)
PR_COLUMNS = (
    "repository_slug",
    "id",
    "title",
    "state",
    "closed",
    "author_display_name",
    "author_uuid",
    "destination_branch",
    "created_at",
    "updated_at",
    "closed_at",
    "comment_count",
    "task_count",
)
MEASURES = ("added", "changed", "deleted")
DISTRIBUTION = ("average", "median", "p75", "p95", "p99", "total")
CHANGE_COLUMNS = ("commits", *(f"lines_{m}_{d}" for m in MEASURES for d in DISTRIBUTION))


@dataclass(frozen=True)
class Truth:
    """One host's ground truth, read at one moment."""

    clock: datetime
    workspace: str
    commits: list[dict[str, Any]]
    prs: list[dict[str, Any]]
    users: list[dict[str, Any]]
    repos: list[dict[str, Any]]

    @classmethod
    def read(cls, sim: Simulator) -> Truth:
        info = sim.info()
        return cls(
            datetime.fromtimestamp(info["now"], UTC),
            info["workspace"],
            sim.truth("commits"),
            sim.truth("pull-requests"),
            sim.truth("users"),
            sim.truth("repositories"),
        )

    @property
    def uuid_of(self) -> dict[str, str]:
        """User slug -> uuid."""
        return {u["_sim"]["slug"]: u["uuid"] for u in self.users}

    def commit(self, sha: str) -> dict[str, Any]:
        return next(c for c in self.commits if c["hash"] == sha)


def instant(commit: Mapping[str, Any]) -> datetime:
    return from_z(commit["_sim"]["instant"])


def commit_row(commit: Mapping[str, Any]) -> tuple[Any, ...]:
    """A truth commit as COMMIT_COLUMNS: `date_local` is the API's naive `date` as it is."""
    parents = commit["parents"]
    return (
        commit["repository"]["slug"],
        commit["hash"],
        commit["author"]["display_name"],
        commit["author"]["uuid"],
        datetime.fromisoformat(commit["date"]),
        len(parents),
        len(parents) > 1,
    )


def pr_row(pr: Mapping[str, Any]) -> tuple[Any, ...]:
    """A truth pull request as PR_COLUMNS, dates from the simulator's own milliseconds."""
    facts = pr["_sim"]
    closed = facts["closed_ms"]
    return (
        pr["destination"]["repository"]["slug"],
        pr["id"],
        pr["title"],
        pr["state"],
        pr["closed"],
        pr["author"]["display_name"],
        pr["author"]["uuid"],
        pr["destination"]["branch"]["name"],
        from_ms(facts["created_ms"]),
        from_ms(facts["updated_ms"]),
        from_ms(closed) if closed is not None else None,
        pr["comment_count"],
        pr["task_count"],
    )


def percentile(ordered: list[int], fraction: float) -> float:
    """numpy's default (linear) interpolation between closest ranks."""
    if not ordered:
        return 0.0
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def distribution(values: list[int]) -> list[float]:
    ordered = sorted(values)
    return [
        statistics.fmean(ordered) if ordered else 0.0,
        statistics.median(ordered) if ordered else 0.0,
        percentile(ordered, 0.75),
        percentile(ordered, 0.95),
        percentile(ordered, 0.99),
        sum(ordered),
    ]


@dataclass(frozen=True)
class Window:
    """What a load was asked for: [start, clock), restricted to some repositories and users."""

    start: datetime
    clock: datetime
    repos: frozenset[str] | None = None  # None: every repository
    users: frozenset[str] | None = None  # user uuids; None: every user
    hidden: frozenset[str] = frozenset()  # forbidden repositories (left out of 8 and 11)

    def repo_ok(self, slug: str) -> bool:
        return self.repos is None or slug in self.repos


def commit_truth(truth: Truth, repos_ok: Any) -> dict[tuple, tuple]:
    """Truth commits of the accepted repositories: key -> (instant, row)."""
    return {
        (c["repository"]["slug"], c["hash"]): (instant(c), commit_row(c))
        for c in truth.commits
        if repos_ok(c["repository"]["slug"])
    }


def check_repository_commits(
    loader: Loader, truth: Truth, window: Window, no_lines: Iterable[str] = ()
) -> None:
    """cloud_commits: the repository-level commits with their line counts."""
    without = set(no_lines)
    expected = {}
    for c in truth.commits:
        slug = c["repository"]["slug"]
        if window.repo_ok(slug):
            lines = (
                (None, None) if slug in without else (c["lines"]["added"], c["lines"]["deleted"])
            )
            expected[(slug, c["hash"])] = (instant(c), (*commit_row(c), *lines))
    got = by_key(
        select(loader, "cloud_commits", (*COMMIT_COLUMNS, "lines_added", "lines_deleted")), 2
    )
    assert_window_rows(
        got, expected, window.start - SLACK, window.start, window.clock, "cloud_commits"
    )


def check_workspace_commits(loader: Loader, truth: Truth, window: Window) -> None:
    expected = commit_truth(truth, lambda slug: slug not in window.hidden)
    got = by_key(select(loader, "cloud_workspace_commits", COMMIT_COLUMNS), 2)
    assert_window_rows(
        got, expected, window.start - SLACK, window.start, window.clock, "cloud_workspace_commits"
    )


def check_user_commits(loader: Loader, truth: Truth, window: Window) -> None:
    """cloud_user_commits: exactly each user's truth commits, tagged with the user read."""
    uuid_of = truth.uuid_of
    expected = {}
    for c in truth.commits:
        slug, user = c["repository"]["slug"], c["_sim"]["user"]
        if user is None or slug in window.hidden:
            continue
        uuid = uuid_of[user]
        if window.users is None or uuid in window.users:
            expected[(uuid, slug, c["hash"])] = (instant(c), (uuid, *commit_row(c)))
    got = by_key(select(loader, "cloud_user_commits", ("read_for_user_uuid", *COMMIT_COLUMNS)), 3)
    assert_window_rows(
        got, expected, window.start - SLACK, window.start, window.clock, "cloud_user_commits"
    )
    assert all(row[0] == row[4] for row in got.values()), "a user row authored by another"


def check_parents(
    loader: Loader, truth: Truth, window: Window, repos: Iterable[str] | None = None
) -> None:
    """cloud_commit_parents: each loaded commit's truth parents, in order, with its date."""
    wanted = None if repos is None else set(repos)
    expected = {}
    for c in truth.commits:
        slug = c["repository"]["slug"]
        if wanted is not None and slug not in wanted:
            continue
        for position, parent in enumerate(c["parents"]):
            expected[(slug, c["hash"], position)] = (
                instant(c),
                (slug, c["hash"], position, parent["hash"], datetime.fromisoformat(c["date"])),
            )
    got = by_key(
        select(
            loader,
            "cloud_commit_parents",
            ("repository_slug", "hash", "position", "parent_hash", "date_local"),
        ),
        3,
    )
    assert_window_rows(
        got, expected, window.start - SLACK, window.start, window.clock, "cloud_commit_parents"
    )


def check_pull_requests(loader: Loader, truth: Truth, window: Window, level: str) -> None:
    """A pull-request table: truth PRs updated in [start, clock) with their current values."""
    table = {
        "repository": "cloud_pull_requests",
        "workspace": "cloud_workspace_pull_requests",
        "user": "cloud_user_pull_requests",
    }[level]
    uuid_of = truth.uuid_of
    expected = {}
    for pr in truth.prs:
        row = pr_row(pr)
        at = from_ms(pr["_sim"]["updated_ms"])
        if level == "user":
            uuid = uuid_of[pr["_sim"]["user"]]
            if window.users is None or uuid in window.users:
                expected[(uuid, *row[:2])] = (at, (uuid, *row))
        elif level == "workspace" or window.repo_ok(row[0]):
            expected[row[:2]] = (at, row)
    extra = ("read_for_user_uuid",) if level == "user" else ()
    got = by_key(select(loader, table, (*extra, *PR_COLUMNS)), len(extra) + 2)
    assert_window_rows(got, expected, window.start, window.start, window.clock, table)


def check_users(loader: Loader, truth: Truth) -> None:
    got = sorted(select(loader, "cloud_users", ("uuid", "display_name")))
    assert got == sorted((u["uuid"], u["display_name"]) for u in truth.users)


def expected_pr_statistics(
    truth: Truth,
    window: Window,
    levels: Iterable[str] = ("workspace", "repository", "user"),
    grain: str = GRAIN,
) -> dict[tuple, tuple]:
    """Per level, scope and period: PRs created in it, counted by their current state."""
    uuid_of = truth.uuid_of
    scopes: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for level in levels:
        if level == "workspace":
            scopes[(level, truth.workspace)] = truth.prs
        elif level == "repository":
            for repo in truth.repos:
                if window.repo_ok(repo["slug"]):
                    scopes[(level, repo["slug"])] = [
                        p
                        for p in truth.prs
                        if p["destination"]["repository"]["slug"] == repo["slug"]
                    ]
        else:
            for user in truth.users:
                if window.users is None or user["uuid"] in window.users:
                    scopes[(level, user["uuid"])] = [
                        p for p in truth.prs if uuid_of[p["_sim"]["user"]] == user["uuid"]
                    ]
    expected = {}
    for (level, scope), prs in scopes.items():
        for low, high in periods(window.start, window.clock, grain):
            counts = Counter(
                p["state"] for p in prs if low <= from_ms(p["_sim"]["created_ms"]) < high
            )
            expected[(level, scope, low)] = (
                level,
                scope,
                low,
                grain,
                high,
                "all",
                "created",
                sum(counts.values()),
                *(counts[s] for s in STATES),
            )
    return expected


PR_STAT_COLUMNS = (
    "level",
    "scope",
    "period_start",
    "period",
    "period_end",
    "state_filter",
    "date_type",
    "pull_requests",
    "declined",
    "merged",
    "open",
    "superseded",
)


def check_pr_statistics(
    loader: Loader,
    truth: Truth,
    window: Window,
    from_day: datetime | None = None,
    grain: str = GRAIN,
    **levels: Any,
) -> None:
    """cloud_pull_request_statistics equals the truth's counts (on periods from `from_day`).

    Rows before the window are the creation periods of pull requests the run read that were
    created before `start_date`: the refresh reads those periods too (README), and they must
    be the truth's complete counts."""
    expected = expected_pr_statistics(truth, window, grain=grain, **levels)
    got = by_key(select(loader, "cloud_pull_request_statistics", PR_STAT_COLUMNS), 3)
    before = {k for k in set(got) - set(expected) if k[2] < window.start}
    assert set(got) - before == set(expected)
    if before:
        earlier = expected_pr_statistics(
            truth,
            dataclasses.replace(window, start=min(k[2] for k in before)),
            grain=grain,
            **levels,
        )
        wrong = [(got[k], earlier.get(k)) for k in before if got[k] != earlier.get(k)]
        assert not wrong, f"{len(wrong)} refreshed rows before the window differ: {wrong[:2]}"
    keys = [k for k in expected if from_day is None or k[2] >= from_day]
    wrong = [(got[k], expected[k]) for k in keys if got[k] != expected[k]]
    assert not wrong, f"{len(wrong)} statistics rows differ, e.g. {wrong[:2]}"
    assert sum(expected[k][7] for k in keys) > 0, "no pull request in the compared periods"


def check_change_statistics(
    loader: Loader,
    truth: Truth,
    window: Window,
    from_day: datetime | None = None,
    skipped: Iterable[str] = (),
    grain: str = GRAIN,
) -> None:
    """cloud_commit_change_statistics: per repository and period, its commits' lines."""
    left_out = set(skipped)
    expected = {}
    for repo in truth.repos:
        slug = repo["slug"]
        if not window.repo_ok(slug) or slug in left_out:
            continue
        commits = [c for c in truth.commits if c["repository"]["slug"] == slug]
        for low, high in periods(window.start, window.clock, grain):
            today = [c["lines"] for c in commits if low <= instant(c) < high]
            values: list[float] = [len(today)]
            for measure in MEASURES:
                values += distribution(
                    [
                        line["added"] + line["deleted"] if measure == "changed" else line[measure]
                        for line in today
                    ]
                )
            expected[(slug, low)] = ((slug, low, grain, high, "include"), values)
    got = by_key(
        select(
            loader,
            "cloud_commit_change_statistics",
            ("repository_slug", "period_start", "period", "period_end", "merges", *CHANGE_COLUMNS),
        ),
        2,
    )
    assert set(got) == set(expected)
    compared = 0.0
    for key, (head, values) in expected.items():
        if from_day is not None and key[1] < from_day:
            continue
        assert got[key][:5] == head
        assert list(got[key][5:]) == pytest.approx(values), key
        compared += values[0]
    assert compared > 0, "no commit in the compared days"


def check_primary_keys(loader: Loader) -> None:
    """No duplicates: every table's natural key is unique."""
    with loader.reading():
        for table in sorted(data_tables(loader)):
            key = ", ".join(f'"{c}"' for c in PRIMARY_KEYS[table])
            total, distinct = loader.rows(
                f'SELECT (SELECT count(*) FROM "{table}"), '
                f'(SELECT count(*) FROM (SELECT DISTINCT {key} FROM "{table}"))'
            )[0]
            assert total == distinct, f"{table}: {total} rows, {distinct} distinct keys"
            assert total > 0, f"{table} is empty"
            if "removed" in column_types(loader, table):  # README: marker rows never stored
                assert count(loader, table, "WHERE removed") == 0, f"{table} stores marker rows"


def check_everything(loader: Loader, truth: Truth, window: Window) -> None:
    """Every table equals the truth restricted to the window."""
    with loader.reading():
        check_repository_commits(loader, truth, window)
        check_workspace_commits(loader, truth, window)
        check_user_commits(loader, truth, window)
        check_parents(loader, truth, window)
        for level in ("repository", "workspace", "user"):
            check_pull_requests(loader, truth, window, level)
        check_users(loader, truth)
        check_primary_keys(loader)
