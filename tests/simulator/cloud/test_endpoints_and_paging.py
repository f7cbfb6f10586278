"""Every endpoint's resource shape, and paging: each list paged to the end is the truth once."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from simulator import Simulator
from tests.simulator.cloud.client import (
    ENDPOINT_KEYS,
    PAGED,
    any_paths,
    assert_commits_equal,
    assert_prs_equal,
    by_pr_key,
    collect,
    fetch,
    ok_json,
)
from tests.simulator.cloud.truth import BEFORE_HISTORY, Truth, expected_commits, expected_prs


@pytest.mark.parametrize("endpoint", ENDPOINT_KEYS)
def test_every_endpoint_answers_its_resource_shape(
    cloud_sim: Simulator, http: requests.Session, truth: Truth, endpoint: str
) -> None:
    """Each of the 11 endpoints (6 and 7 in both forms) answers 200 JSON with the spec's fields."""
    body = fetch(http, cloud_sim, any_paths(truth)[endpoint])
    if endpoint in PAGED:
        assert set(body) <= {"values", "page", "pagelen", "next", "previous"}
        assert body["values"] and (body["page"], body["pagelen"]) == (1, 500)
        fields = (
            {
                "id",
                "title",
                "state",
                "closed",
                "author",
                "destination",
                "created_date",
                "closed_date",
                "updated_date",
                "comment_count",
                "task_count",
            }
            if endpoint in ("1", "3", "5")
            else {"author", "date", "hash", "parents", "repository"}
        )
        assert all(set(item) == fields for item in body["values"])
    elif endpoint.startswith("7"):
        assert set(body) == {"values", "page", "pagelen"}
        assert all(set(item) == {"uuid", "display_name"} for item in body["values"])
    elif endpoint == "10":
        assert set(body) == {"commits", "lines_of_code"}
        assert set(body["lines_of_code"]) == {"added", "changed", "deleted"}
        for member in body["lines_of_code"].values():
            assert set(member) == {"average", "median", "p75", "p95", "p99", "total"}
    else:
        assert set(body) == {"pull_requests", "state"}
        assert set(body["state"]) == {"declined", "merged", "open", "superseded"}
        assert body["pull_requests"] == sum(body["state"].values())


def test_workspace_commit_pages_union_is_the_truth(
    cloud_sim: Simulator, http: requests.Session, truth: Truth
) -> None:
    """Endpoint 8 paged to the end serves every visible commit once, each equal to truth."""
    served = collect(
        http,
        cloud_sim,
        f"/workspace/{truth.workspace}/commits",
        {"merges": "include", "pagelen": "97"},
    )
    assert_commits_equal(served, expected_commits(truth, merges="include"))


def test_repository_commit_pages_union_is_the_truth(
    cloud_sim: Simulator, http: requests.Session, truth: Truth
) -> None:
    """Endpoint 9 paged to the end, for every repository (slugs with spaces included)."""
    for repo in truth.repos:
        served = collect(
            http,
            cloud_sim,
            f"/workspace/{truth.workspace}/repos/{repo['slug']}/commits",
            {"merges": "include", "pagelen": "40"},
        )
        assert_commits_equal(served, expected_commits(truth, repo=repo["slug"], merges="include"))


def test_user_commit_pages_are_the_users_truth_commits(
    cloud_sim: Simulator, http: requests.Session, truth: Truth
) -> None:
    """Endpoint 11 serves exactly the commits whose truth user is that user (aliases too)."""
    assert any(
        c["_sim"]["email"] != f"{c['_sim']['user']}@corp.example"
        for c in truth.commits
        if c["_sim"]["user"]
    )  # alias commits exist to count
    for user in truth.users:
        served = collect(
            http,
            cloud_sim,
            f"/workspace/{truth.workspace}/users/{user['uuid']}/commits",
            {"merges": "include", "pagelen": "25"},
        )
        slug = truth.slug_of_uuid[user["uuid"]]
        assert_commits_equal(served, expected_commits(truth, user=slug, merges="include"))
        assert all(item["author"]["uuid"] == user["uuid"] for item in served)


