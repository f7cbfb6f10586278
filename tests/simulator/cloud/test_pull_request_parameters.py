"""Pull-request list parameters and defaults: state, the 30-day window, date bounds, order,
and the items' fields."""

from __future__ import annotations

import pytest
import requests

from simulator import Simulator
from tests.simulator.cloud.client import assert_prs_equal, by_pr_key, collect, fetch, state_counts
from tests.simulator.cloud.truth import (
    BEFORE_HISTORY,
    BRACED_UUID,
    PR_STATES,
    THIRTY_DAYS_S,
    UTC_MICROS,
    Truth,
    expected_prs,
    micros_z,
    pr_key,
)


@pytest.mark.parametrize("state", ["all", "open", "merged", "declined", "superseded"])
def test_pull_request_state_filter(
    cloud_sim: Simulator, http: requests.Session, truth: Truth, state: str
) -> None:
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
    cloud_sim: Simulator, http: requests.Session, truth: Truth, date_type: str | None
) -> None:
    """Without since_date and until_date, lists and statistics cover the last 30 days."""
    params = {"date_type": date_type} if date_type else {}
    ws = truth.workspace
    expected = expected_prs(truth, date_type=date_type or "created")
    older = [p for p in truth.prs if p["_sim"]["created_ms"] < (truth.now - THIRTY_DAYS_S) * 1000]
    assert expected and older  # the window really cuts something off
    served = collect(http, cloud_sim, f"/workspace/{ws}/pull-requests", params)
    assert_prs_equal(served, expected)
    stats = fetch(http, cloud_sim, f"/workspace/{ws}/pull-requests/statistics", params)
    assert stats == {"pull_requests": len(expected), "state": state_counts(expected.values())}


@pytest.mark.parametrize("date_type", ["created", "updated"])
@pytest.mark.parametrize(
    "since, until",
    [
        ("2026-04-15", None),
        (None, "2026-05-20T10:00:00+02:00"),
        ("2026-04-01T06:30:00-03:30", "2026-05-20"),
    ],
)
def test_pull_request_date_filters(
    cloud_sim: Simulator,
    http: requests.Session,
    truth: Truth,
    date_type: str,
    since: str | None,
    until: str | None,
) -> None:
    """since_date/until_date (date-only or with offset) bound the date date_type selects."""
    params = {
        k: v
        for k, v in (("since_date", since), ("until_date", until), ("date_type", date_type))
        if v
    }
    served = collect(http, cloud_sim, f"/workspace/{truth.workspace}/pull-requests", params)
    expected = expected_prs(truth, since=since, until=until, date_type=date_type)
    assert_prs_equal(served, expected)
    assert 0 < len(expected) < len(truth.prs)


@pytest.mark.parametrize("date_type", ["created", "updated"])
def test_pull_request_since_inclusive_until_exclusive(
    cloud_sim: Simulator, http: requests.Session, truth: Truth, date_type: str
) -> None:
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
    cloud_sim: Simulator, http: requests.Session, truth: Truth, date_type: str
) -> None:
    """Pull request lists run newest first by the date date_type selects (README's choice)."""
    served = collect(
        http,
        cloud_sim,
        f"/workspace/{truth.workspace}/pull-requests",
        {"since_date": BEFORE_HISTORY, "date_type": date_type, "pagelen": "13"},
    )
    truth_by_key = truth.pr_by_key()
    times = [truth_by_key[pr_key(item)]["_sim"][f"{date_type}_ms"] for item in served]
    assert times == sorted(times, reverse=True)


def test_pull_request_item_fields_are_consistent(
    cloud_sim: Simulator, http: requests.Session, truth: Truth
) -> None:
    """closed_date null iff OPEN; created <= closed <= updated; braced uuid; UTC micros."""
    served = collect(
        http,
        cloud_sim,
        f"/workspace/{truth.workspace}/pull-requests",
        {"since_date": BEFORE_HISTORY},
    )
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
        assert {u["uuid"]: u["_sim"]["slug"] for u in truth.users}[item["author"]["uuid"]] == facts[
            "user"
        ]
