"""Cloud edition conformance: the spec's 11 endpoints over real HTTP, checked against truth.

Every expected value is computed here from the simulator's ground truth (`/_sim/truth`,
`info()["now"]`) and the spec, never from simulator code.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

import pytest
import requests

from simulator import Simulator

DAY_S = 86_400
THIRTY_DAYS_S = 30 * DAY_S
JSON = "application/json"
TOKEN_MESSAGE = "Access token is invalid or expired."
LOC_MESSAGE = "Lines of code indexing is disabled for this repository."
UNINDEXED_MESSAGE = "The repository has unindexed changes."
PR_STATES = ("OPEN", "MERGED", "DECLINED", "SUPERSEDED")
LOCAL_DATE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$")
UTC_MICROS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
BRACED_UUID = re.compile(r"^\{[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\}$")
# All of the tiny host's history (90 days before 2026-06-01) lies after this date.
BEFORE_HISTORY = "2025-01-01"


# --------------------------------------------------------------------------------------------
# ground truth
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Truth:
    """One host's ground truth, read once."""

    now: int
    workspace: str
    commits: list[dict[str, Any]]
    prs: list[dict[str, Any]]
    users: list[dict[str, Any]]
    repos: list[dict[str, Any]]

    @property
    def slug_of_uuid(self) -> dict[str, str]:
        return {u["uuid"]: u["_sim"]["slug"] for u in self.users}

    def commit_by_hash(self) -> dict[str, dict[str, Any]]:
        return {c["hash"]: c for c in self.commits}

    def pr_by_key(self) -> dict[tuple[str, int], dict[str, Any]]:
        return {pr_key(p): p for p in self.prs}


def read_truth(sim: Simulator) -> Truth:
    info = sim.info()
    return Truth(info["now"], info["workspace"], sim.truth("commits"),
                 sim.truth("pull-requests"), sim.truth("users"), sim.truth("repositories"))


@pytest.fixture(scope="module")
def truth(cloud_sim: Simulator) -> Truth:
    return read_truth(cloud_sim)


def epoch(text: str) -> int:
    """An ISO-8601 timestamp (Z, offset or naive UTC) or a date (midnight UTC) -> epoch s."""
    if len(text) == 10:
        text += "T00:00:00"
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())


def epoch_ms(text: str) -> int:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return round(moment.timestamp() * 1000) if len(text) > 10 else epoch(text) * 1000


def instant(commit: dict[str, Any]) -> int:
    return epoch(commit["_sim"]["instant"])


def local_wall_time(epoch_s: int, offset_minutes: int) -> str:
    shifted = datetime.fromtimestamp(epoch_s, UTC) + timedelta(minutes=offset_minutes)
    return shifted.strftime("%Y-%m-%dT%H:%M:%S")


def with_offset(epoch_s: int, offset_minutes: int) -> str:
    """The same instant written in the author's local time with an explicit offset."""
    sign = "+" if offset_minutes >= 0 else "-"
    hours, minutes = divmod(abs(offset_minutes), 60)
    return f"{local_wall_time(epoch_s, offset_minutes)}{sign}{hours:02d}:{minutes:02d}"


