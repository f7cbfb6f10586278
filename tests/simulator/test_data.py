"""The generated data has the shapes real hosts show, deterministically from the seed."""

from __future__ import annotations

import statistics
from collections import Counter
from datetime import datetime
from typing import Any

import pytest

from simulator import SimConfig, Simulator
from tests.support import FIXED_NOW


@pytest.fixture(scope="module")
def small_server() -> Any:
    with Simulator(SimConfig(edition="server", size="small", now=FIXED_NOW)) as sim:
        yield sim


@pytest.fixture(scope="module")
def small_cloud() -> Any:
    with Simulator(SimConfig(edition="cloud", size="small", now=FIXED_NOW)) as sim:
        yield sim


def instant(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_same_seed_same_data_and_other_seed_other_data() -> None:
    def truth(seed: int) -> tuple[list[Any], list[Any]]:
        sim = Simulator(SimConfig(edition="server", size="tiny", seed=seed, now=FIXED_NOW))
        return sim.truth("commits"), sim.truth("pull-requests")

    first, again, other = truth(11), truth(11), truth(12)
    assert first == again
    assert [c["id"] for c in first[0]] != [c["id"] for c in other[0]]


def test_small_size_matches_its_documented_scale(small_server: Simulator) -> None:
    counts = small_server.info()["counts"]
    assert counts["commits"] == 20_000 and counts["pull_requests"] == 2_000
    visible = small_server.truth("commits")
    # A handful of late pushes near the clock are not visible yet.
    assert 19_900 <= len(visible) <= 20_000
    span_days = (FIXED_NOW - min(instant(c["authorTimestamp"]) for c in visible)) / 86_400
    assert 360 <= span_days <= 365


def test_commit_graph_has_roots_merges_and_known_parents(small_server: Simulator) -> None:
    commits = small_server.truth("commits")
    parents = Counter(len(c["_sim"]["parents"]) for c in commits)
    assert parents[0] >= 20  # one per repository at least, plus orphan roots
    assert parents[2] >= 500
    known = {c["id"] for c in commits}
    referenced = {p for c in commits for p in c["_sim"]["parents"]}
    assert len(referenced - known) <= 5  # only parents pushed late may be invisible yet
    for commit in commits:
        assert [p["id"] for p in commit["parents"]] == [p[:20] for p in commit["_sim"]["parents"]]


def test_authors_time_zones_aliases_and_outsiders(small_server: Simulator) -> None:
    commits = small_server.truth("commits")
    offsets = {c["_sim"]["offset_minutes"] for c in commits}
    assert min(offsets) <= -600 and max(offsets) >= 780 and len(offsets) >= 10
    with_user = [c for c in commits if "user" in c]
    alias = [c for c in commits if "user" not in c and c["_sim"]["user"]]
    outsiders = [c for c in commits if c["_sim"]["user"] is None]
    assert with_user and alias and outsiders
    assert all(c["author"]["emailAddress"].endswith("@partner.example") for c in outsiders)
    names = {u["displayName"] for u in small_server.truth("users")}
    assert any(not name.isascii() for name in names)


def test_line_counts_are_heavy_tailed(small_server: Simulator) -> None:
    added = [c["linesOfCode"]["added"] for c in small_server.truth("commits")]
    assert max(added) > 100 * max(1, statistics.median(added))
    assert min(added) == 0


def test_repository_names_include_capitals_and_spaces(small_server: Simulator) -> None:
    slugs = [r["slug"] for r in small_server.truth("repositories")]
    assert any(" " in s for s in slugs) and any(s != s.lower() for s in slugs)


def test_some_commits_were_pushed_days_after_authoring(small_server: Simulator) -> None:
    lags = [
        instant(c["_sim"]["pushed"]) - instant(c["authorTimestamp"])
        for c in small_server.truth("commits")
    ]
    assert sum(lag > 86_400 for lag in lags) >= 100
    assert all(lag >= 0 for lag in lags)


@pytest.mark.parametrize(
    "edition,states",
    [
        ("cloud", {"OPEN", "MERGED", "DECLINED", "SUPERSEDED"}),
        ("server", {"OPEN", "MERGED", "DECLINED"}),
    ],
)
def test_tiny_data_has_every_state_of_its_edition(edition: str, states: set[str]) -> None:
    sim = Simulator(SimConfig(edition=edition, size="tiny", now=FIXED_NOW))
    assert {pr["state"] for pr in sim.truth("pull-requests")} == states


def test_server_pull_request_dates_and_people_are_consistent(small_server: Simulator) -> None:
    now_ms = FIXED_NOW * 1000
    for pr in small_server.truth("pull-requests"):
        assert pr["createdDate"] <= pr["updatedDate"] <= now_ms
        closed_ms = pr["_sim"]["closed_ms"]
        assert (closed_ms is None) == (pr["state"] == "OPEN") == pr["open"]
        if closed_ms is not None:
            assert pr["createdDate"] <= closed_ms <= pr["updatedDate"]
        author = pr["author"]["user"]["name"]
        people = [p["user"]["name"] for p in pr["reviewers"] + pr["participants"]]
        assert author not in people and len(people) == len(set(people))
    comments = [
        pr["comment_count"] for pr in small_server.truth("pull-requests") if "comment_count" in pr
    ]
    assert comments == []  # the self-hosted item has no comment count


def test_cloud_pull_requests_have_comments_tasks_and_consistent_dates(
    small_cloud: Simulator,
) -> None:
    prs = small_cloud.truth("pull-requests")
    assert max(pr["comment_count"] for pr in prs) >= 5
    assert any(pr["task_count"] > 0 for pr in prs)
    for pr in prs:
        assert (pr["closed_date"] is None) == (pr["state"] == "OPEN") == (not pr["closed"])
        assert pr["created_date"] <= pr["updated_date"]
        if pr["closed_date"]:
            assert pr["created_date"] <= pr["closed_date"] <= pr["updated_date"]
