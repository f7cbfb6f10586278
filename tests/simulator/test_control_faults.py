"""Faults, the simulated clock and the control surface /_sim/, over real HTTP on loopback.

Every test talks to a simulator through a socket: what a client sees (status, headers, body,
broken connections, elapsed time) is what is asserted, together with the host's own account
under /_sim/.
"""

from __future__ import annotations

import base64
import email.utils
import math
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import requests

from simulator import FaultSpecError, Simulator
from simulator.faults import FAULT_KINDS, parse_spec

MakeSim = Callable[..., Simulator]
EDITIONS = ("cloud", "server")
# The command installed beside the interpreter running the tests (whatever venv that is).
CLI = str(Path(sys.executable).with_name("repo-analytics"))
DAY_S = 86_400


# helpers --------------------------------------------------------------------------------------
def commits_url(sim: Simulator) -> str:
    """The global (cloud: workspace) commit list of either edition."""
    if sim.config.edition == "cloud":
        return f"{sim.api_base}/workspace/{sim.config.workspace}/commits"
    return f"{sim.api_base}/commits"


def prs_url(sim: Simulator) -> str:
    """The global (cloud: workspace) pull-request list of either edition."""
    if sim.config.edition == "cloud":
        return f"{sim.api_base}/workspace/{sim.config.workspace}/pull-requests"
    return f"{sim.api_base}/pull-requests"


def repo_url(sim: Simulator, slug: str, kind: str) -> str:
    """A repository-level list (`commits` or `pull-requests`) of either edition."""
    if sim.config.edition == "cloud":
        return f"{sim.api_base}/workspace/{sim.config.workspace}/repos/{slug}/{kind}"
    key = next(r["project"]["key"] for r in sim.truth("repositories") if r["slug"] == slug)
    return f"{sim.api_base}/projects/{key}/repos/{slug}/{kind}"


def page_params(sim: Simulator, number: int, size: int) -> dict[str, str]:
    """Paging parameters for page `number` (1-based) of `size` items."""
    if sim.config.edition == "cloud":
        return {"page": str(number), "pagelen": str(size)}
    return {"start": str((number - 1) * size), "limit": str(size)}


def date_params(
    sim: Simulator, since: int | None, until: int | None, updated: bool = False
) -> dict[str, str]:
    """Date bounds (epoch seconds) in the edition's parameter names, as explicit UTC offsets."""
    cloud = sim.config.edition == "cloud"
    names = (
        ("since_date", "until_date", "date_type")
        if cloud
        else ("sinceDate", "untilDate", "dateType")
    )
    params: dict[str, str] = {}
    for name, value in zip(names[:2], (since, until), strict=True):
        if value is not None:
            params[name] = datetime.fromtimestamp(value, UTC).isoformat()
    if updated:
        params[names[2]] = "updated"
    return params


def get(
    sim: Simulator, url: str, params: dict[str, str] | None = None, **kwargs: Any
) -> requests.Response:
    """An authenticated GET with the edition's default credentials."""
    kwargs.setdefault("headers", sim.auth_headers)
    return requests.get(url, params=params, timeout=10, **kwargs)