def micros_z(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return datetime.fromtimestamp(seconds, UTC).strftime(
        "%Y-%m-%dT%H:%M:%S") + f".{millis:03d}000Z"


def pr_key(item: dict[str, Any]) -> tuple[str, int]:
    return item["destination"]["repository"]["slug"], item["id"]


def public(item: dict[str, Any], *drop: str) -> dict[str, Any]:
    """A truth item as the API serves it: without `_sim` and the named fields."""
    return {k: v for k, v in item.items() if k != "_sim" and k not in drop}


def expected_commits(truth: Truth, *, repo: str | None = None, user: str | None = None,
                     merges: str = "exclude", since: str | None = None,
                     until: str | None = None,
                     hidden_repos: Iterable[str] = ()) -> dict[str, dict[str, Any]]:
    """Truth commits a commit list with these parameters must return, by hash."""
    low = epoch(since) if since else None
    high = epoch(until) if until else None
    hidden = set(hidden_repos)
    found = {}
    for commit in truth.commits:
        merge = len(commit["parents"]) > 1
        assert merge == commit["_sim"]["is_merge"]
        at = instant(commit)
        if ((repo is None or commit["repository"]["slug"] == repo)
                and (user is None or commit["_sim"]["user"] == user)
                and commit["repository"]["slug"] not in hidden
                and (merges == "include" or merge == (merges == "only"))
                and (low is None or at >= low) and (high is None or at < high)):
            found[commit["hash"]] = commit
    return found


def expected_prs(truth: Truth, *, repo: str | None = None, user: str | None = None,
                 state: str = "all", since: str | None = None, until: str | None = None,
                 date_type: str = "created") -> dict[tuple[str, int], dict[str, Any]]:
    """Truth pull requests a list with these parameters must return (30-day default)."""
    low = epoch_ms(since) if since else None
    high = epoch_ms(until) if until else None
    if low is None and high is None:
        low = (truth.now - THIRTY_DAYS_S) * 1000
    found = {}
    for pr in truth.prs:
        at = pr["_sim"]["created_ms" if date_type == "created" else "updated_ms"]
        if ((repo is None or pr_key(pr)[0] == repo)
                and (user is None or pr["_sim"]["user"] == user)
                and (state == "all" or pr["state"] == state.upper())
                and (low is None or at >= low) and (high is None or at < high)):
            found[pr_key(pr)] = pr
    return found


def percentile(values: list[int], fraction: float) -> float:
    """numpy's default (linear) method: interpolate between the closest ranks."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = (len(ordered) - 1) * fraction
    below, above = math.floor(position), math.ceil(position)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


# --------------------------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------------------------
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
    user = next(u for u in truth.users
                if any(c["_sim"]["user"] == u["_sim"]["slug"] for c in truth.commits)
                and any(p["_sim"]["user"] == u["_sim"]["slug"] for p in truth.prs))
    return ws_paths(truth.workspace, truth.repos[0]["slug"], user["uuid"])


def call(http: requests.Session, sim: Simulator, path: str,
         params: dict[str, str] | None = None, token: str | None = "default") -> requests.Response:
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


def fetch(http: requests.Session, sim: Simulator, path: str,
          params: dict[str, str] | None = None) -> Any:
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


def assert_link(link: str, base: str, path: str, params: dict[str, str], page: int,
                pagelen: int) -> None:
    """An absolute page link: the request's path, its parameters, and page/pagelen."""
    parts = urlsplit(link)
    origin = urlsplit(base)
    assert (parts.scheme, parts.netloc) == (origin.scheme, origin.netloc)
    assert unquote(parts.path) == origin.path + path
    query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    assert query == {**params, "page": str(page), "pagelen": str(pagelen)}


def collect(http: requests.Session, sim: Simulator, path: str, params: dict[str, str],
            link_base: str | None = None) -> list[dict[str, Any]]:
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
        response = http.get(body["next"], headers={"Accept": JSON, **sim.auth_headers},
                            timeout=10)
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


def assert_commits_equal(served: list[dict[str, Any]],
                         expected: dict[str, dict[str, Any]], lines: bool = False) -> None:
    """Served commits are exactly the expected set, each item equal to its truth."""
    got = by_hash(served)
    assert set(got) == set(expected)
    for sha, item in got.items():
        assert item == (public(expected[sha]) if lines else public(expected[sha], "lines"))


def assert_prs_equal(served: list[dict[str, Any]],
                     expected: dict[tuple[str, int], dict[str, Any]]) -> None:
    got = by_pr_key(served)
    assert set(got) == set(expected)
    for key, item in got.items():
        assert item == public(expected[key])


def state_counts(items: Iterable[dict[str, Any]]) -> dict[str, int]:
    counts = Counter(item["state"] for item in items)
    return {s.lower(): counts.get(s, 0) for s in PR_STATES}


# --------------------------------------------------------------------------------------------
# endpoints and envelopes
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("endpoint", ENDPOINT_KEYS)
def test_every_endpoint_answers_its_resource_shape(
        cloud_sim: Simulator, http: requests.Session, truth: Truth, endpoint: str) -> None:
    """Each of the 11 endpoints (6 and 7 in both forms) answers 200 JSON with the spec's fields."""
    body = fetch(http, cloud_sim, any_paths(truth)[endpoint])
    if endpoint in PAGED:
        assert set(body) <= {"values", "page", "pagelen", "next", "previous"}
        assert body["values"] and (body["page"], body["pagelen"]) == (1, 500)
        fields = ({"id", "title", "state", "closed", "author", "destination", "created_date",
                   "closed_date", "updated_date", "comment_count", "task_count"}
                  if endpoint in ("1", "3", "5")
                  else {"author", "date", "hash", "parents", "repository"})
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
        cloud_sim: Simulator, http: requests.Session, truth: Truth) -> None:
    """Endpoint 8 paged to the end serves every visible commit once, each equal to truth."""
    served = collect(http, cloud_sim, f"/workspace/{truth.workspace}/commits",
                     {"merges": "include", "pagelen": "97"})
    assert_commits_equal(served, expected_commits(truth, merges="include"))


def test_repository_commit_pages_union_is_the_truth(
        cloud_sim: Simulator, http: requests.Session, truth: Truth) -> None:
    """Endpoint 9 paged to the end, for every repository (slugs with spaces included)."""
    for repo in truth.repos:
        served = collect(http, cloud_sim,
                         f"/workspace/{truth.workspace}/repos/{repo['slug']}/commits",
                         {"merges": "include", "pagelen": "40"})
        assert_commits_equal(served, expected_commits(truth, repo=repo["slug"],
                                                      merges="include"))


def test_user_commit_pages_are_the_users_truth_commits(
        cloud_sim: Simulator, http: requests.Session, truth: Truth) -> None:
    """Endpoint 11 serves exactly the commits whose truth user is that user (aliases too)."""
    assert any(c["_sim"]["email"] != f"{c['_sim']['user']}@corp.example"
               for c in truth.commits if c["_sim"]["user"])  # alias commits exist to count
    for user in truth.users:
        served = collect(http, cloud_sim,
                         f"/workspace/{truth.workspace}/users/{user['uuid']}/commits",
                         {"merges": "include", "pagelen": "25"})
        slug = truth.slug_of_uuid[user["uuid"]]
        assert_commits_equal(served, expected_commits(truth, user=slug, merges="include"))
        assert all(item["author"]["uuid"] == user["uuid"] for item in served)


