"""CSV export rules: the 30-day default window, the 366-day maximum, chunked streaming."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from simulator import Simulator
from tests.simulator.selfhosted.client import Api, error_of
from tests.simulator.selfhosted.truth import (
    DAY_S,
    KINDS,
    LIMIT_MAX,
    Truth,
    by_key,
    check_commit_rows,
    check_pr_rows,
    iso,
    key_of,
)


@pytest.mark.parametrize(
    "kind,extra",
    [
        ("commits", {}),
        ("commits", {"merges": "only"}),
        ("commits", {"order": "oldest"}),
        ("pull-requests", {}),
        ("pull-requests", {"dateType": "updated"}),
        ("pull-requests", {"state": "open"}),
    ],
)
def test_csv_default_window_is_the_last_30_days(
    api: Api, truth: Truth, kind: str, extra: dict[str, str]
) -> None:
    _, rows = api.csv(f"/{kind}/export/csv", **extra)
    since = truth.now - 30 * DAY_S
    listed = api.all_pages(
        f"/{kind}",
        limit=LIMIT_MAX[kind],
        expected_limit=LIMIT_MAX[kind],
        sinceDate=iso(since),
        **extra,
    )
    expected = truth.select(
        kind,
        lambda i: True,
        since,
        None,
        extra.get("dateType", "created"),
        extra.get("merges", "include"),
        extra.get("state", "all"),
    )
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
    api: Api, truth: Truth, kind: str
) -> None:
    until = float(truth.now - 20 * DAY_S)
    _, rows = api.csv(f"/{kind}/export/csv", untilDate=iso(until))
    expected = truth.select(kind, lambda i: True, until - 30 * DAY_S, until)
    assert expected
    if kind == "commits":
        assert sorted(r["Commit hash"] for r in rows) == sorted(i["id"] for i in expected)
    else:
        assert sorted((r["Repository"], int(r["Pull request id"])) for r in rows) == sorted(
            (i["toRef"]["repository"]["name"], i["id"]) for i in expected
        )


@pytest.mark.parametrize("kind", KINDS)
def test_csv_window_over_366_days_is_a_400(api: Api, truth: Truth, kind: str) -> None:
    until = truth.now
    error = error_of(
        api.get(f"/{kind}/export/csv", sinceDate=iso(until - 367 * DAY_S), untilDate=iso(until)),
        400,
    )
    assert "sinceDate" in (error["context"] or "") + error["message"]
    error_of(
        api.get(
            f"/{kind}/export/csv", sinceDate=iso(until - 366 * DAY_S - 1), untilDate=iso(until)
        ),
        400,
    )
    _, rows = api.csv(
        f"/{kind}/export/csv", sinceDate=iso(until - 366 * DAY_S), untilDate=iso(until)
    )
    assert len(rows) == len(truth.select(kind, lambda i: True, until - 366 * DAY_S, until))
    # only sinceDate: the window runs to now, so an old since is too long as well
    error_of(api.get(f"/{kind}/export/csv", sinceDate=iso(until - 400 * DAY_S)), 400)


def test_csv_larger_than_one_chunk_is_complete(small_sim: Simulator) -> None:
    """A year of ~20k commits streams chunked and whole."""
    client = Api(small_sim)
    now = small_sim.info()["now"]
    response, rows = client.csv(
        "/commits/export/csv", sinceDate=iso(now - 366 * DAY_S), untilDate=iso(now)
    )
    assert response.headers["Transfer-Encoding"] == "chunked"
    commits = small_sim.truth("commits")
    assert sorted(r["Commit hash"] for r in rows) == sorted(c["id"] for c in commits)


@pytest.mark.parametrize("kind", KINDS)
def test_repeat_fault_sends_the_first_row_again_after_the_last(
    make_sim: Callable[..., Simulator], kind: str
) -> None:
    """`repeat`: the export is whole, then its first data row once more; JSON answers are
    left alone, and the next export (the fault spent) is the export without it."""
    sim = make_sim(edition="server", faults="repeat=1,count=1")
    client = Api(sim)
    window = {"sinceDate": iso(sim.info()["now"] - 90 * DAY_S)}
    _, repeated = client.csv(f"/{kind}/export/csv", **window)
    _, clean = client.csv(f"/{kind}/export/csv", **window)
    assert len(clean) > 10
    assert repeated == [*clean, clean[0]]
    log = sim.requests()["log"]
    assert [e["fault"] for e in log] == ["repeat", None]
