"""Host conditions, each on its own host: licence, indexing, forbidden repositories, old apps,
a login proxy, link bases, path forms, an inclusive until."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
import requests

from simulator import Simulator
from tests.simulator.cloud.client import (
    LOC_MESSAGE,
    TOKEN_MESSAGE,
    UNINDEXED_MESSAGE,
    any_paths,
    assert_commits_equal,
    assert_error,
    assert_html,
    assert_link,
    by_hash,
    call,
    collect,
    fetch,
    ok_json,
    ws_paths,
)
from tests.simulator.cloud.truth import Truth, expected_commits, instant, read_truth


def cloud_host(make_sim: Callable[..., Simulator]) -> tuple[Simulator, Truth]:
    sim = make_sim(edition="cloud")
    return sim, read_truth(sim)


def test_unlicensed_workspace_is_403_on_every_endpoint(
    make_sim: Callable[..., Simulator], http: requests.Session
) -> None:
    """licensed=False: 403 with the licence message everywhere; a bad token still 401."""
    sim, truth = cloud_host(make_sim)
    sim.set_conditions(licensed=False)
    for path in any_paths(truth).values():
        response = call(http, sim, path)
        assert response.status_code == 403
        message = response.json()["error"]["message"]
        assert "commercial or trial license" in message and "plan details" in message
    assert_error(call(http, sim, any_paths(truth)["8"], token="nope"), 401, TOKEN_MESSAGE)
    sim.set_conditions(licensed=True)
    ok_json(call(http, sim, any_paths(truth)["8"]))


def test_loc_disabled_repository(
    make_sim: Callable[..., Simulator], http: requests.Session
) -> None:
    """Indexing disabled: with_lines=true and changes-statistics fail; the plain list works."""
    sim, truth = cloud_host(make_sim)
    slug, other = truth.repos[0]["slug"], truth.repos[1]["slug"]
    sim.set_conditions(loc_disabled=[slug])
    paths = ws_paths(truth.workspace, slug, "")
    assert_error(call(http, sim, paths["9"], {"with_lines": "true"}), 400, LOC_MESSAGE)
    assert_error(call(http, sim, paths["10"]), 400, LOC_MESSAGE)
    assert_commits_equal(collect(http, sim, paths["9"], {}), expected_commits(truth, repo=slug))
    other_path = ws_paths(truth.workspace, other, "")["9"]
    assert_commits_equal(
        collect(http, sim, other_path, {"with_lines": "true"}),
        expected_commits(truth, repo=other),
        lines=True,
    )
    assert {r["slug"]: r["_sim"]["loc_disabled"] for r in sim.truth("repositories")}[slug]


def test_unindexed_changes_fail_then_succeed(
    make_sim: Callable[..., Simulator], http: requests.Session
) -> None:
    """unindexed={slug: 2}: two answers on 9/10 say so, the third succeeds; others unaffected."""
    sim, truth = cloud_host(make_sim)
    slug, other = truth.repos[0]["slug"], truth.repos[1]["slug"]
    sim.set_conditions(unindexed={slug: 2})
    paths = ws_paths(truth.workspace, slug, "")
    ok_json(call(http, sim, ws_paths(truth.workspace, other, "")["9"]))
    assert_error(call(http, sim, paths["9"]), 409, UNINDEXED_MESSAGE)
    assert_error(call(http, sim, paths["10"]), 409, UNINDEXED_MESSAGE)
    assert_commits_equal(fetch(http, sim, paths["9"])["values"], expected_commits(truth, repo=slug))
    assert fetch(http, sim, paths["10"])["commits"] == len(expected_commits(truth, repo=slug))


def test_forbidden_repository(make_sim: Callable[..., Simulator], http: requests.Session) -> None:
    """forbidden: 9/10 answer 403 Forbidden; 8 and 11 leave that repository's commits out."""
    sim, truth = cloud_host(make_sim)
    slug = truth.repos[0]["slug"]
    sim.set_conditions(forbidden=[slug])
    paths = ws_paths(truth.workspace, slug, "")
    assert_error(call(http, sim, paths["9"]), 403, "Forbidden")
    assert_error(call(http, sim, paths["10"]), 403, "Forbidden")
    served = collect(http, sim, paths["8"], {"merges": "include", "pagelen": "250"})
    assert_commits_equal(served, expected_commits(truth, merges="include", hidden_repos=[slug]))
    uuid_of = {u["_sim"]["slug"]: u["uuid"] for u in truth.users}
    author = Counter(
        c["_sim"]["user"]
        for c in truth.commits
        if c["repository"]["slug"] == slug and c["_sim"]["user"]
    ).most_common(1)[0][0]
    mine = expected_commits(truth, user=author, merges="include")
    kept = expected_commits(truth, user=author, merges="include", hidden_repos=[slug])
    assert len(kept) < len(mine)
    served = collect(
        http,
        sim,
        f"/workspace/{truth.workspace}/users/{uuid_of[author]}/commits",
        {"merges": "include"},
    )
    assert_commits_equal(served, kept)


