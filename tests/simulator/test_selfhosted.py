"""Self-hosted edition conformance: the spec's 25 endpoints over real HTTP, values from truth.

Every expectation is computed from the simulator's ground truth (`sim.truth(...)`,
`sim.info()`), never from the API under test; the README's "Choices where the spec is silent"
fix what the spec leaves open (CSV header, `nextPageStart` absent on the last page, ...).
"""

from __future__ import annotations

import csv
import io
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote

import pytest
import requests

from simulator import SimConfig, Simulator
from tests.conftest import FIXED_NOW

Item = dict[str, Any]
Key = str | tuple[str, int]

AUTH = ("analyst", "analyst-pass")
BEARER = {"Authorization": "Bearer sim-server-token"}
RESTRICTED = ("restricted", "restricted-pass")
RESTRICTED_BEARER = {"Authorization": "Bearer sim-restricted-token"}
KINDS = ("commits", "pull-requests")
LEVELS = ("global", "project", "repository", "user")
LIMIT_MAX = {"commits": 1000, "pull-requests": 500}
DAY_S = 86_400
COMMIT_CSV_HEADER = ["Date", "Author email", "Author name", "Author username", "Repository",
                     "Project", "Commit hash", "Merge commit", "Lines added", "Lines deleted"]
PR_CSV_HEADER = ["Created date", "Last updated date", "Author name", "Author username",
                 "Repository", "Project", "State", "Pull request id", "Reviewers",
                 "Time to open (s)", "Pickup time (s)", "Review time (s)",
                 "Time to resolve (s)"]


# helpers -------------------------------------------------------------------------------------
def epoch(text: str) -> float:
    """ISO-8601 (with Z or an offset) -> epoch seconds."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def iso(epoch_s: float, offset_minutes: int = 0) -> str:
    """Epoch seconds -> ISO-8601 with an explicit offset (+00:00 for UTC)."""
    zone = timezone(timedelta(minutes=offset_minutes))
    return datetime.fromtimestamp(epoch_s, zone).isoformat()


def served(item: Item) -> Item:
    """A truth item without the simulator-only `_sim` facts: what the API serves."""
    return {k: v for k, v in item.items() if k != "_sim"}


def key_of(kind: str, item: Item) -> Key:
    """Natural key: commit hash; pull request (target repository slug, id)."""
    if kind == "commits":
        return str(item["id"])
    return (item["toRef"]["repository"]["slug"], int(item["id"]))


def by_key(kind: str, items: list[Item]) -> dict[Key, Item]:
    keyed = {key_of(kind, i): served(i) for i in items}
    assert len(keyed) == len(items), "duplicate items"
    return keyed


def item_time(kind: str, item: Item, date_type: str = "created") -> float:
    """The instant a list filters and orders on, in seconds."""
    if kind == "commits":
        return epoch(item["authorTimestamp"])
    return item["createdDate" if date_type == "created" else "updatedDate"] / 1000


def error_of(response: requests.Response, status: int) -> dict[str, Any]:
    """Assert the spec's shared error body with `status`; return its first error."""
    assert response.status_code == status, response.text[:300]
    assert response.headers["Content-Type"].startswith("application/json")
    body = response.json()
    assert isinstance(body["errors"], list) and body["errors"]
    for error in body["errors"]:
        assert set(error) >= {"context", "message", "exceptionName"}
        assert error["context"] is None or isinstance(error["context"], str)
        assert isinstance(error["message"], str) and error["message"]
        assert error["exceptionName"] is None or isinstance(error["exceptionName"], str)
    return body["errors"][0]


class Api:
    """A signed-in session against one simulated host's API prefix."""

    def __init__(self, sim: Simulator, auth: Any = AUTH,
                 headers: dict[str, str] | None = None) -> None:
        self.sim = sim
        self.base = sim.api_base
        self.session = requests.Session()
        self.session.auth = auth
        self.session.headers.update(headers or {})

    def get(self, path: str, **params: Any) -> requests.Response:
        return self.session.get(self.base + path, params=params, timeout=30)

    def json(self, path: str, **params: Any) -> Any:
        response = self.get(path, **params)
        assert response.status_code == 200, response.text[:300]
        assert response.headers["Content-Type"].startswith("application/json")
        return response.json()

    def all_pages(self, path: str, limit: int | None = None, expected_limit: int = 25,
                  **params: Any) -> list[Item]:
        """Every item of a paged list, checking the envelope of every page."""
        if limit is not None:
            params["limit"] = limit
        items: list[Item] = []
        start = 0
        for _ in range(10_000):
            page = self.json(path, start=start, **params)
            assert page["start"] == start
            assert page["limit"] == expected_limit
            assert page["size"] == len(page["values"])
            items += page["values"]
            if page["isLastPage"]:
                assert "nextPageStart" not in page  # README: absent on the last page
                assert page["size"] <= expected_limit
                return items
            assert page["size"] == expected_limit
            assert page["nextPageStart"] == start + page["size"]
            start = page["nextPageStart"]
        raise AssertionError("paging never reached isLastPage")

    def csv(self, path: str, **params: Any) -> tuple[requests.Response, list[dict[str, str]]]:
        response = self.get(path, **params)
        assert response.status_code == 200, response.text[:300]
        assert response.headers["Content-Type"].startswith("text/csv")
        assert response.headers.get("Transfer-Encoding") == "chunked"
        assert "Content-Length" not in response.headers
        rows = list(csv.reader(io.StringIO(response.content.decode("utf-8"), newline="")))
        header, body = rows[0], rows[1:]
        expected = COMMIT_CSV_HEADER if "/commits/" in path else PR_CSV_HEADER
        assert header == expected
        return response, [dict(zip(header, row, strict=True)) for row in body]


