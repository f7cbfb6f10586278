"""Commit list parameters and defaults: order, merges, date bounds in every form, the local
date, with_lines."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
import requests

from simulator import Simulator
from tests.simulator.cloud.client import assert_commits_equal, by_hash, by_pr_key, collect
from tests.simulator.cloud.truth import (
    DAY_S,
    LOCAL_DATE,
    Truth,
    epoch,
    expected_commits,
    instant,
    local_wall_time,
    pr_key,
    with_offset,
)


@pytest.mark.parametrize("order", ["oldest", "newest", None])
def test_commit_order(
    cloud_sim: Simulator, http: requests.Session, truth: Truth, order: str | None
) -> None:
    """order=oldest runs by ascending instant; newest (the default) by descending."""
    params = {"merges": "include", "pagelen": "111", **({"order": order} if order else {})}
    served = collect(http, cloud_sim, f"/workspace/{truth.workspace}/commits", params)
    hashes = truth.commit_by_hash()
    times = [instant(hashes[item["hash"]]) for item in served]
    assert len(times) == len(truth.commits)
    assert times == sorted(times, reverse=order != "oldest")
    assert times[0] != times[-1]


@pytest.mark.parametrize("merges", ["exclude", "include", "only", None])
@pytest.mark.parametrize("level", ["workspace", "repository", "user"])
def test_commit_merges_filter(
    cloud_sim: Simulator, http: requests.Session, truth: Truth, merges: str | None, level: str
) -> None:
    """merges: exclude (the default) drops merge commits, only keeps just them, include both."""
    slug = truth.repos[0]["slug"]
    busiest = Counter(
        c["_sim"]["user"] for c in truth.commits if c["_sim"]["is_merge"] and c["_sim"]["user"]
    ).most_common(1)[0][0]
    uuid = {u["_sim"]["slug"]: u["uuid"] for u in truth.users}[busiest]
    path, scope = {
        "workspace": (f"/workspace/{truth.workspace}/commits", {}),
        "repository": (f"/workspace/{truth.workspace}/repos/{slug}/commits", {"repo": slug}),
        "user": (f"/workspace/{truth.workspace}/users/{uuid}/commits", {"user": busiest}),
    }[level]
    served = collect(http, cloud_sim, path, {"merges": merges} if merges else {})
    expected = expected_commits(truth, merges=merges or "exclude", **scope)
    assert expected
    assert_commits_equal(served, expected)
    kinds = {len(item["parents"]) > 1 for item in served}
    assert (
        kinds
        == {"exclude": {False}, "only": {True}, "include": {False, True}, None: {False}}[merges]
    )


@pytest.mark.parametrize(
    "since, until",
    [
        ("2026-04-15", None),
        (None, "2026-05-20T10:00:00+02:00"),
        ("2026-04-01T06:30:00-03:30", "2026-05-02T00:00:00Z"),
        ("2026-04-01T00:00:00", "2026-04-08T12:00:00+14:00"),
    ],
)
@pytest.mark.parametrize("level", ["workspace", "repository", "user"])
def test_commit_date_filters(
    cloud_sim: Simulator,
    http: requests.Session,
    truth: Truth,
    since: str | None,
    until: str | None,
    level: str,
) -> None:
    """since_date/until_date bound commits by their real instant, in every accepted form."""
    slug = truth.repos[1]["slug"]
    user = truth.users[0]
    path, scope = {
        "workspace": (f"/workspace/{truth.workspace}/commits", {}),
        "repository": (f"/workspace/{truth.workspace}/repos/{slug}/commits", {"repo": slug}),
        "user": (
            f"/workspace/{truth.workspace}/users/{user['uuid']}/commits",
            {"user": user["_sim"]["slug"]},
        ),
    }[level]
    params = {k: v for k, v in (("since_date", since), ("until_date", until)) if v}
    served = collect(http, cloud_sim, path, {**params, "merges": "include"})
    expected = expected_commits(truth, since=since, until=until, merges="include", **scope)
    assert 0 < len(expected) < len(expected_commits(truth, merges="include", **scope))
    assert_commits_equal(served, expected)


def test_commit_since_inclusive_until_exclusive_in_local_offset(
    cloud_sim: Simulator, http: requests.Session, truth: Truth
) -> None:
    """A commit's own instant, written with its author's offset: in at since, out at until."""
    path = f"/workspace/{truth.workspace}/commits"
    times = Counter(instant(c) for c in truth.commits)
    plus = [c for c in truth.commits if c["_sim"]["offset_minutes"] > 0 and times[instant(c)] == 1]
    minus = [c for c in truth.commits if c["_sim"]["offset_minutes"] < 0 and times[instant(c)] == 1]
    for commit in (plus[len(plus) // 2], minus[len(minus) // 2]):
        written = with_offset(instant(commit), commit["_sim"]["offset_minutes"])
        assert written.startswith(commit["date"])  # the served local time plus its offset
        at_since = by_hash(
            collect(http, cloud_sim, path, {"since_date": written, "merges": "include"})
        )
        at_until = by_hash(
            collect(http, cloud_sim, path, {"until_date": written, "merges": "include"})
        )
        assert commit["hash"] in at_since and commit["hash"] not in at_until
        assert len(at_since) + len(at_until) == len(truth.commits)


def test_date_only_bounds_are_midnight_utc(
    cloud_sim: Simulator, http: requests.Session, truth: Truth
) -> None:
    """A date-only since/until is that day's 00:00 UTC, for commits and pull requests."""

    def utc_day(epoch_s: int, days: int = 0) -> str:
        return (datetime.fromtimestamp(epoch_s, UTC).date() + timedelta(days=days)).isoformat()

    commits = f"/workspace/{truth.workspace}/commits"
    first = min(truth.commits, key=lambda c: instant(c) % DAY_S)  # just after a midnight
    last = max(truth.commits, key=lambda c: instant(c) % DAY_S)  # just before one
    for commit, day in ((first, utc_day(instant(first))), (last, utc_day(instant(last), 1))):
        since = by_hash(collect(http, cloud_sim, commits, {"since_date": day, "merges": "include"}))
        until = by_hash(collect(http, cloud_sim, commits, {"until_date": day, "merges": "include"}))
        assert (commit["hash"] in since) == (commit is first)
        assert (commit["hash"] in until) == (commit is last)
    prs = f"/workspace/{truth.workspace}/pull-requests"
    first_pr = min(truth.prs, key=lambda p: p["_sim"]["created_ms"] % (DAY_S * 1000))
    last_pr = max(truth.prs, key=lambda p: p["_sim"]["created_ms"] % (DAY_S * 1000))
    for pr, day in (
        (first_pr, utc_day(first_pr["_sim"]["created_ms"] // 1000)),
        (last_pr, utc_day(last_pr["_sim"]["created_ms"] // 1000, 1)),
    ):
        pr_since = by_pr_key(collect(http, cloud_sim, prs, {"since_date": day}))
        pr_until = by_pr_key(collect(http, cloud_sim, prs, {"until_date": day}))
        assert (pr_key(pr) in pr_since) == (pr is first_pr)
        assert (pr_key(pr) in pr_until) == (pr is last_pr)


def test_commit_date_is_author_local_time_without_zone(
    cloud_sim: Simulator, http: requests.Session, truth: Truth
) -> None:
    """`date` is the truth instant shifted by the author's offset, with no zone designator."""
    served = collect(
        http, cloud_sim, f"/workspace/{truth.workspace}/commits", {"merges": "include"}
    )
    hashes = truth.commit_by_hash()
    assert len(served) == len(hashes)
    offsets = set()
    for item in served:
        facts = hashes[item["hash"]]["_sim"]
        assert LOCAL_DATE.match(item["date"])
        assert item["date"] == local_wall_time(epoch(facts["instant"]), facts["offset_minutes"])
        offsets.add(facts["offset_minutes"])
    assert any(o % 60 for o in offsets) and min(offsets) < 0 < max(offsets)


def test_with_lines_only_on_repository_list(
    cloud_sim: Simulator, http: requests.Session, truth: Truth
) -> None:
    """with_lines=true adds truth lines on endpoint 9 only; 8, 11 and plain 9 carry none."""
    ws = truth.workspace
    for repo in truth.repos:
        path = f"/workspace/{ws}/repos/{repo['slug']}/commits"
        expected = expected_commits(truth, repo=repo["slug"], merges="include")
        with_lines = collect(http, cloud_sim, path, {"with_lines": "true", "merges": "include"})
        assert_commits_equal(with_lines, expected, lines=True)
        plain = collect(http, cloud_sim, path, {"with_lines": "false", "merges": "include"})
        assert_commits_equal(plain, expected)
    assert any(c["lines"]["added"] or c["lines"]["deleted"] for c in truth.commits)
    user = truth.users[0]["uuid"]
    for path in (f"/workspace/{ws}/commits", f"/workspace/{ws}/users/{user}/commits"):
        served = collect(http, cloud_sim, path, {"with_lines": "true"})
        assert served and all("lines" not in item for item in served)