@pytest.mark.parametrize("level", ["workspace", "repository", "user"])
def test_pull_request_pages_union_is_the_truth(
        cloud_sim: Simulator, http: requests.Session, truth: Truth, level: str) -> None:
    """Endpoints 1, 3, 5 paged to the end serve each matching pull request once, equal to truth."""
    ws = truth.workspace
    params = {"since_date": BEFORE_HISTORY, "pagelen": "7"}
    if level == "workspace":
        scopes: list[tuple[str, dict[str, str]]] = [(f"/workspace/{ws}/pull-requests", {})]
    elif level == "repository":
        scopes = [(f"/workspace/{ws}/repos/{r['slug']}/pull-requests", {"repo": r["slug"]})
                  for r in truth.repos]
    else:
        scopes = [(f"/workspace/{ws}/users/{u['uuid']}/pull-requests",
                   {"user": u["_sim"]["slug"]}) for u in truth.users]
    everything: list[dict[str, Any]] = []
    for path, scope in scopes:
        served = collect(http, cloud_sim, path, params)
        assert_prs_equal(served, expected_prs(truth, since=BEFORE_HISTORY, **scope))
        everything.extend(served)
    assert set(by_pr_key(everything)) == set(truth.pr_by_key())  # every level covers all


def test_default_pagelen_is_500_and_500_is_allowed(
        cloud_sim: Simulator, http: requests.Session, truth: Truth) -> None:
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
        cloud_sim: Simulator, http: requests.Session, truth: Truth) -> None:
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
        cloud_sim: Simulator, http: requests.Session, truth: Truth) -> None:
    """`previous` on page 3 leads back to page 2, with the same items."""
    path = f"/workspace/{truth.workspace}/commits"
    params = {"pagelen": "30", "order": "oldest"}
    second = fetch(http, cloud_sim, path, {**params, "page": "2"})
    third = fetch(http, cloud_sim, path, {**params, "page": "3"})
    back = ok_json(http.get(third["previous"], headers=cloud_sim.auth_headers, timeout=10))
    assert back == second
    assert second["values"] != third["values"]


def test_next_links_keep_offsets_with_plus_encoded(
        cloud_sim: Simulator, http: requests.Session, truth: Truth) -> None:
    """An offset with '+' survives in next links: every page still obeys the window."""
    since, until = "2026-04-10T10:00:00+05:45", "2026-05-20T23:30:00+13:45"
    params = {"since_date": since, "until_date": until, "order": "oldest", "pagelen": "20"}
    served = collect(http, cloud_sim, f"/workspace/{truth.workspace}/commits", params)
    assert_commits_equal(served, expected_commits(truth, since=since, until=until))


# --------------------------------------------------------------------------------------------
# parameters and defaults: pull requests
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("state", ["all", "open", "merged", "declined", "superseded"])
def test_pull_request_state_filter(
        cloud_sim: Simulator, http: requests.Session, truth: Truth, state: str) -> None:
    """state selects items by their uppercase state; `all` keeps every state."""
    params = {"state": state, "since_date": BEFORE_HISTORY}
    served = collect(http, cloud_sim, f"/workspace/{truth.workspace}/pull-requests", params)
    expected = expected_prs(truth, state=state, since=BEFORE_HISTORY)
    assert expected, f"no {state} pull request in truth"
    assert_prs_equal(served, expected)
    states = {item["state"] for item in served}
    assert states == (set(PR_STATES) if state == "all" else {state.upper()})


@pytest.mark.parametrize("date_type", ["created", "updated", None])
def test_pull_request_default_window_is_thirty_days(
        cloud_sim: Simulator, http: requests.Session, truth: Truth,
        date_type: str | None) -> None:
    """Without since_date and until_date, lists and statistics cover the last 30 days."""
    params = {"date_type": date_type} if date_type else {}
    ws = truth.workspace
    expected = expected_prs(truth, date_type=date_type or "created")
    older = [p for p in truth.prs if p["_sim"]["created_ms"] < (truth.now - THIRTY_DAYS_S) * 1000]
    assert expected and older  # the window really cuts something off
    served = collect(http, cloud_sim, f"/workspace/{ws}/pull-requests", params)
    assert_prs_equal(served, expected)
    stats = fetch(http, cloud_sim, f"/workspace/{ws}/pull-requests/statistics", params)
    assert stats == {"pull_requests": len(expected),
                     "state": state_counts(expected.values())}


@pytest.mark.parametrize("date_type", ["created", "updated"])
@pytest.mark.parametrize("since, until", [
    ("2026-04-15", None),
    (None, "2026-05-20T10:00:00+02:00"),
    ("2026-04-01T06:30:00-03:30", "2026-05-20"),
])
def test_pull_request_date_filters(
        cloud_sim: Simulator, http: requests.Session, truth: Truth, date_type: str,
        since: str | None, until: str | None) -> None:
    """since_date/until_date (date-only or with offset) bound the date date_type selects."""
    params = {k: v for k, v in (("since_date", since), ("until_date", until),
                                ("date_type", date_type)) if v}
    served = collect(http, cloud_sim, f"/workspace/{truth.workspace}/pull-requests", params)
    expected = expected_prs(truth, since=since, until=until, date_type=date_type)
    assert_prs_equal(served, expected)
    assert 0 < len(expected) < len(truth.prs)