@pytest.mark.parametrize("level", ["workspace", "repository", "user"])
def test_pull_request_pages_union_is_the_truth(
    cloud_sim: Simulator, http: requests.Session, truth: Truth, level: str
) -> None:
    """Endpoints 1, 3, 5 paged to the end serve each matching pull request once, equal to truth."""
    ws = truth.workspace
    params = {"since_date": BEFORE_HISTORY, "pagelen": "7"}
    if level == "workspace":
        scopes: list[tuple[str, dict[str, str]]] = [(f"/workspace/{ws}/pull-requests", {})]
    elif level == "repository":
        scopes = [
            (f"/workspace/{ws}/repos/{r['slug']}/pull-requests", {"repo": r["slug"]})
            for r in truth.repos
        ]
    else:
        scopes = [
            (f"/workspace/{ws}/users/{u['uuid']}/pull-requests", {"user": u["_sim"]["slug"]})
            for u in truth.users
        ]
    everything: list[dict[str, Any]] = []
    for path, scope in scopes:
        served = collect(http, cloud_sim, path, params)
        assert_prs_equal(served, expected_prs(truth, since=BEFORE_HISTORY, **scope))
        everything.extend(served)
    assert set(by_pr_key(everything)) == set(truth.pr_by_key())  # every level covers all


def test_default_pagelen_is_500_and_500_is_allowed(
    cloud_sim: Simulator, http: requests.Session, truth: Truth
) -> None:
    """Without pagelen a page holds up to 500 items; pagelen=500 is accepted, pagelen=1 too."""
    path = f"/workspace/{truth.workspace}/commits"
    total = len(expected_commits(truth, merges="include"))
    body = fetch(http, cloud_sim, path, {"merges": "include"})
    assert body["pagelen"] == 500
    assert len(body["values"]) == min(500, total)
    assert ("next" in body) == (total > 500)
    explicit = fetch(http, cloud_sim, path, {"merges": "include", "pagelen": "500"})
    assert (explicit["values"], explicit["pagelen"]) == (body["values"], 500)
    single = fetch(http, cloud_sim, path, {"merges": "include", "pagelen": "1", "page": "2"})
    assert single["values"] == body["values"][1:2]
    assert (single["page"], single["pagelen"]) == (2, 1)


def test_no_next_when_the_last_page_is_exactly_full(
    cloud_sim: Simulator, http: requests.Session, truth: Truth
) -> None:
    """When the items fill the last page exactly, that page carries no `next`."""
    slug = truth.repos[0]["slug"]
    path = f"/workspace/{truth.workspace}/repos/{slug}/commits"
    expected = expected_commits(truth, repo=slug, merges="include")
    sizes = [len(expected)] + [d for d in range(2, 11) if len(expected) % d == 0]
    for pages in sizes[1:] or [1]:
        pagelen = len(expected) // pages
        served = collect(http, cloud_sim, path, {"merges": "include", "pagelen": str(pagelen)})
        assert_commits_equal(served, expected)
    whole = fetch(http, cloud_sim, path, {"merges": "include", "pagelen": str(sizes[0])})
    assert len(whole["values"]) == len(expected) and "next" not in whole


def test_following_previous_returns_the_earlier_page(
    cloud_sim: Simulator, http: requests.Session, truth: Truth
) -> None:
    """`previous` on page 3 leads back to page 2, with the same items."""
    path = f"/workspace/{truth.workspace}/commits"
    params = {"pagelen": "30", "order": "oldest"}
    second = fetch(http, cloud_sim, path, {**params, "page": "2"})
    third = fetch(http, cloud_sim, path, {**params, "page": "3"})
    back = ok_json(http.get(third["previous"], headers=cloud_sim.auth_headers, timeout=10))
    assert back == second
    assert second["values"] != third["values"]


def test_next_links_keep_offsets_with_plus_encoded(
    cloud_sim: Simulator, http: requests.Session, truth: Truth
) -> None:
    """An offset with '+' survives in next links: every page still obeys the window."""
    since, until = "2026-04-10T10:00:00+05:45", "2026-05-20T23:30:00+13:45"
    params = {"since_date": since, "until_date": until, "order": "oldest", "pagelen": "20"}
    served = collect(http, cloud_sim, f"/workspace/{truth.workspace}/commits", params)
    assert_commits_equal(served, expected_commits(truth, since=since, until=until))
