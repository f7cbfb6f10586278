"""The items' fields: commit users, abbreviated parents, slugs with spaces and capitals."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from urllib.parse import quote

import pytest

from simulator import Simulator
from tests.simulator.selfhosted.client import Api
from tests.simulator.selfhosted.truth import Truth


def test_commit_user_present_only_for_primary_email(api: Api, truth: Truth) -> None:
    items = api.all_pages("/commits", limit=1000, expected_limit=1000)
    primary = {u["emailAddress"]: u for u in truth.users}
    kinds: Counter[str] = Counter()
    for item in items:
        email = item["author"]["emailAddress"]
        if email in primary:
            user = primary[email]
            assert item["user"] == {
                "emailAddress": email,
                "displayName": user["displayName"],
                "name": user["name"],
            }
            kinds["primary"] += 1
        else:
            assert "user" not in item
            kinds["alias" if "@personal.example" in email else "outsider"] += 1
        assert item["authorTimestamp"].endswith("Z")
        assert set(item["linesOfCode"]) == {"added", "deleted"}
        assert item["repository"]["project"]["type"] == "NORMAL"
    assert kinds["primary"] and kinds["alias"] and kinds["outsider"]


@pytest.mark.parametrize("length", [None, 12, 40])
def test_parents_abbreviated_per_condition_and_roots_empty(
    make_sim: Callable[..., Simulator], length: int | None
) -> None:
    """Parent ids are 20-char prefixes by default (server_parent_id_length); roots: []."""
    sim = make_sim(edition="server")
    if length is not None:
        sim.set_conditions(server_parent_id_length=length)
    client = Api(sim)
    served_items = {
        c["id"]: c for c in client.all_pages("/commits", limit=1000, expected_limit=1000)
    }
    cut = length or 20
    roots = 0
    for commit in sim.truth("commits"):
        full = commit["_sim"]["parents"]
        assert served_items[commit["id"]]["parents"] == [{"id": p[:cut]} for p in full]
        assert all(len(p) == 40 for p in full)
        roots += not full
    assert roots > 0
    sample = next(c for c in sim.truth("commits") if c["_sim"]["parents"])
    repo = sample["repository"]
    single = client.json(
        f"/projects/{repo['project']['key']}/repos/"
        f"{quote(repo['slug'], safe='')}/commits/{sample['id']}"
    )
    assert single["parents"] == [{"id": p[:cut]} for p in sample["_sim"]["parents"]]


def test_repository_slug_with_spaces_and_capitals(api: Api, truth: Truth) -> None:
    spaced = [r for r in truth.repos if " " in r["slug"] and r["slug"] != r["slug"].lower()]
    assert spaced
    for repo in spaced:
        path = f"/projects/{repo['project']['key']}/repos/{quote(repo['slug'], safe='')}"
        assert "%20" in path
        items = api.all_pages(f"{path}/commits", limit=1000, expected_limit=1000)
        assert items and {(i["repository"]["slug"], i["repository"]["name"]) for i in items} == {
            (repo["slug"], repo["name"])
        }
        prs = api.all_pages(f"{path}/pull-requests", limit=500, expected_limit=500)
        assert {p["toRef"]["repository"]["slug"] for p in prs} <= {repo["slug"]}
        for pr in prs:
            assert pr["links"]["self"][0]["href"].endswith(
                f"/projects/{repo['project']['key']}/repos/{repo['slug']}/pull-requests/{pr['id']}"
            )
