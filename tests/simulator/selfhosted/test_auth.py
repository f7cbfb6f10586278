"""Authentication and permissions: basic and bearer, bad credentials, a restricted user, a
forbidden repository."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

import pytest
import requests

from simulator import Simulator
from tests.simulator.selfhosted.client import (
    BEARER,
    RESTRICTED,
    RESTRICTED_BEARER,
    Api,
    commit_path,
    error_of,
)
from tests.simulator.selfhosted.truth import (
    KINDS,
    LIMIT_MAX,
    Item,
    Truth,
    by_key,
    read_truth,
    served,
    statistics_of,
)


def test_basic_and_bearer_see_the_same_data(server_sim: Simulator, api: Api) -> None:
    bearer = Api(server_sim, auth=None, headers=BEARER)
    for path in (
        "/commits",
        "/pull-requests",
        "/commits/statistics",
        "/projects/CORE/pull-requests/statistics",
    ):
        assert bearer.json(path, limit=100) == api.json(path, limit=100)
    log = server_sim.requests()["log"]
    assert {"basic", "bearer"} <= {entry["auth"] for entry in log}


@pytest.mark.parametrize(
    "how",
    ["none", "wrong-password", "unknown-user", "wrong-bearer", "restricted-password-for-analyst"],
)
def test_bad_credentials_are_a_401(server_sim: Simulator, how: str) -> None:
    auth, headers = {
        "none": (None, {}),
        "wrong-password": (("analyst", "nope"), {}),
        "unknown-user": (("mallory", "analyst-pass"), {}),
        "wrong-bearer": (None, {"Authorization": "Bearer sim-cloud-token"}),
        "restricted-password-for-analyst": (("analyst", "restricted-pass"), {}),
    }[how]
    response = requests.get(
        server_sim.api_base + "/commits", auth=auth, headers=headers, timeout=30
    )
    error = error_of(response, 401)
    assert "values" not in response.json() and error["message"]


@pytest.mark.parametrize("credentials", ["basic", "bearer"])
def test_restricted_user_reads_only_the_first_project(
    server_sim: Simulator, truth: Truth, credentials: str
) -> None:
    client = (
        Api(server_sim, auth=RESTRICTED)
        if credentials == "basic"
        else Api(server_sim, auth=None, headers=RESTRICTED_BEARER)
    )
    first, *others = [p["key"] for p in truth.projects]
    assert others
    readable = {r["slug"] for r in truth.repos if r["project"]["key"] == first}
    for kind in KINDS:

        def mine(i: Item, kind: str = kind) -> bool:
            item = i if kind == "commits" else i["toRef"]
            return item["repository"]["slug"] in readable

        listed = client.all_pages(f"/{kind}", limit=LIMIT_MAX[kind], expected_limit=LIMIT_MAX[kind])
        expected = [i for i in truth.items(kind) if mine(i)]
        assert 0 < len(expected) < len(truth.items(kind))
        assert by_key(kind, listed) == by_key(kind, expected)
        assert client.json(f"/{kind}/statistics") == statistics_of(kind, expected)
        assert client.json(f"/projects/{first}/{kind}/statistics") == statistics_of(kind, expected)
        for key in others:
            error = error_of(client.get(f"/projects/{key}/{kind}"), 403)
            assert "authoris" in (error["exceptionName"] or "").lower()
            error_of(client.get(f"/projects/{key}/{kind}/statistics"), 403)
            error_of(client.get(f"/projects/{key}/{kind}/export/csv"), 403)
        hidden = next(r for r in truth.repos if r["project"]["key"] != first)
        error_of(
            client.get(
                f"/projects/{hidden['project']['key']}/repos/"
                f"{quote(hidden['slug'], safe='')}/{kind}"
            ),
            403,
        )
        user = max(
            truth.users,
            key=lambda u: sum(1 for c in truth.commits if c["_sim"]["user"] == u["slug"]),
        )
        wants = truth.targets("user")[truth.users.index(user)].wants(kind)
        mine_of_user = [i for i in truth.items(kind) if wants(i) and mine(i)]
        assert len(mine_of_user) < sum(1 for i in truth.items(kind) if wants(i))
        assert by_key(
            kind,
            client.all_pages(
                f"/users/{user['slug']}/{kind}",
                limit=LIMIT_MAX[kind],
                expected_limit=LIMIT_MAX[kind],
            ),
        ) == by_key(kind, mine_of_user)
    hidden_commit = next(c for c in truth.commits if c["repository"]["slug"] not in readable)
    error_of(client.get(f"{commit_path(hidden_commit)}/{hidden_commit['id']}"), 403)
    seen_commit = next(c for c in truth.commits if c["repository"]["slug"] in readable)
    assert client.json(f"{commit_path(seen_commit)}/{seen_commit['id']}") == served(seen_commit)


def test_forbidden_repository_is_hidden_and_403_at_repository_level(
    make_sim: Callable[..., Simulator],
) -> None:
    sim = make_sim(edition="server")
    truth = read_truth(sim)
    hidden = truth.repos[0]
    slug, key = hidden["slug"], hidden["project"]["key"]
    sim.set_conditions(forbidden=[slug])
    client = Api(sim)
    assert [r["_sim"]["forbidden"] for r in sim.truth("repositories")][0] is True
    for kind in KINDS:

        def visible(i: Item, kind: str = kind) -> bool:
            item = i if kind == "commits" else i["toRef"]
            return item["repository"]["slug"] != slug

        for target in (*truth.targets("global"), *truth.targets("project"), *truth.targets("user")):
            wants = target.wants(kind)
            expected = [i for i in truth.items(kind) if wants(i) and visible(i)]
            listed = client.all_pages(
                f"{target.path}/{kind}", limit=LIMIT_MAX[kind], expected_limit=LIMIT_MAX[kind]
            )
            assert by_key(kind, listed) == by_key(kind, expected), target.path
            assert client.json(f"{target.path}/{kind}/statistics") == statistics_of(kind, expected)
        assert sum(1 for i in truth.items(kind) if not visible(i)) > 0
        repo_path = f"/projects/{key}/repos/{quote(slug, safe='')}/{kind}"
        for suffix in ("", "/statistics", "/export/csv"):
            error = error_of(client.get(repo_path + suffix), 403)
            assert "authoris" in (error["exceptionName"] or "").lower()
    commit = next(c for c in truth.commits if c["repository"]["slug"] == slug)
    error_of(client.get(f"{commit_path(commit)}/{commit['id']}"), 403)