def field_is(path: tuple[str, ...], value: Any) -> Callable[[Item], bool]:
    """A predicate: the item's nested field at `path` equals `value`."""
    def check(item: Item) -> bool:
        found: Any = item
        for name in path:
            found = found[name]
        return bool(found == value)
    return check


@dataclass(frozen=True)
class Target:
    """One level's address and which truth items belong to it."""

    level: str
    path: str  # below the API prefix, before /commits or /pull-requests
    commit_in: Callable[[Item], bool]
    pr_in: Callable[[Item], bool]

    def wants(self, kind: str) -> Callable[[Item], bool]:
        return self.commit_in if kind == "commits" else self.pr_in


@dataclass
class Truth:
    """The tiny host's ground truth, read once per module."""

    now: int
    commits: list[Item]
    prs: list[Item]
    users: list[Item]
    repos: list[Item]
    projects: list[Item]

    def items(self, kind: str) -> list[Item]:
        return self.commits if kind == "commits" else self.prs

    def targets(self, level: str) -> list[Target]:
        """Every project, repository or user of the host (or the single global target)."""
        if level == "global":
            return [Target("global", "", lambda c: True, lambda p: True)]
        if level == "project":
            return [Target("project", f"/projects/{p['key']}",
                           field_is(("repository", "project", "key"), p["key"]),
                           field_is(("toRef", "repository", "project", "key"), p["key"]))
                    for p in self.projects]
        if level == "repository":
            return [Target("repository",
                           f"/projects/{r['project']['key']}/repos/{quote(r['slug'], safe='')}",
                           field_is(("repository", "slug"), r["slug"]),
                           field_is(("toRef", "repository", "slug"), r["slug"]))
                    for r in self.repos]
        return [Target("user", f"/users/{u['slug']}", field_is(("_sim", "user"), u["slug"]),
                       field_is(("author", "user", "name"), u["slug"]))
                for u in self.users]

    def select(self, kind: str, wants: Callable[[Item], bool], since: float | None = None,
               until: float | None = None, date_type: str = "created",
               merges: str = "include", state: str = "all") -> list[Item]:
        """Truth items in a window ([since, until), seconds) and with the given filters."""
        chosen = []
        for item in self.items(kind):
            when = item_time(kind, item, date_type)
            if not wants(item) or (since is not None and when < since) or (
                    until is not None and when >= until):
                continue
            if kind == "commits" and merges != "include" and (
                    item["_sim"]["is_merge"] != (merges == "only")):
                continue
            if kind == "pull-requests" and state != "all" and item["state"] != state.upper():
                continue
            chosen.append(item)
        return chosen


def read_truth(sim: Simulator) -> Truth:
    return Truth(sim.info()["now"], sim.truth("commits"), sim.truth("pull-requests"),
                 sim.truth("users"), sim.truth("repositories"), sim.truth("projects"))


def statistics_of(kind: str, items: list[Item]) -> dict[str, Any]:
    """The statistics object the spec defines, summed over `items`."""
    if kind == "commits":
        return {"linesOfCode": {"added": sum(i["linesOfCode"]["added"] for i in items),
                                "deleted": sum(i["linesOfCode"]["deleted"] for i in items)},
                "commits": len(items)}
    states = Counter(i["state"].lower() for i in items)
    return {"pullRequests": len(items),
            "state": {s: states.get(s, 0) for s in ("declined", "merged", "open")}}


# fixtures ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def api(server_sim: Simulator) -> Iterator[Api]:
    client = Api(server_sim)
    yield client
    client.session.close()


@pytest.fixture(scope="module")
def truth(server_sim: Simulator) -> Truth:
    return read_truth(server_sim)


@pytest.fixture(scope="module")
def small_sim() -> Iterator[Simulator]:
    """A small self-hosted host (~20k commits, 2k pull requests): paging past the maxima."""
    with Simulator(SimConfig(edition="server", size="small", now=FIXED_NOW)) as sim:
        yield sim