@pytest.mark.parametrize("version, present", [("5.1.0", False), ("4.9.9", False), ("5.2.0", True)])
def test_app_version_below_5_2_is_an_html_404(
    make_sim: Callable[..., Simulator], http: requests.Session, version: str, present: bool
) -> None:
    """An older app has no API: every endpoint is an HTML 404; 5.2.0 answers normally."""
    sim, truth = cloud_host(make_sim)
    sim.set_conditions(app_version=version)
    for path in any_paths(truth).values():
        response = call(http, sim, path)
        if present:
            ok_json(response)
        else:
            assert_html(response, 404)


def test_proxy_login_is_an_html_200(
    make_sim: Callable[..., Simulator], http: requests.Session
) -> None:
    """Behind a login proxy every endpoint answers 200 with an HTML page, not JSON."""
    sim, truth = cloud_host(make_sim)
    sim.set_conditions(proxy_login=True)
    for path in any_paths(truth).values():
        response = call(http, sim, path)
        assert_html(response, 200)
        assert "password" in response.text


def test_next_link_base_changes_link_origin(
    make_sim: Callable[..., Simulator], http: requests.Session
) -> None:
    """next_link_base: next/previous start with that base, keeping path and parameters."""
    sim, truth = cloud_host(make_sim)
    base = "https://analytics.example.test"
    sim.set_conditions(next_link_base=base)
    path = f"/workspace/{truth.workspace}/commits"
    params = {"pagelen": "10", "merges": "only"}
    body = fetch(http, sim, path, {**params, "page": "2"})
    assert body["next"].startswith(base + "/rest/latest/workspace/")
    assert_link(body["next"], base + "/rest/latest", path, params, 3, 10)
    assert_link(body["previous"], base + "/rest/latest", path, params, 1, 10)


@pytest.mark.parametrize("form", ["short", "long"])
def test_path_forms_condition(
    make_sim: Callable[..., Simulator], http: requests.Session, form: str
) -> None:
    """path_forms keeps one form of endpoints 6 and 7; the other becomes an HTML 404."""
    sim, truth = cloud_host(make_sim)
    paths = any_paths(truth)
    before = {k: fetch(http, sim, paths[f"{k}-{form}"]) for k in ("6", "7")}
    sim.set_conditions(path_forms=form)
    other = "long" if form == "short" else "short"
    for key in ("6", "7"):
        assert fetch(http, sim, paths[f"{key}-{form}"]) == before[key]
        assert_html(call(http, sim, paths[f"{key}-{other}"]), 404)
    assert before["7"]["values"]


def test_until_inclusive_condition_applies_on_a_running_host(
    make_sim: Callable[..., Simulator], http: requests.Session
) -> None:
    """until_inclusive=True takes in the item dated exactly at until, even after a query."""
    sim, truth = cloud_host(make_sim)
    times = Counter(instant(c) for c in truth.commits)
    commit = next(c for c in truth.commits[len(truth.commits) // 2 :] if times[instant(c)] == 1)
    path = f"/workspace/{truth.workspace}/commits"
    params = {"until_date": commit["_sim"]["instant"], "merges": "include"}
    assert commit["hash"] not in by_hash(collect(http, sim, path, params))
    sim.set_conditions(until_inclusive=True)
    assert commit["hash"] in by_hash(collect(http, sim, path, params))