def items(sim: Simulator, response: requests.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text[:300]
    return response.json()["values"]


def key_of(sim: Simulator, item: dict[str, Any]) -> str:
    """A natural key of a commit or pull-request item of either edition."""
    if "hash" in item:
        return item["hash"]
    if "authorTimestamp" in item:
        return item["id"]
    if "destination" in item:
        return f"{item['destination']['repository']['slug']}#{item['id']}"
    return f"{item['toRef']['repository']['slug']}#{item['id']}"


def all_keys(sim: Simulator, url: str, params: dict[str, str]) -> set[str]:
    """Every item of a list, read in one page of the maximum size (tiny data fits)."""
    size = 500 if sim.config.edition == "cloud" else 1000
    page = items(sim, get(sim, url, {**params, **page_params(sim, 1, size)}))
    assert len(page) < size
    return {key_of(sim, item) for item in page}


def control(
    sim: Simulator, method: str, path: str, body: Any = None, **params: str
) -> requests.Response:
    """A call to the control surface, unauthenticated as documented."""
    return requests.request(
        method, f"{sim.base_url}/_sim/{path}", json=body, params=params, timeout=10
    )


def read_streamed(
    url: str, headers: dict[str, str]
) -> tuple[requests.Response, bytes, Exception | None]:
    """The response, the body bytes that arrived, and the error that ended reading (if any)."""
    response = requests.get(url, headers=headers, stream=True, timeout=10)
    received = bytearray()
    error: Exception | None = None
    try:
        for chunk in response.iter_content(64):
            received += chunk
    except (requests.exceptions.ChunkedEncodingError, requests.ConnectionError) as caught:
        error = caught
    return response, bytes(received), error


def commit_instant(sim: Simulator, truth_item: dict[str, Any]) -> int:
    """A truth commit's authored instant in epoch seconds."""
    text = (
        truth_item["_sim"]["instant"]
        if sim.config.edition == "cloud"
        else truth_item["authorTimestamp"]
    )
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


def truth_keys(sim: Simulator, kind: str) -> set[str]:
    return {key_of(sim, item) for item in sim.truth(kind)}


def error_message(edition: str, body: dict[str, Any]) -> str:
    """The message of an error body in the edition's own shape."""
    if edition == "cloud":
        return str(body["error"]["message"])
    return str(body["errors"][0]["message"])


# status faults --------------------------------------------------------------------------------
@pytest.mark.parametrize("edition", EDITIONS)
def test_429_carries_retry_after_in_seconds(make_sim: MakeSim, edition: str) -> None:
    """`429` answers 429 with Retry-After as whole seconds; clearing the plan restores 200."""
    sim = make_sim(edition=edition, faults="429=1,retry_after=3")
    response = get(sim, commits_url(sim))
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "3"
    assert response.headers["Content-Type"].startswith("application/json")
    assert error_message(edition, response.json()) == "Rate limit exceeded."
    sim.clear_faults()
    assert get(sim, commits_url(sim)).status_code == 200


@pytest.mark.parametrize("edition", EDITIONS)
def test_429date_carries_retry_after_as_http_date(make_sim: MakeSim, edition: str) -> None:
    """`429date` answers 429 with Retry-After as an HTTP date `retry_after` s ahead."""
    sim = make_sim(edition=edition, faults="429date=1,retry_after=5")
    response = get(sim, commits_url(sim))
    received = time.time()
    assert response.status_code == 429
    header = response.headers["Retry-After"]
    assert not header.isdigit()
    when = email.utils.parsedate_to_datetime(header)
    assert when.tzinfo is not None and header.endswith("GMT")
    ahead = when.timestamp() - received
    assert 4.5 <= ahead <= 6.0, (header, ahead)


@pytest.mark.parametrize("edition", EDITIONS)
@pytest.mark.parametrize(
    ("kind", "content_type"),
    [
        ("500", "application/json"),
        ("503", "application/json"),
        ("502", "text/html"),
        ("504", "text/html"),
    ],
)
def test_error_status_faults(make_sim: MakeSim, edition: str, kind: str, content_type: str) -> None:
    """500/503 answer JSON error bodies, 502/504 an HTML gateway page, with that status."""
    sim = make_sim(edition=edition, faults=f"{kind}=1")
    response = get(sim, prs_url(sim))
    assert response.status_code == int(kind)
    assert response.headers["Content-Type"].startswith(content_type)
    if content_type == "application/json":
        assert error_message(edition, response.json()) == "Internal server error"
    else:
        assert response.text.lstrip().lower().startswith("<html")
        assert kind in response.text
        with pytest.raises(ValueError):
            response.json()
    logged = sim.requests()["log"][-1]
    assert (logged["status"], logged["fault"]) == (int(kind), kind)


@pytest.mark.parametrize("edition", EDITIONS)
def test_error200_answers_the_error_body_with_200(make_sim: MakeSim, edition: str) -> None:
    """`error200` answers 200 with the edition's JSON error body, not data; `count` holds."""
    sim = make_sim(edition=edition, faults="error200=1,count=1")
    response = get(sim, prs_url(sim))
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    assert error_message(edition, response.json()) == "Internal server error"
    assert "values" not in response.json()
    if edition == "cloud":
        assert response.json()["type"] == "error"
    logged = sim.requests()["log"][-1]
    assert (logged["status"], logged["fault"]) == (200, "error200")
    assert "values" in get(sim, prs_url(sim)).json()


@pytest.mark.parametrize("edition", EDITIONS)
def test_reset_breaks_the_connection(make_sim: MakeSim, edition: str) -> None:
    """`reset` gives no response at all; the log records status 0 and the fault."""
    sim = make_sim(edition=edition, faults="reset=1")
    with pytest.raises(requests.ConnectionError):
        get(sim, commits_url(sim))
    logged = sim.requests()["log"]
    assert [(e["status"], e["fault"]) for e in logged] == [(0, "reset")]
    assert sim.requests()["by_endpoint"][logged[0]["endpoint"]] == {"0": 1}


@pytest.mark.parametrize("edition", EDITIONS)
def test_slow_delays_the_normal_answer(make_sim: MakeSim, edition: str) -> None:
    """`slow` answers exactly as without the fault, after `slow_seconds`."""
    sim = make_sim(edition=edition)
    params = page_params(sim, 1, 5)
    normal = get(sim, commits_url(sim), params)
    sim.set_faults("slow=1,slow_seconds=0.3")
    started = time.monotonic()
    slow = get(sim, commits_url(sim), params)
    elapsed = time.monotonic() - started
    assert elapsed >= 0.3
    assert slow.status_code == 200
    assert slow.content == normal.content


@pytest.mark.parametrize("edition", EDITIONS)
def test_latency_delays_every_api_answer_at_once(make_sim: MakeSim, edition: str) -> None:
    """`latency_ms` holds each API answer (errors too) as long, the same answer; answers to
    several connections are held side by side, not one after another (the simulator counts
    the requests open at once); the control surface answers at once. Only lower bounds of
    time and bounds of half the latency: a loaded machine slows every answer."""
    sim = make_sim(edition=edition)
    params = page_params(sim, 1, 5)
    normal = get(sim, commits_url(sim), params)
    assert control(sim, "POST", "conditions", {"latency_ms": 1000}).status_code == 200
    started = time.monotonic()
    delayed = get(sim, commits_url(sim), params)
    assert time.monotonic() - started >= 1.0
    assert delayed.status_code == 200 and delayed.content == normal.content
    started = time.monotonic()
    assert get(sim, commits_url(sim), headers={}).status_code == 401
    assert time.monotonic() - started >= 1.0
    sim.reset_requests()
    with ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(lambda _: get(sim, commits_url(sim), params).status_code, [0] * 4))
    assert statuses == [200] * 4
    assert sim.requests()["open_max"] == 4  # held side by side: one after another is 1
    started = time.monotonic()
    assert control(sim, "GET", "conditions").json()["latency_ms"] == 1000
    assert time.monotonic() - started < 0.5
    control(sim, "POST", "conditions", {"latency_ms": 0})
    started = time.monotonic()
    assert get(sim, commits_url(sim), params).content == normal.content
    assert time.monotonic() - started < 0.5


@pytest.mark.parametrize("edition", EDITIONS)
def test_truncate_cuts_a_json_page(make_sim: MakeSim, edition: str) -> None:
    """`truncate` sends the full Content-Length and only a prefix of the body."""
    sim = make_sim(edition=edition)
    url = commits_url(sim) + "?" + "&".join(f"{k}={v}" for k, v in page_params(sim, 1, 20).items())
    full = get(sim, url).content
    assert len(full) > 1000
    sim.set_faults("truncate=1")
    response, received, error = read_streamed(url, sim.auth_headers)
    assert response.status_code == 200
    assert int(response.headers["Content-Length"]) == len(full)
    assert error is not None or len(received) < int(response.headers["Content-Length"])
    assert len(received) < len(full)
    assert full.startswith(received)
    with pytest.raises((requests.exceptions.ChunkedEncodingError, requests.ConnectionError)):
        get(sim, url)  # a plain (non-streaming) read fails too


def test_truncate_cuts_a_chunked_csv_export(make_sim: MakeSim) -> None:
    """On a chunked CSV export `truncate` ends the stream early, part-way through the rows."""
    sim = make_sim(edition="server")
    url = f"{sim.api_base}/commits/export/csv"
    normal = get(sim, url)
    assert normal.headers["Content-Type"].startswith("text/csv")
    assert normal.headers.get("Transfer-Encoding") == "chunked"
    full = normal.content
    assert full.count(b"\r\n") > 10
    sim.set_faults("truncate=1,match=csv")
    response, received, error = read_streamed(url, sim.auth_headers)
    assert response.status_code == 200
    assert response.headers.get("Transfer-Encoding") == "chunked"
    assert error is not None
    assert len(received) < len(full)
    assert full.startswith(received)
    assert sim.requests()["log"][-1]["fault"] == "truncate"