@pytest.mark.parametrize("date_type", ["created", "updated"])
def test_pull_request_since_inclusive_until_exclusive(
        cloud_sim: Simulator, http: requests.Session, truth: Truth, date_type: str) -> None:
    """A pull request dated exactly at since_date is in; exactly at until_date it is out."""
    field = f"{date_type}_date"
    pr = sorted(truth.prs, key=lambda p: p[field])[len(truth.prs) // 2]
    path = f"/workspace/{truth.workspace}/pull-requests"
    at_since = collect(http, cloud_sim, path, {"since_date": pr[field], "date_type": date_type})
    at_until = collect(http, cloud_sim, path, {"until_date": pr[field], "date_type": date_type})
    assert pr_key(pr) in by_pr_key(at_since)
    assert pr_key(pr) not in by_pr_key(at_until)
    assert set(by_pr_key(at_since)) | set(by_pr_key(at_until)) == set(truth.pr_by_key())
    # Bounds keep millisecond precision: one millisecond later flips both answers.
    later = micros_z(pr["_sim"][f"{date_type}_ms"] + 1)
    after = collect(http, cloud_sim, path, {"since_date": later, "date_type": date_type})
    before = collect(http, cloud_sim, path, {"until_date": later, "date_type": date_type})
    assert pr_key(pr) not in by_pr_key(after)
    assert pr_key(pr) in by_pr_key(before)


@pytest.mark.parametrize("date_type", ["created", "updated"])
def test_pull_requests_are_newest_first_by_selected_date(
        cloud_sim: Simulator, http: requests.Session, truth: Truth, date_type: str) -> None:
    """Pull request lists run newest first by the date date_type selects (README's choice)."""
    served = collect(http, cloud_sim, f"/workspace/{truth.workspace}/pull-requests",
                     {"since_date": BEFORE_HISTORY, "date_type": date_type, "pagelen": "13"})
    truth_by_key = truth.pr_by_key()
    times = [truth_by_key[pr_key(item)]["_sim"][f"{date_type}_ms"] for item in served]
    assert times == sorted(times, reverse=True)


def test_pull_request_item_fields_are_consistent(
        cloud_sim: Simulator, http: requests.Session, truth: Truth) -> None:
    """closed_date null iff OPEN; created <= closed <= updated; braced uuid; UTC micros."""
    served = collect(http, cloud_sim, f"/workspace/{truth.workspace}/pull-requests",
                     {"since_date": BEFORE_HISTORY})
    truth_by_key = truth.pr_by_key()
    assert {item["state"] for item in served} == set(PR_STATES)
    for item in served:
        facts = truth_by_key[pr_key(item)]["_sim"]
        assert item["closed"] == (item["state"] != "OPEN")
        assert (item["closed_date"] is None) == (item["state"] == "OPEN")
        assert BRACED_UUID.match(item["author"]["uuid"])
        for name in ("created_date", "updated_date"):
            assert UTC_MICROS.match(item[name])
        assert item["created_date"] == micros_z(facts["created_ms"])
        assert item["updated_date"] == micros_z(facts["updated_ms"])
        assert item["created_date"] <= item["updated_date"]
        if item["closed_date"] is not None:
            assert UTC_MICROS.match(item["closed_date"])
            assert item["closed_date"] == micros_z(facts["closed_ms"])
            assert item["created_date"] <= item["closed_date"] <= item["updated_date"]
        assert {u["uuid"]: u["_sim"]["slug"] for u in truth.users}[
            item["author"]["uuid"]] == facts["user"]


# --------------------------------------------------------------------------------------------
# parameters and defaults: commits
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("order", ["oldest", "newest", None])
def test_commit_order(cloud_sim: Simulator, http: requests.Session, truth: Truth,
                      order: str | None) -> None:
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
def test_commit_merges_filter(cloud_sim: Simulator, http: requests.Session, truth: Truth,
                              merges: str | None, level: str) -> None:
    """merges: exclude (the default) drops merge commits, only keeps just them, include both."""
    slug = truth.repos[0]["slug"]
    busiest = Counter(c["_sim"]["user"] for c in truth.commits if c["_sim"]["is_merge"]
                      and c["_sim"]["user"]).most_common(1)[0][0]
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
    assert kinds == {"exclude": {False}, "only": {True}, "include": {False, True},
                     None: {False}}[merges]


@pytest.mark.parametrize("since, until", [
    ("2026-04-15", None),
    (None, "2026-05-20T10:00:00+02:00"),
    ("2026-04-01T06:30:00-03:30", "2026-05-02T00:00:00Z"),
    ("2026-04-01T00:00:00", "2026-04-08T12:00:00+14:00"),
])
@pytest.mark.parametrize("level", ["workspace", "repository", "user"])
def test_commit_date_filters(cloud_sim: Simulator, http: requests.Session, truth: Truth,
                             since: str | None, until: str | None, level: str) -> None:
    """since_date/until_date bound commits by their real instant, in every accepted form."""
    slug = truth.repos[1]["slug"]
    user = truth.users[0]
    path, scope = {
        "workspace": (f"/workspace/{truth.workspace}/commits", {}),
        "repository": (f"/workspace/{truth.workspace}/repos/{slug}/commits", {"repo": slug}),
        "user": (f"/workspace/{truth.workspace}/users/{user['uuid']}/commits",
                 {"user": user["_sim"]["slug"]}),
    }[level]
    params = {k: v for k, v in (("since_date", since), ("until_date", until)) if v}
    served = collect(http, cloud_sim, path, {**params, "merges": "include"})
    expected = expected_commits(truth, since=since, until=until, merges="include", **scope)
    assert 0 < len(expected) < len(expected_commits(truth, merges="include", **scope))
    assert_commits_equal(served, expected)


def test_commit_since_inclusive_until_exclusive_in_local_offset(
        cloud_sim: Simulator, http: requests.Session, truth: Truth) -> None:
    """A commit's own instant, written with its author's offset: in at since, out at until."""
    path = f"/workspace/{truth.workspace}/commits"
    times = Counter(instant(c) for c in truth.commits)
    plus = [c for c in truth.commits if c["_sim"]["offset_minutes"] > 0 and times[instant(c)] == 1]
    minus = [c for c in truth.commits if c["_sim"]["offset_minutes"] < 0
             and times[instant(c)] == 1]
    for commit in (plus[len(plus) // 2], minus[len(minus) // 2]):
        written = with_offset(instant(commit), commit["_sim"]["offset_minutes"])
        assert written.startswith(commit["date"])  # the served local time plus its offset
        at_since = by_hash(collect(http, cloud_sim, path,
                                   {"since_date": written, "merges": "include"}))
        at_until = by_hash(collect(http, cloud_sim, path,
                                   {"until_date": written, "merges": "include"}))
        assert commit["hash"] in at_since and commit["hash"] not in at_until
        assert len(at_since) + len(at_until) == len(truth.commits)


def test_date_only_bounds_are_midnight_utc(
        cloud_sim: Simulator, http: requests.Session, truth: Truth) -> None:
    """A date-only since/until is that day's 00:00 UTC, for commits and pull requests."""
    def utc_day(epoch_s: int, days: int = 0) -> str:
        return (datetime.fromtimestamp(epoch_s, UTC).date()
                + timedelta(days=days)).isoformat()

    commits = f"/workspace/{truth.workspace}/commits"
    first = min(truth.commits, key=lambda c: instant(c) % DAY_S)  # just after a midnight
    last = max(truth.commits, key=lambda c: instant(c) % DAY_S)  # just before one
    for commit, day in ((first, utc_day(instant(first))), (last, utc_day(instant(last), 1))):
        since = by_hash(collect(http, cloud_sim, commits,
                                {"since_date": day, "merges": "include"}))
        until = by_hash(collect(http, cloud_sim, commits,
                                {"until_date": day, "merges": "include"}))
        assert (commit["hash"] in since) == (commit is first)
        assert (commit["hash"] in until) == (commit is last)
    prs = f"/workspace/{truth.workspace}/pull-requests"
    first_pr = min(truth.prs, key=lambda p: p["_sim"]["created_ms"] % (DAY_S * 1000))
    last_pr = max(truth.prs, key=lambda p: p["_sim"]["created_ms"] % (DAY_S * 1000))
    for pr, day in ((first_pr, utc_day(first_pr["_sim"]["created_ms"] // 1000)),
                    (last_pr, utc_day(last_pr["_sim"]["created_ms"] // 1000, 1))):
        pr_since = by_pr_key(collect(http, cloud_sim, prs, {"since_date": day}))
        pr_until = by_pr_key(collect(http, cloud_sim, prs, {"until_date": day}))
        assert (pr_key(pr) in pr_since) == (pr is first_pr)
        assert (pr_key(pr) in pr_until) == (pr is last_pr)


def test_commit_date_is_author_local_time_without_zone(
        cloud_sim: Simulator, http: requests.Session, truth: Truth) -> None:
    """`date` is the truth instant shifted by the author's offset, with no zone designator."""
    served = collect(http, cloud_sim, f"/workspace/{truth.workspace}/commits",
                     {"merges": "include"})
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
        cloud_sim: Simulator, http: requests.Session, truth: Truth) -> None:
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


# --------------------------------------------------------------------------------------------
# statistics equal what the lists sum to
# --------------------------------------------------------------------------------------------
STAT_PARAMS = [
    {},
    {"state": "merged"},
    {"state": "open", "since_date": BEFORE_HISTORY},
    {"since_date": "2026-04-01", "until_date": "2026-05-15T12:00:00+05:45",
     "date_type": "updated"},
    {"state": "declined", "until_date": "2026-05-01T00:00:00-07:00"},
]


@pytest.mark.parametrize("params", STAT_PARAMS, ids=lambda p: "&".join(map("=".join, p.items()))
                         or "default")
@pytest.mark.parametrize("level", ["workspace", "repository", "user-short", "user-long"])
def test_pull_request_statistics_equal_list_counts(
        cloud_sim: Simulator, http: requests.Session, truth: Truth, params: dict[str, str],
        level: str) -> None:
    """Endpoints 2, 4, 6 count exactly what 1, 3, 5 list with the same parameters."""
    ws = truth.workspace
    pairs: list[tuple[str, str, dict[str, str]]]
    if level == "workspace":
        pairs = [(f"/workspace/{ws}/pull-requests", f"/workspace/{ws}/pull-requests/statistics",
                  {})]
    elif level == "repository":
        pairs = [(f"/workspace/{ws}/repos/{r['slug']}/pull-requests",
                  f"/workspace/{ws}/repos/{r['slug']}/pull-requests/statistics",
                  {"repo": r["slug"]}) for r in truth.repos]
    else:
        stats_root = f"/{ws}" if level == "user-short" else f"/workspace/{ws}"
        pairs = [(f"/workspace/{ws}/users/{u['uuid']}/pull-requests",
                  f"{stats_root}/users/{u['uuid']}/pull-requests/statistics",
                  {"user": u["_sim"]["slug"]}) for u in truth.users]
    nonzero = 0
    for list_path, stats_path, scope in pairs:
        listed = collect(http, cloud_sim, list_path, {**params, "pagelen": "50"})
        stats = fetch(http, cloud_sim, stats_path, params)
        assert stats == {"pull_requests": len(listed), "state": state_counts(listed)}
        expected = expected_prs(truth, **scope, **{k.replace("_date", ""): v
                                                   for k, v in params.items()})
        assert stats["pull_requests"] == len(expected)
        nonzero += bool(stats["pull_requests"])
    assert nonzero


@pytest.mark.parametrize("merges", ["exclude", "include", "only", None])
@pytest.mark.parametrize("window", [
    {},
    {"since_date": "2026-04-01", "until_date": "2026-05-15T12:00:00+05:45"},
])
def test_changes_statistics_equal_commit_list(
        cloud_sim: Simulator, http: requests.Session, truth: Truth, merges: str | None,
        window: dict[str, str]) -> None:
    """Endpoint 10: totals, average, median exactly and p75/p95/p99 interpolated, from 9."""
    ws = truth.workspace
    params = {**window, **({"merges": merges} if merges else {})}
    checked = 0
    for repo in truth.repos:
        slug = repo["slug"]
        listed = collect(http, cloud_sim, f"/workspace/{ws}/repos/{slug}/commits",
                         {**params, "with_lines": "true"})
        stats = fetch(http, cloud_sim, f"/workspace/{ws}/repos/{slug}/changes-statistics",
                      params)
        expected_n = len(expected_commits(truth, repo=slug, merges=merges or "exclude",
                                          since=window.get("since_date"),
                                          until=window.get("until_date")))
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
                assert got[key] == pytest.approx(percentile(values, fraction), rel=1e-12,
                                                 abs=1e-9)
        checked += len(listed) > 3
    assert checked


def test_changes_statistics_of_an_empty_window_are_zeros(
        cloud_sim: Simulator, http: requests.Session, truth: Truth) -> None:
    """No commit in the window: zero commits and zeros everywhere (README's choice)."""
    slug = truth.repos[0]["slug"]
    stats = fetch(http, cloud_sim, f"/workspace/{truth.workspace}/repos/{slug}/changes-statistics",
                  {"since_date": "2020-01-01", "until_date": "2020-02-01"})
    zeros = {"average": 0, "median": 0, "p75": 0, "p95": 0, "p99": 0, "total": 0}
    assert stats == {"commits": 0, "lines_of_code": {k: zeros for k in
                                                     ("added", "changed", "deleted")}}


# --------------------------------------------------------------------------------------------
# users
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["short", "long"])
def test_user_list_equals_truth(cloud_sim: Simulator, http: requests.Session, truth: Truth,
                                form: str) -> None:
    """Endpoint 7 lists every user once with truth's uuid and display name, by display name."""
    root = f"/{truth.workspace}" if form == "short" else f"/workspace/{truth.workspace}"
    body = fetch(http, cloud_sim, f"{root}/users")
    assert set(body) == {"values", "page", "pagelen"}
    assert body["page"] == 1
    expected = sorted(((u["uuid"], u["display_name"]) for u in truth.users), key=lambda x: x[1])
    assert [(v["uuid"], v["display_name"]) for v in body["values"]] == expected
    assert all(BRACED_UUID.match(v["uuid"]) for v in body["values"])


@pytest.mark.parametrize("form", ["short", "long"])
def test_user_list_filter_display_name_is_exact(
        cloud_sim: Simulator, http: requests.Session, truth: Truth, form: str) -> None:
    """filter_display_name narrows to the user with exactly that (unicode) display name."""
    root = f"/{truth.workspace}" if form == "short" else f"/workspace/{truth.workspace}"
    for user in truth.users:
        name = user["display_name"]
        body = fetch(http, cloud_sim, f"{root}/users", {"filter_display_name": name})
        assert body["values"] == [{"uuid": user["uuid"], "display_name": name}]
    name = truth.users[0]["display_name"]
    for near in (name[:-1], name.upper() if name.upper() != name else name.lower(), name + " "):
        assert fetch(http, cloud_sim, f"{root}/users", {"filter_display_name": near})[
            "values"] == []


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("token", [None, "", "not-a-token", "sim-expired-token",
                                   "Bearer sim-cloud-token"])
def test_invalid_or_expired_token_is_401_on_every_endpoint(
        cloud_sim: Simulator, http: requests.Session, truth: Truth, token: str | None) -> None:
    """Missing, wrong, expired or Bearer-wrapped tokens: 401 with the spec's message."""
    for path in any_paths(truth).values():
        assert_error(call(http, cloud_sim, path, token=token), 401, TOKEN_MESSAGE)


@pytest.mark.parametrize("endpoint", ["9", "10"])
def test_unknown_repository_is_404(cloud_sim: Simulator, http: requests.Session, truth: Truth,
                                   endpoint: str) -> None:
    """Endpoints 9 and 10 answer 404 JSON "Repository not found." for an unknown slug."""
    path = ws_paths(truth.workspace, "no-such-repo", truth.users[0]["uuid"])[endpoint]
    assert_error(call(http, cloud_sim, path), 404, "Repository not found.")


def test_unknown_user_or_workspace_is_a_json_404(
        cloud_sim: Simulator, http: requests.Session, truth: Truth) -> None:
    """A missing object is a JSON 404 (not the HTML 404 of a missing endpoint)."""
    ghost = "{00000000-0000-4000-8000-000000000000}"
    paths = [p for k, p in ws_paths(truth.workspace, truth.repos[0]["slug"], ghost).items()
             if k in ("5", "6-short", "6-long", "11")]
    paths += list(ws_paths("other-workspace", truth.repos[0]["slug"],
                           truth.users[0]["uuid"]).values())
    for path in paths:
        response = call(http, cloud_sim, path)
        assert response.status_code == 404, path
        assert response.headers["Content-Type"].startswith(JSON)
        assert response.json()["type"] == "error"


@pytest.mark.parametrize("endpoint", PAGED)
@pytest.mark.parametrize("name, value", [("pagelen", "501"), ("pagelen", "0"),
                                         ("page", "0"), ("page", "-1"), ("pagelen", "ten")])
def test_paging_parameters_out_of_range_are_invalid_requests(
        cloud_sim: Simulator, http: requests.Session, truth: Truth, endpoint: str, name: str,
        value: str) -> None:
    """pagelen outside 1..500 and page < 1: 400 Invalid Request naming the parameter."""
    response = call(http, cloud_sim, any_paths(truth)[endpoint], {name: value})
    error = assert_error(response, 400, "Invalid Request")
    assert name in error["detail"]


@pytest.mark.parametrize("endpoint, name, value", [
    ("1", "state", "closed"),
    ("2", "state", "bogus"),
    ("3", "date_type", "closed"),
    ("4", "since_date", "yesterday"),
    ("5", "until_date", "2026-13-01"),
    ("6-short", "date_type", "merged"),
    ("8", "order", "sideways"),
    ("9", "merges", "maybe"),
    ("9", "with_lines", "yes"),
    ("10", "merges", "all"),
    ("11", "since_date", "01/05/2026"),
])
def test_invalid_parameter_values_are_invalid_requests(
        cloud_sim: Simulator, http: requests.Session, truth: Truth, endpoint: str, name: str,
        value: str) -> None:
    """Values outside a parameter's rule: 400 Invalid Request whose detail names it."""
    error = assert_error(call(http, cloud_sim, any_paths(truth)[endpoint], {name: value}),
                         400, "Invalid Request")
    assert name in error["detail"]


def test_unencoded_plus_in_offset_is_a_400(
        cloud_sim: Simulator, http: requests.Session, truth: Truth) -> None:
    """A raw '+' arrives as a space (README's choice): 400, while %2B is accepted."""
    url = f"{cloud_sim.api_base}/workspace/{truth.workspace}/commits?since_date="
    headers = {"Accept": JSON, **cloud_sim.auth_headers}
    error = assert_error(http.get(url + "2026-05-01T10:00:00+02:00", headers=headers),
                         400, "Invalid Request")
    assert "since_date" in error["detail"]
    encoded = ok_json(http.get(url + quote("2026-05-01T10:00:00+02:00", safe=":"),
                               headers=headers))
    expected = expected_commits(truth, since="2026-05-01T10:00:00+02:00")
    assert {v["hash"] for v in encoded["values"]} == set(expected)


# --------------------------------------------------------------------------------------------
# host conditions (each on its own host)
# --------------------------------------------------------------------------------------------
def cloud_host(make_sim: Callable[..., Simulator]) -> tuple[Simulator, Truth]:
    sim = make_sim(edition="cloud")
    return sim, read_truth(sim)


def test_unlicensed_workspace_is_403_on_every_endpoint(
        make_sim: Callable[..., Simulator], http: requests.Session) -> None:
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


def test_loc_disabled_repository(make_sim: Callable[..., Simulator],
                                 http: requests.Session) -> None:
    """Indexing disabled: with_lines=true and changes-statistics fail; the plain list works."""
    sim, truth = cloud_host(make_sim)
    slug, other = truth.repos[0]["slug"], truth.repos[1]["slug"]
    sim.set_conditions(loc_disabled=[slug])
    paths = ws_paths(truth.workspace, slug, "")
    assert_error(call(http, sim, paths["9"], {"with_lines": "true"}), 400, LOC_MESSAGE)
    assert_error(call(http, sim, paths["10"]), 400, LOC_MESSAGE)
    assert_commits_equal(collect(http, sim, paths["9"], {}), expected_commits(truth, repo=slug))
    other_path = ws_paths(truth.workspace, other, "")["9"]
    assert_commits_equal(collect(http, sim, other_path, {"with_lines": "true"}),
                         expected_commits(truth, repo=other), lines=True)
    assert {r["slug"]: r["_sim"]["loc_disabled"] for r in sim.truth("repositories")}[slug]


def test_unindexed_changes_fail_then_succeed(make_sim: Callable[..., Simulator],
                                             http: requests.Session) -> None:
    """unindexed={slug: 2}: two answers on 9/10 say so, the third succeeds; others unaffected."""
    sim, truth = cloud_host(make_sim)
    slug, other = truth.repos[0]["slug"], truth.repos[1]["slug"]
    sim.set_conditions(unindexed={slug: 2})
    paths = ws_paths(truth.workspace, slug, "")
    ok_json(call(http, sim, ws_paths(truth.workspace, other, "")["9"]))
    assert_error(call(http, sim, paths["9"]), 409, UNINDEXED_MESSAGE)
    assert_error(call(http, sim, paths["10"]), 409, UNINDEXED_MESSAGE)
    assert_commits_equal(fetch(http, sim, paths["9"])["values"],
                         expected_commits(truth, repo=slug))
    assert fetch(http, sim, paths["10"])["commits"] == len(expected_commits(truth, repo=slug))


def test_forbidden_repository(make_sim: Callable[..., Simulator],
                              http: requests.Session) -> None:
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
    author = Counter(c["_sim"]["user"] for c in truth.commits
                     if c["repository"]["slug"] == slug and c["_sim"]["user"]).most_common(1)[0][0]
    mine = expected_commits(truth, user=author, merges="include")
    kept = expected_commits(truth, user=author, merges="include", hidden_repos=[slug])
    assert len(kept) < len(mine)
    served = collect(http, sim, f"/workspace/{truth.workspace}/users/{uuid_of[author]}/commits",
                     {"merges": "include"})
    assert_commits_equal(served, kept)


@pytest.mark.parametrize("version, present", [("5.1.0", False), ("4.9.9", False),
                                              ("5.2.0", True)])
def test_app_version_below_5_2_is_an_html_404(
        make_sim: Callable[..., Simulator], http: requests.Session, version: str,
        present: bool) -> None:
    """An older app has no API: every endpoint is an HTML 404; 5.2.0 answers normally."""
    sim, truth = cloud_host(make_sim)
    sim.set_conditions(app_version=version)
    for path in any_paths(truth).values():
        response = call(http, sim, path)
        if present:
            ok_json(response)
        else:
            assert_html(response, 404)


def test_proxy_login_is_an_html_200(make_sim: Callable[..., Simulator],
                                    http: requests.Session) -> None:
    """Behind a login proxy every endpoint answers 200 with an HTML page, not JSON."""
    sim, truth = cloud_host(make_sim)
    sim.set_conditions(proxy_login=True)
    for path in any_paths(truth).values():
        response = call(http, sim, path)
        assert_html(response, 200)
        assert "password" in response.text


def test_next_link_base_changes_link_origin(make_sim: Callable[..., Simulator],
                                            http: requests.Session) -> None:
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
def test_path_forms_condition(make_sim: Callable[..., Simulator], http: requests.Session,
                              form: str) -> None:
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
        make_sim: Callable[..., Simulator], http: requests.Session) -> None:
    """until_inclusive=True takes in the item dated exactly at until, even after a query."""
    sim, truth = cloud_host(make_sim)
    times = Counter(instant(c) for c in truth.commits)
    commit = next(c for c in truth.commits[len(truth.commits) // 2:] if times[instant(c)] == 1)
    path = f"/workspace/{truth.workspace}/commits"
    params = {"until_date": commit["_sim"]["instant"], "merges": "include"}
    assert commit["hash"] not in by_hash(collect(http, sim, path, params))
    sim.set_conditions(until_inclusive=True)
    assert commit["hash"] in by_hash(collect(http, sim, path, params))


# --------------------------------------------------------------------------------------------
# the request log
# --------------------------------------------------------------------------------------------
def test_request_log_records_endpoint_params_and_scheme(
        cloud_sim: Simulator, http: requests.Session, truth: Truth) -> None:
    """The log entry of a request names its endpoint, decoded path, params and auth scheme."""
    slug = next((r["slug"] for r in truth.repos if " " in r["slug"]), truth.repos[0]["slug"])
    path = f"/workspace/{truth.workspace}/repos/{slug}/commits"
    params = {"merges": "only", "pagelen": "3", "since_date": "2026-04-01T00:00:00+05:45"}
    before = cloud_sim.requests()["total"]
    ok_json(call(http, cloud_sim, path, params))
    call(http, cloud_sim, path, token=None)
    first, second = cloud_sim.requests(since=before)["log"]
    assert first["endpoint"] == "commits.list.repository"
    assert first["path"] == urlsplit(cloud_sim.api_base).path + path
    assert first["params"] == params
    assert (first["method"], first["status"], first["auth"]) == ("GET", 200, "token")
    assert first["accept"] == JSON
    assert (second["status"], second["auth"]) == (401, "none")
