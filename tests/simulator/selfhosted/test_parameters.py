"""List parameters and defaults: merges, order, date bounds in every offset form, state,
dateType, epoch-millisecond dates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from simulator import Simulator
from tests.simulator.selfhosted.client import Api, error_of
from tests.simulator.selfhosted.truth import (
    DAY_S,
    KINDS,
    LIMIT_MAX,
    Truth,
    by_key,
    epoch,
    iso,
    item_time,
    key_of,
    statistics_of,
    window_of,
)


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
    assert (
        by_key("commits", oldest) == by_key("commits", newest) == by_key("commits", truth.commits)
    )
    first_page = api.json("/commits", order="oldest")["values"]
    assert [c["id"] for c in first_page] == [c["id"] for c in oldest[:25]]


def date_forms(since: float, until: float) -> dict[str, dict[str, str]]:
    return {
        "utc-z": {
            "sinceDate": iso(since).replace("+00:00", "Z"),
            "untilDate": iso(until).replace("+00:00", "Z"),
        },
        "offsets": {"sinceDate": iso(since, 345), "untilDate": iso(until, -720)},
        "plus-14": {"sinceDate": iso(since, 840), "untilDate": iso(until, 825)},
    }


@pytest.mark.parametrize("form", ["utc-z", "offsets", "plus-14"])
@pytest.mark.parametrize("kind", KINDS)
def test_since_inclusive_until_exclusive_in_every_offset_form(
    api: Api, truth: Truth, kind: str, form: str
) -> None:
    """The same instants written with Z, +05:45/-12:00 or +14:00/+13:45 ('+' encoded)."""
    since, until = window_of(truth, kind)
    params = date_forms(since, until)[form]
    assert "+" in params["sinceDate"] or form == "utc-z"
    items = api.all_pages(
        f"/{kind}", limit=LIMIT_MAX[kind], expected_limit=LIMIT_MAX[kind], **params
    )
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
    items = api.all_pages(
        f"/{kind}",
        limit=LIMIT_MAX[kind],
        expected_limit=LIMIT_MAX[kind],
        sinceDate=since_day.isoformat(),
        untilDate=until_day.isoformat(),
    )
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
    assert only_until == statistics_of(
        "commits", truth.select("commits", lambda c: True, None, until)
    )
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
    api: Api, truth: Truth, date_type: str | None
) -> None:
    chosen = date_type or "created"
    times = sorted({int(item_time("pull-requests", p, chosen)) for p in truth.prs})
    since, until = float(times[len(times) // 4]), float(times[3 * len(times) // 4])
    params = {"dateType": date_type} if date_type else {}
    items = api.all_pages(
        "/pull-requests",
        limit=500,
        expected_limit=500,
        sinceDate=iso(since),
        untilDate=iso(until),
        **params,
    )
    expected = truth.select("pull-requests", lambda p: True, since, until, chosen)
    assert by_key("pull-requests", items) == by_key("pull-requests", expected)
    other = "updated" if chosen == "created" else "created"
    assert by_key("pull-requests", expected) != by_key(
        "pull-requests", truth.select("pull-requests", lambda p: True, since, until, other)
    )
    ordered = [item_time("pull-requests", i, chosen) for i in items]
    assert ordered == sorted(ordered, reverse=True)


def test_pull_request_dates_are_epoch_milliseconds(api: Api, truth: Truth) -> None:
    """createdDate/updatedDate are integers in ms: a second-wide window finds the item."""
    items = api.json("/pull-requests", limit=500)["values"]
    truth_by = {key_of("pull-requests", p): p for p in truth.prs}
    for item in items:
        source = truth_by[key_of("pull-requests", item)]
        assert isinstance(item["createdDate"], int) and isinstance(item["updatedDate"], int)
        assert (item["createdDate"], item["updatedDate"]) == (
            source["createdDate"],
            source["updatedDate"],
        )
        assert item["createdDate"] <= item["updatedDate"] <= truth.now * 1000
        assert item["createdDate"] > (truth.now - 400 * DAY_S) * 1000
    sample = items[len(items) // 2]
    second = sample["createdDate"] // 1000
    around = api.json(
        "/pull-requests", limit=500, sinceDate=iso(second), untilDate=iso(second + 1)
    )["values"]
    assert key_of("pull-requests", sample) in {key_of("pull-requests", p) for p in around}
    after = api.json("/pull-requests", limit=500, sinceDate=iso(second + 1))["values"]
    assert key_of("pull-requests", sample) not in {key_of("pull-requests", p) for p in after}