@pytest.mark.parametrize("edition", EDITIONS)
def test_html_fault_answers_a_login_page(make_sim: MakeSim, edition: str) -> None:
    """`html` answers 200 with an HTML login page instead of JSON."""
    sim = make_sim(edition=edition, faults="html=1")
    response = get(sim, commits_url(sim))
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/html")
    assert "<form" in response.text and "password" in response.text
    with pytest.raises(ValueError):
        response.json()


# insert ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("edition", EDITIONS)
@pytest.mark.parametrize("kind", ["commits", "pull-requests"])
def test_insert_shifts_the_page_boundary(make_sim: MakeSim, edition: str, kind: str) -> None:
    """`insert` on page 2 adds one newest item: page 1's last item reappears on page 2."""
    sim = make_sim(edition=edition)
    url = commits_url(sim) if kind == "commits" else prs_url(sim)
    before = truth_keys(sim, kind)
    page1 = items(sim, get(sim, url, page_params(sim, 1, 10)))
    assert len(page1) == 10
    sim.set_faults("insert=1")
    page2 = items(sim, get(sim, url, page_params(sim, 2, 10)))
    sim.clear_faults()
    after = truth_keys(sim, kind)
    new = after - before
    assert len(after) == len(before) + 1 and len(new) == 1
    assert key_of(sim, page2[0]) == key_of(sim, page1[-1])
    again = items(sim, get(sim, url, page_params(sim, 1, 10)))
    assert key_of(sim, again[0]) == new.pop()
    assert [key_of(sim, i) for i in again[1:]] == [key_of(sim, i) for i in page1[:-1]]
    assert sim.requests()["log"][1]["fault"] == "insert"


@pytest.mark.parametrize("edition", EDITIONS)
def test_insert_stays_inside_the_requested_window(make_sim: MakeSim, edition: str) -> None:
    """The inserted commit is authored inside the requested since/until window."""
    sim = make_sim(edition=edition)
    now = sim.info()["now"]
    since, until = now - 20 * DAY_S, now - 10 * DAY_S
    params = date_params(sim, since, until)
    if edition == "cloud":
        params["merges"] = "include"
    before = all_keys(sim, commits_url(sim), params)
    assert len(before) > 20
    sim.set_faults("insert=1")
    page2 = items(sim, get(sim, commits_url(sim), {**params, **page_params(sim, 2, 10)}))
    sim.clear_faults()
    assert page2
    new = [
        c
        for c in sim.truth("commits")
        if key_of(sim, c) not in before and since <= commit_instant(sim, c) < until
    ]
    assert len(new) == 1
    assert all_keys(sim, commits_url(sim), params) == before | {key_of(sim, new[0])}


@pytest.mark.parametrize("edition", EDITIONS)
def test_insert_leaves_the_first_page_alone(make_sim: MakeSim, edition: str) -> None:
    """A first page never gets an inserted item: ground truth stays as it was."""
    sim = make_sim(edition=edition, faults="insert=1")
    before = truth_keys(sim, "commits")
    page1 = items(sim, get(sim, commits_url(sim), page_params(sim, 1, 10)))
    assert len(page1) == 10
    assert truth_keys(sim, "commits") == before


# first_page, empty_pages, same_page ------------------------------------------------------------
def envelope(page: dict[str, Any]) -> dict[str, Any]:
    """A page's envelope: every field but its items."""
    return {k: v for k, v in page.items() if k != "values"}


@pytest.mark.parametrize("edition", EDITIONS)
def test_first_page_serves_page_one_items_under_a_later_envelope(
    make_sim: MakeSim, edition: str
) -> None:
    """`first_page`: page 2 carries page 1's items under page 2's own envelope (status 200,
    the envelope moves on); a first page is left alone; `count` bounds it."""
    sim = make_sim(edition=edition)
    url = commits_url(sim)
    first, second = (get(sim, url, page_params(sim, n, 10)).json() for n in (1, 2))
    assert {key_of(sim, i) for i in first["values"]}.isdisjoint(
        key_of(sim, i) for i in second["values"]
    )
    sim.set_faults("first_page=1,count=1")
    assert get(sim, url, page_params(sim, 1, 10)).json() == first  # a first page: no draw
    faulted = get(sim, url, page_params(sim, 2, 10)).json()
    assert envelope(faulted) == envelope(second)
    assert [key_of(sim, i) for i in faulted["values"]] == [key_of(sim, i) for i in first["values"]]
    assert get(sim, url, page_params(sim, 2, 10)).json() == second  # count=1: spent
    assert [e["fault"] for e in sim.requests()["log"]][-3:] == [None, "first_page", None]


@pytest.mark.parametrize("edition", EDITIONS)
def test_empty_pages_never_end(make_sim: MakeSim, edition: str) -> None:
    """`empty_pages` with `path`: that repository's list answers empty pages that say more
    follow, page after page, the envelope moving on; another repository's list is whole."""
    sim = make_sim(edition=edition)
    slug, other = sorted(r["slug"] for r in sim.truth("repositories"))[:2]
    sim.set_faults({"rules": [{"kind": "empty_pages", "rate": 1, "path": f"/repos/{slug}/"}]})
    url, size = repo_url(sim, slug, "commits"), 10
    for number in range(1, 30):
        page = get(sim, url, page_params(sim, number, size)).json()
        assert page["values"] == []
        if edition == "cloud":
            assert page["page"] == number
            assert (
                page["next"].endswith(f"page={number + 1}") or f"page={number + 1}&" in page["next"]
            )
        else:
            assert page["isLastPage"] is False
            assert (page["start"], page["nextPageStart"]) == ((number - 1) * size, number * size)
    assert items(sim, get(sim, repo_url(sim, other, "commits"), page_params(sim, 1, size)))


@pytest.mark.parametrize("edition", EDITIONS)
def test_same_page_serves_one_page_for_every_path(make_sim: MakeSim, edition: str) -> None:
    """`same_page`: every repository's list, asked with the same query, answers the first
    repository's page; another query gets its own first answer."""
    sim = make_sim(edition=edition)
    slugs = sorted(r["slug"] for r in sim.truth("repositories"))
    own = {
        slug: items(sim, get(sim, repo_url(sim, slug, "commits"), page_params(sim, 1, 5)))
        for slug in slugs
    }
    sim.set_faults("same_page=1,match=commits.list.repository")
    served = [
        get(sim, repo_url(sim, slug, "commits"), page_params(sim, 1, 5)).json()["values"]
        for slug in slugs
    ]
    assert all(page == own[slugs[0]] for page in served)
    assert {i["repository"]["slug"] for i in served[-1]} == {slugs[0]}
    other = get(sim, repo_url(sim, slugs[1], "commits"), page_params(sim, 1, 3)).json()
    assert [key_of(sim, i) for i in other["values"]] == [key_of(sim, i) for i in own[slugs[1]][:3]]