def window_of(truth: Truth, kind: str) -> tuple[float, float]:
    """A window whose bounds sit exactly on two items' instants (second 1/3 to 2/3)."""
    times = sorted({int(item_time(kind, i)) for i in truth.items(kind)})
    return float(times[len(times) // 3]), float(times[2 * len(times) // 3])


# the 25 endpoints: lists, statistics, CSV at four levels ------------------------------------
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("level", LEVELS)
def test_list_at_every_target_of_each_level_equals_truth(
        api: Api, truth: Truth, level: str, kind: str) -> None:
    """Each project, repository and user (and global) lists exactly its truth items."""
    for target in truth.targets(level):
        items = api.all_pages(f"{target.path}/{kind}", limit=LIMIT_MAX[kind],
                              expected_limit=LIMIT_MAX[kind])
        expected = [i for i in truth.items(kind) if target.wants(kind)(i)]
        assert by_key(kind, items) == by_key(kind, expected), target.path
        times = [item_time(kind, i) for i in items]
        assert times == sorted(times, reverse=True), "newest first by default"
    if level != "global":
        assert len(truth.targets(level)) > 1


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("level", LEVELS)
def test_statistics_at_every_target_of_each_level_equal_truth(
        api: Api, truth: Truth, level: str, kind: str) -> None:
    """Statistics equal the sums over the target's truth items, unfiltered and filtered."""
    since, until = window_of(truth, kind)
    filters: dict[str, str] = ({"merges": "exclude"} if kind == "commits"
                               else {"state": "merged"})
    for target in truth.targets(level):
        wants = target.wants(kind)
        path = f"{target.path}/{kind}/statistics"
        assert api.json(path) == statistics_of(kind, truth.select(kind, wants)), path
        filtered = api.json(path, sinceDate=iso(since), untilDate=iso(until), **filters)
        expected = truth.select(kind, wants, since, until, **filters)
        assert filtered == statistics_of(kind, expected), path


def commit_row(item: Item) -> dict[str, Any]:
    """What a commit CSV row must say about a truth commit (dates compared as instants)."""
    repository = item["repository"]
    return {"Date": epoch(item["authorTimestamp"]), "Author email": item["author"]["emailAddress"],
            "Author name": item["author"]["displayName"],
            "Author username": item["_sim"]["user"] or "", "Repository": repository["name"],
            "Project": repository["project"]["name"], "Commit hash": item["id"],
            "Merge commit": "true" if item["_sim"]["is_merge"] else "false",
            "Lines added": str(item["linesOfCode"]["added"]),
            "Lines deleted": str(item["linesOfCode"]["deleted"])}


def check_commit_rows(rows: list[dict[str, str]], expected: list[Item]) -> None:
    parsed = [{**row, "Date": epoch(row["Date"]), "Merge commit": row["Merge commit"].lower()}
              for row in rows]
    assert parsed == [commit_row(i) for i in expected]


def check_pr_rows(rows: list[dict[str, str]], expected: list[Item]) -> None:
    assert [(r["Repository"], int(r["Pull request id"])) for r in rows] == [
        (i["toRef"]["repository"]["name"], i["id"]) for i in expected]
    for row, item in zip(rows, expected, strict=True):
        author = item["author"]["user"]
        assert round(epoch(row["Created date"]) * 1000) == item["createdDate"]
        assert round(epoch(row["Last updated date"]) * 1000) == item["updatedDate"]
        assert (row["Author name"], row["Author username"]) == (author["displayName"],
                                                                author["name"])
        assert row["Project"] == item["toRef"]["repository"]["project"]["name"]
        assert row["State"] == item["state"]
        reviewers = [r["user"]["displayName"] for r in item["reviewers"]]
        assert all(name in row["Reviewers"] for name in reviewers)
        assert (row["Reviewers"] == "") == (not reviewers)
        closed_ms = item["_sim"]["closed_ms"]
        if closed_ms is None:
            assert row["Time to resolve (s)"] == ""
        else:
            assert abs(int(row["Time to resolve (s)"]) - (closed_ms - item["createdDate"]) / 1000
                       ) <= 1
        for phase in ("Time to open (s)", "Pickup time (s)", "Review time (s)"):
            assert row[phase] == "" or int(row[phase]) >= 0


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("level", LEVELS)
def test_csv_export_at_every_target_of_each_level_equals_list(
        api: Api, truth: Truth, level: str, kind: str) -> None:
    """CSV rows are the list's items for the same window, in the same order."""
    since, until = window_of(truth, kind)
    dates = {"sinceDate": iso(since), "untilDate": iso(until)}
    for target in truth.targets(level):
        _, rows = api.csv(f"{target.path}/{kind}/export/csv", **dates)
        listed = api.all_pages(f"{target.path}/{kind}", limit=LIMIT_MAX[kind],
                               expected_limit=LIMIT_MAX[kind], **dates)
        expected = truth.select(kind, target.wants(kind), since, until)
        assert by_key(kind, listed) == by_key(kind, expected)
        truth_by_key = {key_of(kind, i): i for i in expected}
        in_list_order = [truth_by_key[key_of(kind, i)] for i in listed]
        if kind == "commits":
            check_commit_rows(rows, in_list_order)
        else:
            check_pr_rows(rows, in_list_order)


def test_single_commit_by_full_and_abbreviated_id(api: Api, truth: Truth) -> None:
    """The 25th endpoint: one commit item, by its full hash or a unique abbreviation."""
    newest_per_repo = {c["repository"]["slug"]: c for c in truth.commits}
    sample = [*newest_per_repo.values(), next(c for c in truth.commits if not c["parents"])]
    abbreviated = 0
    for item in sample:
        path = commit_path(item)
        assert api.json(f"{path}/{item['id']}") == served(item)
        same_prefix = [c for c in truth.commits if c["repository"] == item["repository"]
                       and c["id"].startswith(item["id"][:10])]
        if len(same_prefix) == 1:
            assert api.json(f"{path}/{item['id'][:10]}") == served(item)
            abbreviated += 1
    assert len(newest_per_repo) == len(truth.repos) and abbreviated >= len(truth.repos)


# paging and the envelope -------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("limit", [None, 1, 7, 100])
def test_paging_to_the_end_returns_truth_exactly(
        api: Api, truth: Truth, kind: str, limit: int | None) -> None:
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
    assert by_key("pull-requests", client.all_pages(f"/projects/{project}/pull-requests")) == \
        by_key("pull-requests", in_project)


# parameters and defaults ---------------------------------------------------------------------
@pytest.mark.parametrize("merges", [None, "include", "exclude", "only"])
def test_merges_filter(api: Api, truth: Truth, merges: str | None) -> None:
    """merges defaults to include; exclude drops merge commits, only keeps them."""
    params = {"merges": merges} if merges else {}
    items = api.all_pages("/commits", limit=1000, expected_limit=1000, **params)
    expected = truth.select("commits", lambda c: True, merges=merges or "include")
    assert by_key("commits", items) == by_key("commits", expected)
    merge_count = sum(1 for c in truth.commits if c["_sim"]["is_merge"])
    assert 0 < merge_count < len(truth.commits)
    expected_count = {"only": merge_count, "exclude": len(truth.commits) - merge_count}
    assert len(items) == expected_count.get(merges or "include", len(truth.commits))
    if merges in ("only", "exclude"):
        assert all((len(i["parents"]) > 1) == (merges == "only") for i in items)
    assert api.json("/commits/statistics", **params) == statistics_of("commits", expected)


def test_order_defaults_to_newest_and_oldest_reverses(api: Api, truth: Truth) -> None:
    default = api.all_pages("/commits", limit=1000, expected_limit=1000)
    newest = api.all_pages("/commits", limit=1000, expected_limit=1000, order="newest")
    oldest = api.all_pages("/commits", limit=1000, expected_limit=1000, order="oldest")
    assert [c["id"] for c in default] == [c["id"] for c in newest]
    times = [epoch(c["authorTimestamp"]) for c in oldest]
    assert times == sorted(times)
    assert times[0] == min(epoch(c["authorTimestamp"]) for c in truth.commits)
    assert newest == sorted(newest, key=lambda c: epoch(c["authorTimestamp"]), reverse=True)
    assert by_key("commits", oldest) == by_key("commits", newest) == by_key("commits",
                                                                          truth.commits)
    first_page = api.json("/commits", order="oldest")["values"]
    assert [c["id"] for c in first_page] == [c["id"] for c in oldest[:25]]


def date_forms(since: float, until: float) -> dict[str, dict[str, str]]:
    return {
        "utc-z": {"sinceDate": iso(since).replace("+00:00", "Z"),
                  "untilDate": iso(until).replace("+00:00", "Z")},
        "offsets": {"sinceDate": iso(since, 345), "untilDate": iso(until, -720)},
        "plus-14": {"sinceDate": iso(since, 840), "untilDate": iso(until, 825)},
    }


@pytest.mark.parametrize("form", ["utc-z", "offsets", "plus-14"])
@pytest.mark.parametrize("kind", KINDS)
def test_since_inclusive_until_exclusive_in_every_offset_form(
        api: Api, truth: Truth, kind: str, form: str) -> None:
    """The same instants written with Z, +05:45/-12:00 or +14:00/+13:45 ('+' encoded)."""
    since, until = window_of(truth, kind)
    params = date_forms(since, until)[form]
    assert "+" in params["sinceDate"] or form == "utc-z"
    items = api.all_pages(f"/{kind}", limit=LIMIT_MAX[kind], expected_limit=LIMIT_MAX[kind],
                          **params)
    expected = truth.select(kind, lambda i: True, since, until)
    assert by_key(kind, items) == by_key(kind, expected)
    times = {int(item_time(kind, i)) for i in items}
    assert int(since) in times, "since is inclusive"
    assert int(until) not in times, "until is exclusive"
    assert any(int(item_time(kind, i)) == int(until) for i in truth.items(kind))


@pytest.mark.parametrize("kind", KINDS)
def test_date_only_bounds_are_midnight_utc(api: Api, truth: Truth, kind: str) -> None:
    now_day = datetime.fromtimestamp(truth.now, UTC).date()
    since_day, until_day = now_day - timedelta(days=40), now_day - timedelta(days=10)
    since = datetime(since_day.year, since_day.month, since_day.day, tzinfo=UTC)
    until = datetime(until_day.year, until_day.month, until_day.day, tzinfo=UTC)
    items = api.all_pages(f"/{kind}", limit=LIMIT_MAX[kind], expected_limit=LIMIT_MAX[kind],
                          sinceDate=since_day.isoformat(), untilDate=until_day.isoformat())
    expected = truth.select(kind, lambda i: True, since.timestamp(), until.timestamp())
    assert expected and len(expected) < len(truth.items(kind))
    assert by_key(kind, items) == by_key(kind, expected)


def test_unencoded_plus_in_an_offset_is_a_400(server_sim: Simulator, api: Api) -> None:
    """README: an unencoded '+' arrives as a space and is rejected, never misread."""
    raw = f"{server_sim.api_base}/commits?sinceDate=2026-05-01T00:00:00+01:00"
    error = error_of(api.session.get(raw, timeout=30), 400)
    assert "sinceDate" in (error["context"] or "") + error["message"]
    encoded = api.json("/commits/statistics", sinceDate="2026-05-01T00:00:00+01:00")
    assert encoded["commits"] > 0


def test_only_since_or_only_until(api: Api, truth: Truth) -> None:
    since, until = window_of(truth, "commits")
    only_since = api.json("/commits/statistics", sinceDate=iso(since))
    only_until = api.json("/commits/statistics", untilDate=iso(until))
    everything = truth.select("commits", lambda c: True)
    assert only_since == statistics_of("commits", truth.select("commits", lambda c: True, since))
    assert only_until == statistics_of("commits",
                                       truth.select("commits", lambda c: True, None, until))
    assert only_since["commits"] + only_until["commits"] > len(everything)  # they overlap


@pytest.mark.parametrize("state", [None, "all", "open", "merged", "declined"])
def test_pull_request_state_filter(api: Api, truth: Truth, state: str | None) -> None:
    """state defaults to all; items carry it uppercase; open/closed flags agree."""
    params = {"state": state} if state else {}
    items = api.all_pages("/pull-requests", limit=500, expected_limit=500, **params)
    expected = truth.select("pull-requests", lambda p: True, state=state or "all")
    assert by_key("pull-requests", items) == by_key("pull-requests", expected)
    assert expected
    for item in items:
        assert item["state"] in ("OPEN", "MERGED", "DECLINED")
        assert state in (None, "all") or item["state"] == state.upper()
        assert item["open"] is (item["state"] == "OPEN")
        assert item["closed"] is (item["state"] != "OPEN")
    if state in (None, "all"):
        assert {i["state"] for i in items} == {"OPEN", "MERGED", "DECLINED"}


@pytest.mark.parametrize("date_type", [None, "created", "updated"])
def test_pull_request_date_type_selects_the_filtered_and_ordered_date(
        api: Api, truth: Truth, date_type: str | None) -> None:
    chosen = date_type or "created"
    times = sorted({int(item_time("pull-requests", p, chosen)) for p in truth.prs})
    since, until = float(times[len(times) // 4]), float(times[3 * len(times) // 4])
    params = {"dateType": date_type} if date_type else {}
    items = api.all_pages("/pull-requests", limit=500, expected_limit=500,
                          sinceDate=iso(since), untilDate=iso(until), **params)
    expected = truth.select("pull-requests", lambda p: True, since, until, chosen)
    assert by_key("pull-requests", items) == by_key("pull-requests", expected)
    other = "updated" if chosen == "created" else "created"
    assert by_key("pull-requests", expected) != by_key(
        "pull-requests", truth.select("pull-requests", lambda p: True, since, until, other))
    ordered = [item_time("pull-requests", i, chosen) for i in items]
    assert ordered == sorted(ordered, reverse=True)


def test_pull_request_dates_are_epoch_milliseconds(api: Api, truth: Truth) -> None:
    """createdDate/updatedDate are integers in ms: a second-wide window finds the item."""
    items = api.json("/pull-requests", limit=500)["values"]
    truth_by = {key_of("pull-requests", p): p for p in truth.prs}
    for item in items:
        source = truth_by[key_of("pull-requests", item)]
        assert isinstance(item["createdDate"], int) and isinstance(item["updatedDate"], int)
        assert (item["createdDate"], item["updatedDate"]) == (source["createdDate"],
                                                              source["updatedDate"])
        assert item["createdDate"] <= item["updatedDate"] <= truth.now * 1000
        assert item["createdDate"] > (truth.now - 400 * DAY_S) * 1000
    sample = items[len(items) // 2]
    second = sample["createdDate"] // 1000
    around = api.json("/pull-requests", limit=500, sinceDate=iso(second),
                      untilDate=iso(second + 1))["values"]
    assert key_of("pull-requests", sample) in {key_of("pull-requests", p) for p in around}
    after = api.json("/pull-requests", limit=500, sinceDate=iso(second + 1))["values"]
    assert key_of("pull-requests", sample) not in {key_of("pull-requests", p) for p in after}


# levels agree --------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_levels_agree_where_they_overlap(api: Api, truth: Truth, kind: str) -> None:
    """Sum over projects = global; sum over a project's repositories = project; users too."""
    total = api.json(f"/{kind}/statistics")
    count = "commits" if kind == "commits" else "pullRequests"
    projects = {t.path: api.json(f"{t.path}/{kind}/statistics") for t in truth.targets("project")}
    assert sum(s[count] for s in projects.values()) == total[count]
    if kind == "commits":
        for side in ("added", "deleted"):
            assert sum(s["linesOfCode"][side] for s in projects.values()) == \
                total["linesOfCode"][side]
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
        p: s[count] for p, s in projects.items()}
    users = sum(api.json(f"{t.path}/{kind}/statistics")[count] for t in truth.targets("user"))
    if kind == "pull-requests":
        assert users == total[count]
    else:
        known = {u["emailAddress"] for u in truth.users} | {
            a for u in truth.users for a in u["_sim"]["aliases"]}
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
                assert item["user"] == {k: user[k] for k in ("emailAddress", "displayName",
                                                             "name")}
            else:
                assert "user" not in item
                alias_commits_seen += 1
        prs = api.all_pages(f"/users/{user['slug']}/pull-requests", limit=500,
                            expected_limit=500)
        assert {p["author"]["user"]["name"] for p in prs} <= {user["slug"]}
        assert len(prs) == sum(1 for p in truth.prs if p["author"]["user"]["name"] == user["slug"])
    assert alias_commits_seen > 0


# items -------------------------------------------------------------------------------------
def test_commit_user_present_only_for_primary_email(api: Api, truth: Truth) -> None:
    items = api.all_pages("/commits", limit=1000, expected_limit=1000)
    primary = {u["emailAddress"]: u for u in truth.users}
    kinds: Counter[str] = Counter()
    for item in items:
        email = item["author"]["emailAddress"]
        if email in primary:
            user = primary[email]
            assert item["user"] == {"emailAddress": email, "displayName": user["displayName"],
                                    "name": user["name"]}
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
        make_sim: Callable[..., Simulator], length: int | None) -> None:
    """Parent ids are 20-char prefixes by default (server_parent_id_length); roots: []."""
    sim = make_sim(edition="server")
    if length is not None:
        sim.set_conditions(server_parent_id_length=length)
    client = Api(sim)
    served_items = {c["id"]: c for c in client.all_pages("/commits", limit=1000,
                                                         expected_limit=1000)}
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
    single = client.json(f"/projects/{repo['project']['key']}/repos/"
                         f"{quote(repo['slug'], safe='')}/commits/{sample['id']}")
    assert single["parents"] == [{"id": p[:cut]} for p in sample["_sim"]["parents"]]


def test_repository_slug_with_spaces_and_capitals(api: Api, truth: Truth) -> None:
    spaced = [r for r in truth.repos if " " in r["slug"] and r["slug"] != r["slug"].lower()]
    assert spaced
    for repo in spaced:
        path = f"/projects/{repo['project']['key']}/repos/{quote(repo['slug'], safe='')}"
        assert "%20" in path
        items = api.all_pages(f"{path}/commits", limit=1000, expected_limit=1000)
        assert items and {(i["repository"]["slug"], i["repository"]["name"]) for i in items} == {
            (repo["slug"], repo["name"])}
        prs = api.all_pages(f"{path}/pull-requests", limit=500, expected_limit=500)
        assert {p["toRef"]["repository"]["slug"] for p in prs} <= {repo["slug"]}
        for pr in prs:
            assert pr["links"]["self"][0]["href"].endswith(
                f"/projects/{repo['project']['key']}/repos/{repo['slug']}"
                f"/pull-requests/{pr['id']}")


# CSV rules -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,extra", [("commits", {}), ("commits", {"merges": "only"}),
                                        ("commits", {"order": "oldest"}),
                                        ("pull-requests", {}),
                                        ("pull-requests", {"dateType": "updated"}),
                                        ("pull-requests", {"state": "open"})])
def test_csv_default_window_is_the_last_30_days(
        api: Api, truth: Truth, kind: str, extra: dict[str, str]) -> None:
    _, rows = api.csv(f"/{kind}/export/csv", **extra)
    since = truth.now - 30 * DAY_S
    listed = api.all_pages(f"/{kind}", limit=LIMIT_MAX[kind], expected_limit=LIMIT_MAX[kind],
                           sinceDate=iso(since), **extra)
    expected = truth.select(kind, lambda i: True, since, None, extra.get("dateType", "created"),
                            extra.get("merges", "include"), extra.get("state", "all"))
    assert by_key(kind, listed) == by_key(kind, expected)
    assert 0 < len(expected) < len(truth.items(kind))
    truth_by = {key_of(kind, i): i for i in expected}
    ordered = [truth_by[key_of(kind, i)] for i in listed]
    if kind == "commits":
        check_commit_rows(rows, ordered)
    else:
        check_pr_rows(rows, ordered)


@pytest.mark.parametrize("kind", KINDS)
def test_csv_with_only_until_exports_the_30_days_before_it(
        api: Api, truth: Truth, kind: str) -> None:
    until = float(truth.now - 20 * DAY_S)
    _, rows = api.csv(f"/{kind}/export/csv", untilDate=iso(until))
    expected = truth.select(kind, lambda i: True, until - 30 * DAY_S, until)
    assert expected
    if kind == "commits":
        assert sorted(r["Commit hash"] for r in rows) == sorted(i["id"] for i in expected)
    else:
        assert sorted((r["Repository"], int(r["Pull request id"])) for r in rows) == sorted(
            (i["toRef"]["repository"]["name"], i["id"]) for i in expected)


@pytest.mark.parametrize("kind", KINDS)
def test_csv_window_over_366_days_is_a_400(api: Api, truth: Truth, kind: str) -> None:
    until = truth.now
    error = error_of(api.get(f"/{kind}/export/csv", sinceDate=iso(until - 367 * DAY_S),
                             untilDate=iso(until)), 400)
    assert "sinceDate" in (error["context"] or "") + error["message"]
    error_of(api.get(f"/{kind}/export/csv", sinceDate=iso(until - 366 * DAY_S - 1),
                     untilDate=iso(until)), 400)
    _, rows = api.csv(f"/{kind}/export/csv", sinceDate=iso(until - 366 * DAY_S),
                      untilDate=iso(until))
    assert len(rows) == len(truth.select(kind, lambda i: True, until - 366 * DAY_S, until))
    # only sinceDate: the window runs to now, so an old since is too long as well
    error_of(api.get(f"/{kind}/export/csv", sinceDate=iso(until - 400 * DAY_S)), 400)


def test_csv_larger_than_one_chunk_is_complete(small_sim: Simulator) -> None:
    """A year of ~20k commits streams chunked and whole."""
    client = Api(small_sim)
    now = small_sim.info()["now"]
    response, rows = client.csv("/commits/export/csv", sinceDate=iso(now - 366 * DAY_S),
                                untilDate=iso(now))
    assert response.headers["Transfer-Encoding"] == "chunked"
    commits = small_sim.truth("commits")
    assert sorted(r["Commit hash"] for r in rows) == sorted(c["id"] for c in commits)


# single commit -------------------------------------------------------------------------------
def commit_path(item: Item) -> str:
    repo = item["repository"]
    return f"/projects/{repo['project']['key']}/repos/{quote(repo['slug'], safe='')}/commits"


def test_single_commit_with_files(api: Api, truth: Truth) -> None:
    """withFiles=true adds the truth's files, summing to linesOfCode; false/absent: no files."""
    sample = [c for c in truth.commits if c["linesOfCode"]["added"] > 0][::50]
    sample.append(next(c for c in truth.commits if c["linesOfCode"] == {"added": 0,
                                                                        "deleted": 0}))
    for item in sample:
        path = f"{commit_path(item)}/{item['id']}"
        answer = api.json(path, withFiles="true")
        files = server_files(api, item["id"])
        assert answer == {**served(item), "files": files}
        for side in ("added", "deleted"):
            assert sum(f["linesOfCode"][side] for f in answer["files"]) == \
                item["linesOfCode"][side]
        assert "files" not in api.json(path)
        assert "files" not in api.json(path, withFiles="false")
    assert any(len(server_files(api, c["id"])) > 1 for c in sample)


def server_files(api: Api, commit: str) -> list[Item]:
    """The truth's per-file rows for one commit."""
    (entry,) = api.sim.truth("files", commit=commit)
    assert entry["id"] == commit
    return list(entry["files"])


def ambiguous_pair(truth: Truth) -> tuple[Item, str, list[str]]:
    """In the first repository (generation order), two commits share 12 hex digits."""
    first = truth.repos[0]["slug"]
    groups: dict[str, list[str]] = defaultdict(list)
    for commit in truth.commits:
        if commit["repository"]["slug"] == first:
            groups[commit["id"][:12]].append(commit["id"])
    (prefix, hashes), = [(p, h) for p, h in groups.items() if len(h) > 1]
    item = next(c for c in truth.commits if c["id"] == hashes[0])
    return item, prefix, sorted(hashes)


def test_ambiguous_short_id_is_a_400_listing_candidates(api: Api, truth: Truth) -> None:
    item, prefix, hashes = ambiguous_pair(truth)
    for short in (prefix, prefix[:8]):
        error = error_of(api.get(f"{commit_path(item)}/{short}"), 400)
        assert "ambiguous" in error["message"].lower()
        assert all(h in error["message"] for h in hashes)
        assert "ambiguous" in (error["exceptionName"] or "").lower()
    for full in hashes:
        assert api.json(f"{commit_path(item)}/{full}")["id"] == full
        longer = next(n for n in range(13, 41) if sum(h.startswith(full[:n]) for h in hashes) == 1)
        assert api.json(f"{commit_path(item)}/{full[:longer]}")["id"] == full


def test_missing_commit_is_a_404_naming_commit_and_repository(api: Api, truth: Truth) -> None:
    item = truth.commits[0]
    repo = item["repository"]["slug"]
    missing = "0" * 39 + "1"
    assert missing not in {c["id"] for c in truth.commits}
    error = error_of(api.get(f"{commit_path(item)}/{missing}"), 404)
    assert missing in error["message"] and repo in error["message"]
    assert "nosuchcommit" in (error["exceptionName"] or "").lower()
    elsewhere = next(c for c in truth.commits if c["repository"]["slug"] != repo)
    error = error_of(api.get(f"{commit_path(item)}/{elsewhere['id']}"), 404)
    assert elsewhere["id"] in error["message"] and repo in error["message"]


def test_unindexed_repository_is_a_409_once_then_200(
        make_sim: Callable[..., Simulator]) -> None:
    sim = make_sim(edition="server")
    item = sim.truth("commits")[5]
    slug = item["repository"]["slug"]
    sim.set_conditions(unindexed={slug: 1})
    client = Api(sim)
    error = error_of(client.get(f"{commit_path(item)}/{item['id']}"), 409)
    assert "unindexed" in error["message"] and "try again" in error["message"].lower()
    assert "notindexed" in (error["exceptionName"] or "").lower()
    assert client.json(f"{commit_path(item)}/{item['id']}") == served(item)
    other = next(c for c in sim.truth("commits") if c["repository"]["slug"] != slug)
    sim.set_conditions(unindexed={slug: -1})
    for _ in range(3):
        error_of(client.get(f"{commit_path(item)}/{item['id']}"), 409)
    assert client.json(f"{commit_path(other)}/{other['id']}")["id"] == other["id"]


# authentication and permissions ------------------------------------------------------------
def test_basic_and_bearer_see_the_same_data(server_sim: Simulator, api: Api) -> None:
    bearer = Api(server_sim, auth=None, headers=BEARER)
    for path in ("/commits", "/pull-requests", "/commits/statistics",
                 "/projects/CORE/pull-requests/statistics"):
        assert bearer.json(path, limit=100) == api.json(path, limit=100)
    log = server_sim.requests()["log"]
    assert {"basic", "bearer"} <= {entry["auth"] for entry in log}


@pytest.mark.parametrize("how", ["none", "wrong-password", "unknown-user", "wrong-bearer",
                                 "restricted-password-for-analyst"])
def test_bad_credentials_are_a_401(server_sim: Simulator, how: str) -> None:
    auth, headers = {
        "none": (None, {}),
        "wrong-password": (("analyst", "nope"), {}),
        "unknown-user": (("mallory", "analyst-pass"), {}),
        "wrong-bearer": (None, {"Authorization": "Bearer sim-cloud-token"}),
        "restricted-password-for-analyst": (("analyst", "restricted-pass"), {}),
    }[how]
    response = requests.get(server_sim.api_base + "/commits", auth=auth, headers=headers,
                            timeout=30)
    error = error_of(response, 401)
    assert "values" not in response.json() and error["message"]


@pytest.mark.parametrize("credentials", ["basic", "bearer"])
def test_restricted_user_reads_only_the_first_project(
        server_sim: Simulator, truth: Truth, credentials: str) -> None:
    client = (Api(server_sim, auth=RESTRICTED) if credentials == "basic"
              else Api(server_sim, auth=None, headers=RESTRICTED_BEARER))
    first, *others = [p["key"] for p in truth.projects]
    assert others
    readable = {r["slug"] for r in truth.repos if r["project"]["key"] == first}
    for kind in KINDS:
        def mine(i: Item, kind: str = kind) -> bool:
            item = i if kind == "commits" else i["toRef"]
            return item["repository"]["slug"] in readable

        listed = client.all_pages(f"/{kind}", limit=LIMIT_MAX[kind],
                                  expected_limit=LIMIT_MAX[kind])
        expected = [i for i in truth.items(kind) if mine(i)]
        assert 0 < len(expected) < len(truth.items(kind))
        assert by_key(kind, listed) == by_key(kind, expected)
        assert client.json(f"/{kind}/statistics") == statistics_of(kind, expected)
        assert client.json(f"/projects/{first}/{kind}/statistics") == statistics_of(kind,
                                                                                   expected)
        for key in others:
            error = error_of(client.get(f"/projects/{key}/{kind}"), 403)
            assert "authoris" in (error["exceptionName"] or "").lower()
            error_of(client.get(f"/projects/{key}/{kind}/statistics"), 403)
            error_of(client.get(f"/projects/{key}/{kind}/export/csv"), 403)
        hidden = next(r for r in truth.repos if r["project"]["key"] != first)
        error_of(client.get(f"/projects/{hidden['project']['key']}/repos/"
                            f"{quote(hidden['slug'], safe='')}/{kind}"), 403)
        user = max(truth.users, key=lambda u: sum(
            1 for c in truth.commits if c["_sim"]["user"] == u["slug"]))
        wants = truth.targets("user")[truth.users.index(user)].wants(kind)
        mine_of_user = [i for i in truth.items(kind) if wants(i) and mine(i)]
        assert len(mine_of_user) < sum(1 for i in truth.items(kind) if wants(i))
        assert by_key(kind, client.all_pages(f"/users/{user['slug']}/{kind}",
                                             limit=LIMIT_MAX[kind],
                                             expected_limit=LIMIT_MAX[kind])) == \
            by_key(kind, mine_of_user)
    hidden_commit = next(c for c in truth.commits if c["repository"]["slug"] not in readable)
    error_of(client.get(f"{commit_path(hidden_commit)}/{hidden_commit['id']}"), 403)
    seen_commit = next(c for c in truth.commits if c["repository"]["slug"] in readable)
    assert client.json(f"{commit_path(seen_commit)}/{seen_commit['id']}") == served(seen_commit)


def test_forbidden_repository_is_hidden_and_403_at_repository_level(
        make_sim: Callable[..., Simulator]) -> None:
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

        for target in (*truth.targets("global"), *truth.targets("project"),
                       *truth.targets("user")):
            wants = target.wants(kind)
            expected = [i for i in truth.items(kind) if wants(i) and visible(i)]
            listed = client.all_pages(f"{target.path}/{kind}", limit=LIMIT_MAX[kind],
                                      expected_limit=LIMIT_MAX[kind])
            assert by_key(kind, listed) == by_key(kind, expected), target.path
            assert client.json(f"{target.path}/{kind}/statistics") == statistics_of(
                kind, expected)
        assert sum(1 for i in truth.items(kind) if not visible(i)) > 0
        repo_path = f"/projects/{key}/repos/{quote(slug, safe='')}/{kind}"
        for suffix in ("", "/statistics", "/export/csv"):
            error = error_of(client.get(repo_path + suffix), 403)
            assert "authoris" in (error["exceptionName"] or "").lower()
    commit = next(c for c in truth.commits if c["repository"]["slug"] == slug)
    error_of(client.get(f"{commit_path(commit)}/{commit['id']}"), 403)


# host errors ---------------------------------------------------------------------------------
SAMPLE_PATHS = ("/commits", "/pull-requests/statistics", "/projects/CORE/commits/export/csv",
                "/users/user0001/pull-requests")


def test_unlicensed_host_answers_402_everywhere(make_sim: Callable[..., Simulator]) -> None:
    sim = make_sim(edition="server")
    sim.set_conditions(licensed=False)
    client = Api(sim)
    commit = sim.truth("commits")[0]
    for path in (*SAMPLE_PATHS, f"{commit_path(commit)}/{commit['id']}"):
        error = error_of(client.get(path), 402)
        assert error["exceptionName"] is None
        assert "license" in error["message"].lower()
    sim.set_conditions(licensed=True)
    assert client.json("/commits/statistics")["commits"] == len(sim.truth("commits"))


@pytest.mark.parametrize("version,present", [("5.1.0", False), ("4.9.9", False),
                                             ("5.2.0", True), ("5.10.1", True)])
def test_app_older_than_5_2_answers_html_404(
        make_sim: Callable[..., Simulator], version: str, present: bool) -> None:
    sim = make_sim(edition="server")
    sim.set_conditions(app_version=version)
    client = Api(sim)
    for path in SAMPLE_PATHS:
        response = client.get(path)
        if present:
            assert response.status_code == 200
            continue
        assert response.status_code == 404
        assert response.headers["Content-Type"].startswith("text/html")
        assert response.text.lstrip().lower().startswith("<!doctype html")
    if not present:
        assert sim.info()["counts"]["commits"] > 0  # the control surface still answers


def test_unknown_api_path_is_html_404_and_unknown_objects_json_404(api: Api) -> None:
    response = api.get("/no-such-resource")
    assert response.status_code == 404 and response.headers["Content-Type"].startswith(
        "text/html")
    for path, name in (("/projects/NOPE/commits", "NOPE"), ("/users/nobody/pull-requests",
                                                            "nobody"),
                       ("/projects/CORE/repos/nope/commits/statistics", "nope")):
        error = error_of(api.get(path), 404)
        assert name in error["message"]


def test_proxy_login_page_is_200_html(make_sim: Callable[..., Simulator]) -> None:
    sim = make_sim(edition="server")
    sim.set_conditions(proxy_login=True)
    client = Api(sim)
    for path in SAMPLE_PATHS:
        response = client.get(path)
        assert response.status_code == 200
        assert response.headers["Content-Type"].startswith("text/html")
        assert "<form" in response.text.lower()
        with pytest.raises(ValueError):
            response.json()


# invalid parameters --------------------------------------------------------------------------
@pytest.mark.parametrize("path,params,name", [
    ("/commits", {"merges": "sometimes"}, "merges"),
    ("/commits", {"limit": "0"}, "limit"),
    ("/pull-requests", {"limit": "-5"}, "limit"),
    ("/commits", {"limit": "ten"}, "limit"),
    ("/commits", {"start": "-1"}, "start"),
    ("/commits", {"sinceDate": "yesterday"}, "sinceDate"),
    ("/commits/statistics", {"untilDate": "2026-13-40"}, "untilDate"),
    ("/commits", {"order": "random"}, "order"),
    ("/pull-requests", {"state": "closed"}, "state"),
    ("/pull-requests/statistics", {"dateType": "merged"}, "dateType"),
    ("/pull-requests/export/csv", {"state": "superseded"}, "state"),
    ("/commits", {"sinceDate": "2026-05-02", "untilDate": "2026-05-01"}, "sinceDate"),
])
def test_invalid_parameter_values_are_a_400(api: Api, path: str, params: dict[str, str],
                                            name: str) -> None:
    error = error_of(api.get(path, **params), 400)
    assert name in (error["context"] or "") + error["message"]


def test_invalid_with_files_value_is_a_400(api: Api, truth: Truth) -> None:
    commit = truth.commits[0]
    error = error_of(api.get(f"{commit_path(commit)}/{commit['id']}", withFiles="maybe"), 400)
    assert "withFiles" in (error["context"] or "") + error["message"]
