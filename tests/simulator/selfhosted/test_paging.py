"""Paging and the envelope: limits, their maxima, starts past the end, a small host."""

from __future__ import annotations

import pytest

from simulator import Simulator
from tests.simulator.selfhosted.client import Api
from tests.simulator.selfhosted.truth import KINDS, LIMIT_MAX, Truth, by_key, statistics_of


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("limit", [None, 1, 7, 100])
def test_paging_to_the_end_returns_truth_exactly(
    api: Api, truth: Truth, kind: str, limit: int | None
) -> None:
    """Default limit 25 and explicit limits: pages chain by nextPageStart to the whole truth."""
    if limit == 1 and kind == "commits":
        limit = 37  # 600 one-item pages would only slow the suite down
    items = api.all_pages(f"/{kind}", limit=limit, expected_limit=limit or 25)
    assert len(items) == len(truth.items(kind))
    assert by_key(kind, items) == by_key(kind, truth.items(kind))


@pytest.mark.parametrize("kind", KINDS)
def test_limit_above_maximum_is_clamped_and_reported(api: Api, truth: Truth, kind: str) -> None:
    maximum = LIMIT_MAX[kind]
    for asked in (maximum, maximum + 1, 10 * maximum):
        page = api.json(f"/{kind}", limit=asked)
        assert page["limit"] == maximum
        assert page["size"] == len(page["values"]) == min(maximum, len(truth.items(kind)))
        assert page["isLastPage"] is True and "nextPageStart" not in page
    assert api.json(f"/{kind}", limit=maximum - 1)["limit"] == maximum - 1


@pytest.mark.parametrize("kind", KINDS)
def test_start_past_the_end_is_an_empty_last_page(api: Api, truth: Truth, kind: str) -> None:
    total = len(truth.items(kind))
    page = api.json(f"/{kind}", start=total + 5)
    assert page == {"size": 0, "limit": 25, "isLastPage": True, "start": total + 5, "values": []}
    tail = api.json(f"/{kind}", start=total - 3, limit=10)
    assert tail["size"] == 3 and tail["isLastPage"] is True and tail["start"] == total - 3


def test_small_host_commits_page_across_the_1000_maximum(small_sim: Simulator) -> None:
    """~20k commits: limit 5000 is served as pages of 1000 that add up to the truth."""
    client = Api(small_sim)
    commits = small_sim.truth("commits")
    assert len(commits) > 19_000
    items = client.all_pages("/commits", limit=5000, expected_limit=1000)
    assert by_key("commits", items) == by_key("commits", commits)
    first = client.json("/commits", limit=1000)
    assert [c["id"] for c in first["values"]] == [c["id"] for c in items[:1000]]
    assert first["nextPageStart"] == 1000 and first["isLastPage"] is False
    assert client.json("/commits/statistics") == statistics_of("commits", commits)


def test_small_host_pull_requests_page_across_the_500_maximum(small_sim: Simulator) -> None:
    client = Api(small_sim)
    prs = small_sim.truth("pull-requests")
    assert len(prs) == 2000
    items = client.all_pages("/pull-requests", limit=1200, expected_limit=500)
    assert by_key("pull-requests", items) == by_key("pull-requests", prs)
    assert client.json("/pull-requests/statistics") == statistics_of("pull-requests", prs)
    project = small_sim.truth("projects")[-1]["key"]
    in_project = [p for p in prs if p["toRef"]["repository"]["project"]["key"] == project]
    assert len(in_project) > 25
    assert by_key(
        "pull-requests", client.all_pages(f"/projects/{project}/pull-requests")
    ) == by_key("pull-requests", in_project)