# count, match, /_sim/ -------------------------------------------------------------------------
def test_count_limits_how_often_a_rule_fires(make_sim: MakeSim) -> None:
    """`count=2` fires twice, then requests pass; /_sim/faults reports `fired`."""
    sim = make_sim(edition="server", faults="503=1,count=2")
    statuses = [get(sim, commits_url(sim), page_params(sim, 1, 1)).status_code for _ in range(5)]
    assert statuses == [503, 503, 200, 200, 200]
    plan = control(sim, "GET", "faults").json()
    assert [(r["kind"], r["count"], r["fired"]) for r in plan["rules"]] == [("503", 2, 2)]


@pytest.mark.parametrize("edition", EDITIONS)
def test_match_restricts_a_rule_to_endpoints(make_sim: MakeSim, edition: str) -> None:
    """`match` is a substring of the endpoint name: other endpoints are left alone."""
    sim = make_sim(edition=edition, faults="503=1,match=pull-requests")
    assert get(sim, commits_url(sim)).status_code == 200
    assert get(sim, prs_url(sim)).status_code == 503
    by_endpoint = sim.requests()["by_endpoint"]
    assert by_endpoint[
        "commits.list.global" if edition == "server" else "commits.list.workspace"
    ] == {"200": 1}
    assert by_endpoint[
        "pull-requests.list.global" if edition == "server" else "pull-requests.list.workspace"
    ] == {"503": 1}


def test_json_form_sets_options_per_rule(make_sim: MakeSim) -> None:
    """The JSON form gives each rule its own match, count and retry_after."""
    sim = make_sim(edition="server")
    plan = {
        "seed": 3,
        "rules": [
            {"kind": "503", "rate": 1, "count": 1, "match": "commits.list"},
            {"kind": "429", "rate": 1, "match": "pull-requests", "retry_after": 7},
        ],
    }
    assert control(sim, "POST", "faults", plan).status_code == 200
    commits = [get(sim, commits_url(sim)).status_code for _ in range(3)]
    prs = [get(sim, prs_url(sim)) for _ in range(2)]
    assert commits == [503, 200, 200]
    assert [(r.status_code, r.headers["Retry-After"]) for r in prs] == [(429, "7")] * 2


@pytest.mark.parametrize("edition", EDITIONS)
def test_control_paths_are_never_faulted(make_sim: MakeSim, edition: str) -> None:
    """With every API request failing, every /_sim/ endpoint still answers, unlogged."""
    sim = make_sim(edition=edition, faults="reset=1,503=1")
    for method, path in [
        ("GET", "info"),
        ("GET", "truth/commits"),
        ("GET", "faults"),
        ("GET", "conditions"),
        ("GET", "requests"),
        ("POST", "conditions"),
    ]:
        response = control(sim, method, path, {} if method == "POST" else None)
        assert response.status_code == 200, path
        assert response.headers["Content-Type"].startswith("application/json")
        response.json()
    assert control(sim, "POST", "advance", {"hours": 1}).status_code == 200
    assert sim.requests()["total"] == 0
    with pytest.raises(requests.ConnectionError):
        get(sim, commits_url(sim))
    assert [e["path"].startswith("/_sim") for e in sim.requests()["log"]] == [False]


# rates and determinism ------------------------------------------------------------------------
def outcomes(sim: Simulator, n: int, between: Callable[[], object] | None = None) -> list[int]:
    """Statuses of `n` identical small list requests on one keep-alive session."""
    with requests.Session() as session:
        session.headers.update(sim.auth_headers)
        url = commits_url(sim)
        found = []
        for _ in range(n):
            found.append(session.get(url, params=page_params(sim, 1, 1), timeout=10).status_code)
            if between is not None:
                between()
        return found


def test_rate_matches_the_observed_fraction(make_sim: MakeSim) -> None:
    """503=0.2 over 500 requests fails about a fifth of them; the counts agree."""
    sim = make_sim(edition="server", faults="503=0.2,seed=5")
    statuses = outcomes(sim, 500)
    failed = statuses.count(503)
    assert failed + statuses.count(200) == 500
    tolerance = 4 * math.sqrt(0.2 * 0.8 / 500)  # four binomial standard deviations
    assert abs(failed / 500 - 0.2) <= tolerance, failed
    assert sim.requests()["by_endpoint"]["commits.list.global"] == {
        "200": 500 - failed,
        "503": failed,
    }


@pytest.mark.parametrize("edition", EDITIONS)
def test_same_seed_same_outcomes(make_sim: MakeSim, edition: str) -> None:
    """The same seed replays the same outcomes on a fresh host; control calls draw nothing."""
    spec = "503=0.3,429=0.2,seed=11"
    first = outcomes(make_sim(edition=edition, faults=spec), 60)
    other = make_sim(edition=edition, faults=spec)
    second = outcomes(other, 60, between=lambda: control(other, "GET", "info"))
    assert first == second
    assert {200, 429, 503} <= set(first)
    reseeded = outcomes(make_sim(edition=edition, faults="503=0.3,429=0.2,seed=12"), 60)
    assert reseeded != first
    logged = [e["fault"] for e in other.requests()["log"]]
    assert logged == [{200: None, 429: "429", 503: "503"}[s] for s in first]


# fault spec errors ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ("foo=0.1", ["foo", "429date", "truncate", "insert"]),
        ("503=1.5", ["1.5", "503", "[0, 1]"]),
        ("503=-0.1", ["-0.1", "[0, 1]"]),
        ("503=abc", ["abc", "503"]),
        ("503", ["503", "NAME=VALUE"]),
        ("seed=abc,503=0.1", ["seed=abc", "integer"]),
        ("503=1,count=x", ["count=x", "integer"]),
        ("slow=1,slow_seconds=-2", ["slow_seconds=-2", ">= 0"]),
    ],
)
def test_bad_spec_is_named(spec: str, named: list[str]) -> None:
    """A bad spec raises FaultSpecError naming the bad value and what is valid."""
    with pytest.raises(FaultSpecError) as caught:
        parse_spec(spec)
    for part in named:
        assert part in str(caught.value), (spec, str(caught.value))


