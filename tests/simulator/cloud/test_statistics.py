"""The statistics endpoints equal what the lists sum to."""

from __future__ import annotations

import pytest
import requests

from simulator import Simulator
from tests.simulator.cloud.client import collect, fetch, state_counts
from tests.simulator.cloud.truth import (
    BEFORE_HISTORY,
    Truth,
    expected_commits,
    expected_prs,
    percentile,
)

STAT_PARAMS = [
    {},
    {"state": "merged"},
    {"state": "open", "since_date": BEFORE_HISTORY},
    {"since_date": "2026-04-01", "until_date": "2026-05-15T12:00:00+05:45", "date_type": "updated"},
    {"state": "declined", "until_date": "2026-05-01T00:00:00-07:00"},
]


@pytest.mark.parametrize(
    "params", STAT_PARAMS, ids=lambda p: "&".join(map("=".join, p.items())) or "default"
)
@pytest.mark.parametrize("level", ["workspace", "repository", "user-short", "user-long"])
def test_pull_request_statistics_equal_list_counts(
    cloud_sim: Simulator, http: requests.Session, truth: Truth, params: dict[str, str], level: str
) -> None:
    """Endpoints 2, 4, 6 count exactly what 1, 3, 5 list with the same parameters."""
    ws = truth.workspace
    pairs: list[tuple[str, str, dict[str, str]]]
    if level == "workspace":
        pairs = [
            (f"/workspace/{ws}/pull-requests", f"/workspace/{ws}/pull-requests/statistics", {})
        ]
    elif level == "repository":
        pairs = [
            (
                f"/workspace/{ws}/repos/{r['slug']}/pull-requests",
                f"/workspace/{ws}/repos/{r['slug']}/pull-requests/statistics",
                {"repo": r["slug"]},
            )
            for r in truth.repos
        ]
    else:
        stats_root = f"/{ws}" if level == "user-short" else f"/workspace/{ws}"
        pairs = [
            (
                f"/workspace/{ws}/users/{u['uuid']}/pull-requests",
                f"{stats_root}/users/{u['uuid']}/pull-requests/statistics",
                {"user": u["_sim"]["slug"]},
            )
            for u in truth.users
        ]
    nonzero = 0
    for list_path, stats_path, scope in pairs:
        listed = collect(http, cloud_sim, list_path, {**params, "pagelen": "50"})
        stats = fetch(http, cloud_sim, stats_path, params)
        assert stats == {"pull_requests": len(listed), "state": state_counts(listed)}
        expected = expected_prs(
            truth, **scope, **{k.replace("_date", ""): v for k, v in params.items()}
        )
        assert stats["pull_requests"] == len(expected)
        nonzero += bool(stats["pull_requests"])
    assert nonzero


@pytest.mark.parametrize("merges", ["exclude", "include", "only", None])
@pytest.mark.parametrize(
    "window",
    [
        {},
        {"since_date": "2026-04-01", "until_date": "2026-05-15T12:00:00+05:45"},
    ],
)
def test_changes_statistics_equal_commit_list(
    cloud_sim: Simulator,
    http: requests.Session,
    truth: Truth,
    merges: str | None,
    window: dict[str, str],
) -> None:
    """Endpoint 10: totals, average, median exactly and p75/p95/p99 interpolated, from 9."""
    ws = truth.workspace
    params = {**window, **({"merges": merges} if merges else {})}
    checked = 0
    for repo in truth.repos:
        slug = repo["slug"]
        listed = collect(
            http,
            cloud_sim,
            f"/workspace/{ws}/repos/{slug}/commits",
            {**params, "with_lines": "true"},
        )
        stats = fetch(http, cloud_sim, f"/workspace/{ws}/repos/{slug}/changes-statistics", params)
        expected_n = len(
            expected_commits(
                truth,
                repo=slug,
                merges=merges or "exclude",
                since=window.get("since_date"),
                until=window.get("until_date"),
            )
        )
        assert stats["commits"] == len(listed) == expected_n
        columns = {
            "added": [c["lines"]["added"] for c in listed],
            "deleted": [c["lines"]["deleted"] for c in listed],
            "changed": [c["lines"]["added"] + c["lines"]["deleted"] for c in listed],
        }
        assert set(stats["lines_of_code"]) == set(columns)
        for name, values in columns.items():
            got = stats["lines_of_code"][name]
            total = sum(values)
            assert got["total"] == total
            assert got["average"] == (total / len(values) if values else 0)
            assert got["median"] == percentile(values, 0.5)
            for key, fraction in (("p75", 0.75), ("p95", 0.95), ("p99", 0.99)):
                assert got[key] == pytest.approx(percentile(values, fraction), rel=1e-12, abs=1e-9)
        checked += len(listed) > 3
    assert checked


def test_changes_statistics_of_an_empty_window_are_zeros(
    cloud_sim: Simulator, http: requests.Session, truth: Truth
) -> None:
    """No commit in the window: zero commits and zeros everywhere (README's choice)."""
    slug = truth.repos[0]["slug"]
    stats = fetch(
        http,
        cloud_sim,
        f"/workspace/{truth.workspace}/repos/{slug}/changes-statistics",
        {"since_date": "2020-01-01", "until_date": "2020-02-01"},
    )
    zeros = {"average": 0, "median": 0, "p75": 0, "p95": 0, "p99": 0, "total": 0}
    assert stats == {
        "commits": 0,
        "lines_of_code": {k: zeros for k in ("added", "changed", "deleted")},
    }
