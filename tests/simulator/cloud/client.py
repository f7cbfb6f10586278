"""Calling the cloud API as a client following the spec would, and checking its envelopes,
links and errors."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import requests

from simulator import Simulator
from tests.simulator.cloud.truth import PR_STATES, Truth, pr_key, public

JSON = "application/json"
TOKEN_MESSAGE = "Access token is invalid or expired."
LOC_MESSAGE = "Lines of code indexing is disabled for this repository."
UNINDEXED_MESSAGE = "The repository has unindexed changes."


def ws_paths(ws: str, repo: str, user_uuid: str) -> dict[str, str]:
    """Every endpoint path below the API prefix; 6 and 7 in both stated forms."""
    return {
        "1": f"/workspace/{ws}/pull-requests",
        "2": f"/workspace/{ws}/pull-requests/statistics",
        "3": f"/workspace/{ws}/repos/{repo}/pull-requests",
        "4": f"/workspace/{ws}/repos/{repo}/pull-requests/statistics",
        "5": f"/workspace/{ws}/users/{user_uuid}/pull-requests",
        "6-short": f"/{ws}/users/{user_uuid}/pull-requests/statistics",
        "6-long": f"/workspace/{ws}/users/{user_uuid}/pull-requests/statistics",
        "7-short": f"/{ws}/users",
        "7-long": f"/workspace/{ws}/users",
        "8": f"/workspace/{ws}/commits",
        "9": f"/workspace/{ws}/repos/{repo}/commits",
        "10": f"/workspace/{ws}/repos/{repo}/changes-statistics",
        "11": f"/workspace/{ws}/users/{user_uuid}/commits",
    }


ENDPOINT_KEYS = tuple(ws_paths("w", "r", "u"))
PAGED = ("1", "3", "5", "8", "9", "11")


def any_paths(truth: Truth) -> dict[str, str]:
    """Endpoint paths for a repository and a user that both have commits and pull requests."""
    user = next(
        u
        for u in truth.users
        if any(c["_sim"]["user"] == u["_sim"]["slug"] for c in truth.commits)
        and any(p["_sim"]["user"] == u["_sim"]["slug"] for p in truth.prs)
    )
    return ws_paths(truth.workspace, truth.repos[0]["slug"], user["uuid"])


def call(
    http: requests.Session,
    sim: Simulator,
    path: str,
    params: dict[str, str] | None = None,
    token: str | None = "default",
) -> requests.Response:
    """GET an API path (below the prefix) as a client following the spec would."""
    headers = {"Accept": JSON}
    if token == "default":
        headers.update(sim.auth_headers)
    elif token is not None:
        headers["Authorization"] = token
    return http.get(sim.api_base + path, params=params, headers=headers, timeout=10)


def ok_json(response: requests.Response) -> Any:
    assert response.status_code == 200, response.text[:300]
    assert response.headers["Content-Type"].startswith(JSON)
    return response.json()


def fetch(
    http: requests.Session, sim: Simulator, path: str, params: dict[str, str] | None = None
) -> Any:
    return ok_json(call(http, sim, path, params))


def assert_error(response: requests.Response, status: int, message: str) -> dict[str, Any]:
    """A JSON error answer with this status and message; returns the error object."""
    assert response.status_code == status, response.text[:300]
    assert response.headers["Content-Type"].startswith(JSON)
    body = response.json()
    assert body["type"] == "error"
    assert body["error"]["message"] == message
    return body["error"]


def assert_html(response: requests.Response, status: int) -> None:
    assert response.status_code == status
    assert response.headers["Content-Type"].startswith("text/html")
    assert response.text.lstrip().lower().startswith("<!doctype html")


def assert_link(
    link: str, base: str, path: str, params: dict[str, str], page: int, pagelen: int
) -> None:
    """An absolute page link: the request's path, its parameters, and page/pagelen."""
    parts = urlsplit(link)
    origin = urlsplit(base)
    assert (parts.scheme, parts.netloc) == (origin.scheme, origin.netloc)
    assert unquote(parts.path) == origin.path + path
    query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    assert query == {**params, "page": str(page), "pagelen": str(pagelen)}


def collect(
    http: requests.Session,
    sim: Simulator,
    path: str,
    params: dict[str, str],
    link_base: str | None = None,
) -> list[dict[str, Any]]:
    """Page to the end by following `next`, checking each envelope; all items in order."""
    pagelen = int(params.get("pagelen", "500"))
    base = link_base or sim.api_base
    items: list[dict[str, Any]] = []
    body = fetch(http, sim, path, params)
    number = 1
    while True:
        assert set(body) <= {"values", "page", "pagelen", "next", "previous"}
        assert (body["page"], body["pagelen"]) == (number, pagelen)
        assert len(body["values"]) <= pagelen
        items.extend(body["values"])
        if number == 1:
            assert "previous" not in body
        else:
            assert body["values"], "a next link led to an empty page"
            assert_link(body["previous"], base, path, params, number - 1, pagelen)
        if "next" not in body:
            break
        assert len(body["values"]) == pagelen  # only the last page may be short
        assert_link(body["next"], base, path, params, number + 1, pagelen)
        number += 1
        response = http.get(body["next"], headers={"Accept": JSON, **sim.auth_headers}, timeout=10)
        body = ok_json(response)
    return items


def by_hash(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Items keyed by hash, asserting none repeats."""
    keyed = {item["hash"]: item for item in items}
    assert len(keyed) == len(items), "a commit was served twice"
    return keyed


def by_pr_key(items: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    keyed = {pr_key(item): item for item in items}
    assert len(keyed) == len(items), "a pull request was served twice"
    return keyed


def assert_commits_equal(
    served: list[dict[str, Any]], expected: dict[str, dict[str, Any]], lines: bool = False
) -> None:
    """Served commits are exactly the expected set, each item equal to its truth."""
    got = by_hash(served)
    assert set(got) == set(expected)
    for sha, item in got.items():
        assert item == (public(expected[sha]) if lines else public(expected[sha], "lines"))


def assert_prs_equal(
    served: list[dict[str, Any]], expected: dict[tuple[str, int], dict[str, Any]]
) -> None:
    got = by_pr_key(served)
    assert set(got) == set(expected)
    for key, item in got.items():
        assert item == public(expected[key])


def state_counts(items: Iterable[dict[str, Any]]) -> dict[str, int]:
    counts = Counter(item["state"] for item in items)
    return {s.lower(): counts.get(s, 0) for s in PR_STATES}