@pytest.mark.parametrize(
    ("plan", "named"),
    [
        ({"rules": [{"kind": "boom"}]}, ["boom", "503", "429date"]),
        ({"rules": [{"kind": "503", "rate": 2}]}, ["2", "[0, 1]"]),
        ({"rules": [{"kind": "503", "often": 1}]}, ["often", "match"]),
        ({"rules": [{"rate": 1}]}, ["kind", "reset"]),
    ],
)
def test_bad_json_plan_is_named(make_sim: MakeSim, plan: dict[str, Any], named: list[str]) -> None:
    """The JSON form is checked alike; a rejected plan leaves the active one in place."""
    sim = make_sim(edition="cloud", faults="503=1")
    with pytest.raises(FaultSpecError) as caught:
        sim.set_faults(plan)
    for part in named:
        assert part in str(caught.value)
    assert get(sim, commits_url(sim)).status_code == 503


def test_good_spec_is_read_in_full() -> None:
    """The README's example spec: three rules sharing seed, retry_after and match."""
    seed, rules = parse_spec("429=0.1,503=0.05,reset=0.02,seed=7,retry_after=2,match=commits")
    assert seed == 7
    assert [(r.kind, r.rate, r.retry_after, r.match, r.count) for r in rules] == [
        ("429", 0.1, 2.0, "commits", None),
        ("503", 0.05, 2.0, "commits", None),
        ("reset", 0.02, 2.0, "commits", None),
    ]
    assert set(FAULT_KINDS) == {
        "429",
        "429date",
        "500",
        "502",
        "503",
        "504",
        "error200",
        "reset",
        "slow",
        "truncate",
        "html",
        "insert",
        "repeat",
        "first_page",
        "empty_pages",
        "same_page",
    }


def test_faults_over_http(make_sim: MakeSim) -> None:
    """POST /_sim/faults sets a plan, a bad spec is a 400 JSON error, DELETE clears."""
    sim = make_sim(edition="server")
    good = control(sim, "POST", "faults", {"spec": "503=0.5,seed=9,count=4"})
    assert good.status_code == 200
    assert good.json()["seed"] == 9
    assert [(r["kind"], r["rate"], r["count"]) for r in good.json()["rules"]] == [("503", 0.5, 4)]
    for body, bad_value in [
        ({"spec": "503=7"}, "7"),
        ({"spec": "nope=1"}, "nope"),
        ({"spec": "503=1,retry_after=soon"}, "soon"),
    ]:
        bad = control(sim, "POST", "faults", body)
        assert bad.status_code == 400
        assert bad.headers["Content-Type"].startswith("application/json")
        assert bad_value in bad.json()["error"]
    assert control(sim, "GET", "faults").json() == good.json()  # the bad ones changed nothing
    cleared = control(sim, "DELETE", "faults")
    assert cleared.status_code == 200 and cleared.json()["rules"] == []
    not_json = requests.post(f"{sim.base_url}/_sim/faults", data=b"503=1", timeout=10)
    assert not_json.status_code == 400 and "error" in not_json.json()


# the clock ------------------------------------------------------------------------------------
@pytest.mark.parametrize("edition", EDITIONS)
def test_advance_moves_the_clock(make_sim: MakeSim, edition: str) -> None:
    """advance in-process and POST /_sim/advance move `now` by exactly the duration."""
    sim = make_sim(edition=edition)
    start = sim.info()["now"]
    answer = sim.advance(days=1)
    assert (answer["from"], answer["to"]) == (start, start + DAY_S)
    assert sim.info()["now"] == start + DAY_S
    over_http = control(sim, "POST", "advance", {"hours": 6, "minutes": 30})
    assert over_http.status_code == 200
    assert over_http.json()["to"] == start + DAY_S + 6 * 3600 + 1800
    assert control(sim, "GET", "info").json()["now"] == start + DAY_S + 6 * 3600 + 1800
    assert over_http.json()["new_users"] == [] and over_http.json()["new_repositories"] == []
    for bad in [{}, {"days": 0}, {"seconds": -5}, {"days": "soon"}]:
        refused = control(sim, "POST", "advance", bad)
        assert refused.status_code == 400 and "error" in refused.json()
    assert sim.info()["now"] == start + DAY_S + 6 * 3600 + 1800


@pytest.mark.parametrize("edition", EDITIONS)
def test_late_commits_appear_in_the_past(make_sim: MakeSim, edition: str) -> None:
    """Late commits are authored before the old clock and appear there only after the advance."""
    sim = make_sim(edition=edition)
    old = sim.info()["now"]
    params = date_params(sim, old - 4 * DAY_S, old)
    if edition == "cloud":
        params["merges"] = "include"
    listed_before = all_keys(sim, commits_url(sim), params)
    truth_before = truth_keys(sim, "commits")
    answer = control(sim, "POST", "advance", {"days": 1}).json()
    late = answer["late_commits"]
    assert len(late) >= 2
    assert not set(late) & (listed_before | truth_before)
    truth_after = {key_of(sim, c): c for c in sim.truth("commits")}
    for sha in late:
        assert old - 3 * DAY_S <= commit_instant(sim, truth_after[sha]) < old
        pushed = datetime.fromisoformat(truth_after[sha]["_sim"]["pushed"].replace("Z", "+00:00"))
        assert old < pushed.timestamp() <= old + DAY_S
    assert all_keys(sim, commits_url(sim), params) == listed_before | set(late)
    assert answer["new_commits"] >= 1
    assert len(truth_after) >= len(truth_before) + answer["new_commits"] + len(late)


def updated_ms(item: dict[str, Any]) -> int:
    """A pull-request item's updated date in epoch milliseconds, either edition."""
    if "updatedDate" in item:
        return int(item["updatedDate"])
    return round(
        datetime.fromisoformat(item["updated_date"].replace("Z", "+00:00")).timestamp() * 1000
    )


