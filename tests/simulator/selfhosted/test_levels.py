"""The levels agree where they overlap; a user's commits include alias e-mails."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from tests.simulator.selfhosted.client import Api
from tests.simulator.selfhosted.truth import KINDS, Truth


@pytest.mark.parametrize("kind", KINDS)
def test_levels_agree_where_they_overlap(api: Api, truth: Truth, kind: str) -> None:
    """Sum over projects = global; sum over a project's repositories = project; users too."""
    total = api.json(f"/{kind}/statistics")
    count = "commits" if kind == "commits" else "pullRequests"
    projects = {t.path: api.json(f"{t.path}/{kind}/statistics") for t in truth.targets("project")}
    assert sum(s[count] for s in projects.values()) == total[count]
    if kind == "commits":
        for side in ("added", "deleted"):
            assert (
                sum(s["linesOfCode"][side] for s in projects.values()) == total["linesOfCode"][side]
            )
    else:
        for state in ("declined", "merged", "open"):
            assert sum(s["state"][state] for s in projects.values()) == total["state"][state]
    for repo in truth.repos:
        assert any(path.endswith("/" + repo["project"]["key"]) for path in projects)
    by_project: dict[str, int] = defaultdict(int)
    for target in truth.targets("repository"):
        key = target.path.split("/")[2]
        by_project[key] += api.json(f"{target.path}/{kind}/statistics")[count]
    assert {f"/projects/{k}": v for k, v in by_project.items()} == {
        p: s[count] for p, s in projects.items()
    }
    users = sum(api.json(f"{t.path}/{kind}/statistics")[count] for t in truth.targets("user"))
    if kind == "pull-requests":
        assert users == total[count]
    else:
        known = {u["emailAddress"] for u in truth.users} | {
            a for u in truth.users for a in u["_sim"]["aliases"]
        }
        listed = api.all_pages("/commits", limit=1000, expected_limit=1000)
        outsiders = sum(1 for c in listed if c["author"]["emailAddress"] not in known)
        assert outsiders > 0
        assert users + outsiders == total[count]


def test_user_level_includes_alias_commits_without_user_object(api: Api, truth: Truth) -> None:
    """A user's commits include those under alias e-mails, which carry no `user` object."""
    with_aliases = [u for u in truth.users if u["_sim"]["aliases"]]
    assert with_aliases
    alias_commits_seen = 0
    for user in with_aliases:
        items = api.all_pages(f"/users/{user['slug']}/commits", limit=1000, expected_limit=1000)
        emails = Counter(c["author"]["emailAddress"] for c in items)
        assert set(emails) <= {user["emailAddress"], *user["_sim"]["aliases"]}
        for item in items:
            if item["author"]["emailAddress"] == user["emailAddress"]:
                assert item["user"] == {k: user[k] for k in ("emailAddress", "displayName", "name")}
            else:
                assert "user" not in item
                alias_commits_seen += 1
        prs = api.all_pages(f"/users/{user['slug']}/pull-requests", limit=500, expected_limit=500)
        assert {p["author"]["user"]["name"] for p in prs} <= {user["slug"]}
        assert len(prs) == sum(1 for p in truth.prs if p["author"]["user"]["name"] == user["slug"])
    assert alias_commits_seen > 0