@pytest.mark.parametrize("edition", EDITIONS)
def test_pull_requests_change_state_and_updated_date(make_sim: MakeSim, edition: str) -> None:
    """Changed pull requests show their new state and an updated date after the old clock."""
    sim = make_sim(edition=edition)
    old = sim.info()["now"]
    open_before = {key_of(sim, p) for p in sim.truth("pull-requests") if p["state"] == "OPEN"}
    answer = sim.advance(days=1)
    changes = answer["pull_request_changes"]
    assert changes
    states = {"OPEN", "MERGED", "DECLINED"} | ({"SUPERSEDED"} if edition == "cloud" else set())
    for repo, number, state in changes:
        assert f"{repo}#{number}" in open_before
        assert state in states - {"OPEN"}
        listed = items(
            sim,
            get(
                sim, repo_url(sim, repo, "pull-requests"), date_params(sim, old, None, updated=True)
            ),
        )
        found = [p for p in listed if p["id"] == number]
        assert len(found) == 1, (repo, number)
        item = found[0]
        assert item["state"] == state and item["closed"] is True
        if edition == "cloud":
            updated = datetime.fromisoformat(item["updated_date"].replace("Z", "+00:00"))
            assert old < updated.timestamp() <= old + DAY_S
            assert item["closed_date"] == item["updated_date"]
        else:
            assert old * 1000 < item["updatedDate"] <= (old + DAY_S) * 1000
            assert item["open"] is False
    # others only got a comment: still open, created before the old clock, updated after it
    changed = {f"{r}#{n}" for r, n, _ in changes}
    commented = [
        p
        for p in sim.truth("pull-requests")
        if key_of(sim, p) in open_before - changed
        and p["state"] == "OPEN"
        and updated_ms(p) > old * 1000
    ]
    assert 1 <= len(commented) <= 3
    # created-date queries of the same window do not list them: they were created before
    created = items(sim, get(sim, prs_url(sim), date_params(sim, old, None)))
    assert not {f"{r}#{n}" for r, n, _ in changes} & {key_of(sim, p) for p in created}


def test_late_commit_single_lookup_follows_the_clock(make_sim: MakeSim) -> None:
    """A late commit's own address answers 404 before the advance that pushes it, 200 after."""
    twin = make_sim(edition="server", seed=6)
    sim = make_sim(edition="server", seed=6)
    late = twin.advance(days=1)["late_commits"]
    repos = {c["id"]: c["repository"] for c in twin.truth("commits")}
    urls = [
        f"{sim.api_base}/projects/{repos[sha]['project']['key']}/repos/"
        f"{repos[sha]['slug']}/commits/{sha}"
        for sha in late
    ]
    assert [get(sim, url).status_code for url in urls] == [404] * len(late)
    assert sim.advance(days=1)["late_commits"] == late
    answers = [get(sim, url) for url in urls]
    assert [(r.status_code, r.json()["id"]) for r in answers] == [(200, sha) for sha in late]


@pytest.mark.parametrize("edition", EDITIONS)
def test_advance_of_a_day_adds_a_user_and_a_repository(make_sim: MakeSim, edition: str) -> None:
    """A day's advance creates a user with a commit and a repository with three commits."""
    sim = make_sim(edition=edition)
    answer = sim.advance(days=1)
    [slug] = answer["new_users"]
    [repo] = answer["new_repositories"]
    users = {u["_sim"]["slug"] if edition == "cloud" else u["slug"]: u for u in sim.truth("users")}
    assert slug in users
    assert repo in {r["slug"] for r in sim.truth("repositories")}
    assert (
        len(
            items(
                sim,
                get(
                    sim,
                    repo_url(sim, repo, "commits"),
                    {"merges": "include"} if edition == "cloud" else None,
                ),
            )
        )
        == 3
    )
    if edition == "cloud":
        workspace = f"{sim.api_base}/workspace/{sim.config.workspace}"
        uuid = users[slug]["uuid"]
        assert uuid in {u["uuid"] for u in get(sim, f"{workspace}/users").json()["values"]}
        user_commits = get(sim, f"{workspace}/users/{uuid}/commits")
    else:
        user_commits = get(sim, f"{sim.api_base}/users/{slug}/commits")
    assert len(items(sim, user_commits)) == 1


def test_new_repository_was_unknown_before(make_sim: MakeSim) -> None:
    """The repository an advance creates answers 404 before it and 200 after (cloud)."""
    twin = make_sim(edition="cloud", seed=4)
    sim = make_sim(edition="cloud", seed=4)
    [repo] = twin.advance(days=1)["new_repositories"]
    assert get(sim, repo_url(sim, repo, "commits")).status_code == 404
    sim.advance(days=1)
    assert get(sim, repo_url(sim, repo, "commits")).status_code == 200


def normalised_truth(sim: Simulator) -> dict[str, str]:
    """Every truth kind as JSON text, with the host's own base URL taken out."""
    kinds = ["commits", "pull-requests", "users", "repositories"]
    if sim.config.edition == "server":
        kinds.append("projects")
    return {
        kind: requests.get(f"{sim.base_url}/_sim/truth/{kind}", timeout=10).text.replace(
            sim.base_url, "BASE"
        )
        for kind in kinds
    }


@pytest.mark.parametrize("edition", EDITIONS)
def test_advances_are_deterministic(make_sim: MakeSim, edition: str) -> None:
    """Two hosts of one seed and clock advanced alike (in-process or over HTTP) agree."""
    one = make_sim(edition=edition, seed=3)
    two = make_sim(edition=edition, seed=3)
    initial = normalised_truth(one)
    answers_one = [one.advance(days=1), one.advance(hours=5)]
    answers_two = [
        control(two, "POST", "advance", {"days": 1}).json(),
        control(two, "POST", "advance", {"seconds": 5 * 3600}).json(),
    ]
    assert answers_one == answers_two
    assert one.info()["now"] == two.info()["now"]
    after = normalised_truth(one)
    assert after == normalised_truth(two)
    assert all(after[kind] != initial[kind] for kind in ("commits", "pull-requests", "users"))
    other = make_sim(edition=edition, seed=4)
    assert other.advance(days=1) != answers_one[0]


# request log ----------------------------------------------------------------------------------
def test_request_counts_by_endpoint_and_status(make_sim: MakeSim) -> None:
    """Counts are kept per endpoint and status; entries carry method, path, params, auth."""
    sim = make_sim(edition="server")
    for _ in range(3):
        get(sim, commits_url(sim), {"limit": "2"})
    assert get(sim, commits_url(sim), {"limit": "0"}).status_code == 400
    assert requests.get(commits_url(sim), timeout=10).status_code == 401
    assert get(sim, prs_url(sim), auth=sim.basic_auth, headers={}).status_code == 200
    assert get(sim, f"{sim.api_base}/nothing/here").status_code == 404
    described = control(sim, "GET", "requests").json()
    assert described["by_endpoint"] == {
        "commits.list.global": {"200": 3, "400": 1, "401": 1},
        "pull-requests.list.global": {"200": 1},
        "unknown": {"404": 1},
    }
    assert described["total"] == 7
    log = described["log"]
    assert [e["n"] for e in log] == list(range(1, 8))
    assert [e["auth"] for e in log] == ["bearer"] * 4 + ["none", "basic", "bearer"]
    assert [e["status"] for e in log] == [200, 200, 200, 400, 401, 200, 404]
    assert log[0]["method"] == "GET"
    assert log[0]["path"] == "/rest/analytics-api/latest/commits"
    assert log[0]["params"] == {"limit": "2"} and log[0]["fault"] is None


def test_request_log_since_and_reset(make_sim: MakeSim) -> None:
    """`since=N` lists entries after N; DELETE empties counts and log, numbering goes on."""
    sim = make_sim(edition="cloud")
    for number in range(1, 6):
        get(sim, commits_url(sim), {"pagelen": str(number)})
    later = control(sim, "GET", "requests", since="3").json()["log"]
    assert [(e["n"], e["params"]["pagelen"]) for e in later] == [(4, "4"), (5, "5")]
    assert control(sim, "GET", "requests", since="5").json()["log"] == []
    assert len(sim.requests(since=1)["log"]) == 4
    reset = control(sim, "DELETE", "requests")
    assert reset.status_code == 200
    assert reset.json()["by_endpoint"] == {} and reset.json()["log"] == []
    get(sim, commits_url(sim))
    fresh = control(sim, "GET", "requests").json()
    assert fresh["by_endpoint"] == {"commits.list.workspace": {"200": 1}}
    assert [e["n"] for e in fresh["log"]] == [6]  # `since` cursors stay valid across a reset


def test_server_secrets_never_logged(make_sim: MakeSim) -> None:
    """Basic and Bearer requests log only the scheme: no password, token or encoded pair."""
    sim = make_sim(edition="server", password="pw-Zq81x", server_token="tok-Wv42y")
    assert get(sim, commits_url(sim), auth=sim.basic_auth, headers={}).status_code == 200
    assert get(sim, commits_url(sim)).status_code == 200
    assert get(sim, commits_url(sim), auth=("analyst", "wrong-Pw93"), headers={}).status_code == 401
    text = control(sim, "GET", "requests").text
    assert [e["auth"] for e in control(sim, "GET", "requests").json()["log"]] == [
        "basic",
        "bearer",
        "basic",
    ]
    encoded = base64.b64encode(b"analyst:pw-Zq81x").decode()
    for secret in ("pw-Zq81x", "tok-Wv42y", "wrong-Pw93", encoded, encoded[:12]):
        assert secret not in text


def test_cloud_token_never_logged(make_sim: MakeSim) -> None:
    """A raw cloud token is logged as scheme `token`, even one holding a space."""
    sim = make_sim(edition="cloud", token="Kq7 Xv9pL2")
    assert get(sim, commits_url(sim)).status_code == 200
    assert (
        get(sim, commits_url(sim), headers={"Authorization": "sim-cloud-token"}).status_code == 401
    )
    log = sim.requests()["log"]
    assert [e["auth"] for e in log] == ["token", "token"]
    text = control(sim, "GET", "requests").text
    for secret in ("Kq7", "Xv9pL2", "sim-cloud-token"):
        assert secret.lower() not in text.lower()


# conditions -----------------------------------------------------------------------------------
def test_server_conditions_over_http(make_sim: MakeSim) -> None:
    """licensed, proxy_login and app_version change what the API answers."""
    sim = make_sim(edition="server")
    url = commits_url(sim)
    changed = control(sim, "POST", "conditions", {"licensed": False})
    assert changed.status_code == 200 and changed.json()["licensed"] is False
    unlicensed = get(sim, url)
    assert unlicensed.status_code == 402
    error = unlicensed.json()["errors"][0]
    assert "license" in error["message"] and error["exceptionName"] is None
    control(sim, "POST", "conditions", {"licensed": True, "proxy_login": True})
    login = get(sim, url)
    assert login.status_code == 200 and login.headers["Content-Type"].startswith("text/html")
    control(sim, "POST", "conditions", {"proxy_login": False, "app_version": "5.1.9"})
    old_app = get(sim, url)
    assert old_app.status_code == 404 and old_app.headers["Content-Type"].startswith("text/html")
    control(sim, "POST", "conditions", {"app_version": "5.2.0"})
    assert get(sim, url).status_code == 200
    assert control(sim, "GET", "conditions").json()["app_version"] == "5.2.0"


def test_cloud_licence_condition_over_http(make_sim: MakeSim) -> None:
    """An unlicensed cloud workspace answers 403 with the licence message."""
    sim = make_sim(edition="cloud")
    assert control(sim, "POST", "conditions", {"licensed": False}).status_code == 200
    response = get(sim, commits_url(sim))
    assert response.status_code == 403
    message = response.json()["error"]["message"]
    assert "license" in message and "plan details" in message


@pytest.mark.parametrize(
    "body",
    [
        {"no_such_condition": True},
        {"licensed": False, "no_such_condition": True},
        {"licensed": "no"},
        {"app_version": 5},
        {"path_forms": "sideways"},
        {"latency_ms": -1},
        {"latency_ms": "50"},
    ],
)
def test_bad_conditions_are_refused_whole(make_sim: MakeSim, body: dict[str, Any]) -> None:
    """An unknown field or unusable value is a 400, and nothing of the body is applied."""
    sim = make_sim(edition="cloud")
    before = control(sim, "GET", "conditions").json()
    refused = control(sim, "POST", "conditions", body)
    assert refused.status_code == 400
    assert refused.headers["Content-Type"].startswith("application/json")
    assert next(iter(body.keys() - {"licensed"}), "licensed") in refused.json()["error"]
    assert control(sim, "GET", "conditions").json() == before
    assert get(sim, commits_url(sim)).status_code == 200


# the CLI --------------------------------------------------------------------------------------
class CliHost:
    """A `repo-analytics sim` subprocess and the fields of its first output line."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [CLI, "sim", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(
            target=lambda: lines.put(self.process.stdout.readline()),  # type: ignore[union-attr]
            daemon=True,
        ).start()
        try:
            self.banner = lines.get(timeout=20)
        except queue.Empty:
            self.stop()
            raise AssertionError("no first line within 20 s") from None
        self.fields = dict(re.findall(r"(\w+)=(\S+)", self.banner))

    def terminate(self) -> int:
        """SIGTERM, then the exit code (within a few seconds)."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=5)

    def stop(self) -> None:
        """Kill the process if it still runs; close its pipes."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=5)
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def cli_hosts() -> Iterator[Callable[..., CliHost]]:
    """Start CLI simulators; any still running after the test is killed."""
    started: list[CliHost] = []

    def start(*args: str) -> CliHost:
        host = CliHost(*args)
        started.append(host)
        return host

    yield start
    for host in started:
        host.stop()


def test_cli_server_serves_until_sigterm(cli_hosts: Callable[..., CliHost]) -> None:
    """The first line names edition, API URL, projects and credentials that then work."""
    host = cli_hosts("--edition", "server", "--size", "tiny", "--port", "0")
    assert host.banner.startswith("repo-analytics simulator: edition=server ")
    fields = host.fields
    url = fields["url"]
    assert re.fullmatch(r"http://127\.0\.0\.1:[1-9]\d*/rest/analytics-api/latest", url)
    assert fields["projects"] == "CORE,PLAT"
    assert (fields["user"], fields["password"], fields["bearer"]) == (
        "analyst",
        "analyst-pass",
        "sim-server-token",
    )
    assert fields["control"] == url.removesuffix("/rest/analytics-api/latest") + "/_sim/"
    basic = requests.get(f"{url}/commits", auth=(fields["user"], fields["password"]), timeout=10)
    assert basic.status_code == 200 and basic.json()["values"]
    bearer = requests.get(
        f"{url}/projects/CORE/commits",
        timeout=10,
        headers={"Authorization": f"Bearer {fields['bearer']}"},
    )
    assert bearer.status_code == 200
    info = requests.get(fields["control"] + "info", timeout=10).json()
    assert (info["edition"], info["projects"], info["api_base_url"]) == (
        "server",
        ["CORE", "PLAT"],
        url,
    )
    assert host.terminate() == 0


def test_cli_cloud_serves_until_sigterm(cli_hosts: Callable[..., CliHost]) -> None:
    """The cloud first line names the workspace and token, which then work."""
    host = cli_hosts("--edition", "cloud", "--size", "tiny", "--port", "0")
    fields = host.fields
    assert fields["edition"] == "cloud"
    assert re.fullmatch(r"http://127\.0\.0\.1:[1-9]\d*/rest/latest", fields["url"])
    assert (fields["workspace"], fields["token"]) == ("sim-workspace", "sim-cloud-token")
    response = requests.get(
        f"{fields['url']}/workspace/{fields['workspace']}/commits",
        headers={"Authorization": fields["token"]},
        params={"pagelen": "3"},
        timeout=10,
    )
    assert response.status_code == 200 and len(response.json()["values"]) == 3
    assert host.terminate() == 0


@pytest.mark.parametrize(
    ("spec", "named"), [("503=2", "503"), ("bogus=0.1", "bogus"), ("seed=abc", "abc")]
)
def test_cli_bad_faults_exit_2(spec: str, named: str) -> None:
    """A bad --faults value: exit code 2, one line on stderr naming it, no traceback."""
    done = subprocess.run(
        [CLI, "sim", "--edition", "server", "--size", "tiny", "--faults", spec],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert lines[0].startswith("repo-analytics sim: error:") and named in lines[0]


def test_cli_faults_flag_is_applied(cli_hosts: Callable[..., CliHost]) -> None:
    """A good --faults value is active from the first request."""
    host = cli_hosts("--edition", "server", "--size", "tiny", "--faults", "503=1,count=1")
    auth = (host.fields["user"], host.fields["password"])
    statuses = [
        requests.get(f"{host.fields['url']}/commits", auth=auth, timeout=10).status_code
        for _ in range(2)
    ]
    assert statuses == [503, 200]
    assert host.terminate() == 0


def test_cli_latency_flag_is_applied(cli_hosts: Callable[..., CliHost]) -> None:
    """`--latency-ms` holds every API answer from the first request on."""
    host = cli_hosts("--edition", "server", "--size", "tiny", "--latency-ms", "300")
    auth = (host.fields["user"], host.fields["password"])
    started = time.monotonic()
    assert requests.get(f"{host.fields['url']}/commits", auth=auth, timeout=10).ok
    assert time.monotonic() - started >= 0.3
    assert host.terminate() == 0


@pytest.mark.parametrize("value", ["-1", "nan", "60001"])
def test_cli_bad_latency_exits_2(value: str) -> None:
    """A latency out of range: exit code 2, one line naming it and the valid range."""
    done = subprocess.run(
        [CLI, "sim", "--size", "tiny", "--latency-ms", value],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "--latency-ms" in done.stderr and "0 to 60000" in done.stderr


def test_cli_custom_cloud_token(cli_hosts: Callable[..., CliHost]) -> None:
    """--token replaces the default cloud token, in the first line and at the door."""
    host = cli_hosts(
        "--edition", "cloud", "--size", "tiny", "--token", "cli-Tok-55", "--workspace", "team-ws"
    )
    assert (host.fields["token"], host.fields["workspace"]) == ("cli-Tok-55", "team-ws")
    url = f"{host.fields['url']}/workspace/team-ws/commits"
    assert requests.get(url, headers={"Authorization": "cli-Tok-55"}, timeout=10).status_code == 200
    assert (
        requests.get(url, headers={"Authorization": "sim-cloud-token"}, timeout=10).status_code
        == 401
    )
    assert host.terminate() == 0


def test_cli_custom_server_credentials(cli_hosts: Callable[..., CliHost]) -> None:
    """--username/--password/--server-token replace the default self-hosted sign-in."""
    host = cli_hosts(
        "--edition",
        "server",
        "--size",
        "tiny",
        "--username",
        "alice",
        "--password",
        "wonder-7",
        "--server-token",
        "tok-alice",
    )
    fields = host.fields
    assert (fields["user"], fields["password"], fields["bearer"]) == (
        "alice",
        "wonder-7",
        "tok-alice",
    )
    url = f"{fields['url']}/commits"
    assert requests.get(url, auth=("alice", "wonder-7"), timeout=10).status_code == 200
    assert (
        requests.get(url, headers={"Authorization": "Bearer tok-alice"}, timeout=10).status_code
        == 200
    )
    assert requests.get(url, auth=("analyst", "analyst-pass"), timeout=10).status_code == 401
    assert (
        requests.get(
            url, headers={"Authorization": "Bearer sim-server-token"}, timeout=10
        ).status_code
        == 401
    )
    assert host.terminate() == 0


def test_clock_default_is_the_current_hour(make_sim: MakeSim) -> None:
    """Without --now the clock is the wall clock rounded down to the hour."""
    before = time.time()
    sim = make_sim(edition="server", now=None)
    now = sim.info()["now"]
    assert now % 3600 == 0
    assert int(before) // 3600 * 3600 <= now <= time.time()
