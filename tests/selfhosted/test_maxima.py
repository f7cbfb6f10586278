"""The API's maxima, on a small host: list pages of 1000 commits and 500 pull requests, CSV
windows of at most 366 days."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from simulator import SimConfig, Simulator
from tests.selfhosted.request_log import (
    MAX_CSV_WINDOW,
    check_exports_equal_served,
    wire_time,
)
from tests.selfhosted.truth import (
    CLOCK,
    KINDS,
    Truth,
    Window,
    check_list,
    check_primary_keys,
)
from tests.support import FIXED_NOW
from tests.support.helpers import count, run_with_log
from tests.support.loader import Loader

SMALL_START = CLOCK - timedelta(days=366)
CSV_START = CLOCK - timedelta(days=400)


@dataclass
class Small:
    sim: Simulator
    truth: Truth
    lists: Loader
    lists_log: list[dict[str, Any]]
    exports: Loader
    exports_log: list[dict[str, Any]]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Small]:
    """A small host (a year, ~20k commits, 2k PRs): the global lists from a year back, and the
    global exports from 400 days back (two CSV windows), in two pipelines."""
    with Simulator(SimConfig(edition="server", size="small", now=FIXED_NOW)) as sim:
        truth = Truth.read(sim)
        lists = Loader(sim, Path(tmp_path_factory.mktemp("server_small_lists")))
        result, lists_log = run_with_log(
            sim, lists, levels=["global"], resources=list(KINDS), start_date=SMALL_START.isoformat()
        )
        assert not result.report.skips
        exports = Loader(sim, Path(tmp_path_factory.mktemp("server_small_exports")))
        result, exports_log = run_with_log(
            sim,
            exports,
            levels=["global"],
            resources=["commit_exports", "pull_request_exports"],
            start_date=CSV_START.isoformat(),
        )
        assert not result.report.skips
        yield Small(sim, truth, lists, lists_log, exports, exports_log)


def test_paging_across_the_maxima(small: Small) -> None:
    """Commits in pages of 1000, PRs in pages of 500, each next start the served
    nextPageStart, until isLastPage; every item of the year equals the truth."""
    window = Window(SMALL_START, small.truth.clock)
    scopes = {"global": {"global"}}
    check_list(small.lists, small.truth, window, "commits", "global", scopes)
    check_list(small.lists, small.truth, window, "pull_requests", "global", scopes)
    for kind, limit in (("commits", 1000), ("pull-requests", 500)):
        entries = [e for e in small.lists_log if e["endpoint"] == f"{kind}.list.global"]
        total = sum(1 for i in small.truth.items(kind.replace("-", "_")) if window.holds(i))
        assert total > 3 * limit
        assert len(entries) == -(-total // limit), kind
        assert {e["params"]["limit"] for e in entries} == {str(limit)}
        assert len({(e["params"]["sinceDate"], e["params"]["untilDate"]) for e in entries}) == 1
        starts = [int(e["params"].get("start", "0")) for e in entries]
        assert starts[0] == 0
        for entry, following in zip(entries, [*starts[1:], None], strict=True):
            body = requests.get(
                small.sim.base_url + entry["path"],
                params=entry["params"],
                auth=small.sim.basic_auth,
                timeout=30,
            ).json()
            assert body["limit"] == limit
            if following is None:
                assert body["isLastPage"] and "nextPageStart" not in body
            else:
                assert not body["isLastPage"] and body["nextPageStart"] == following
    assert count(small.lists, "server_commit_parents") == sum(
        len(c["parents"]) for c in small.truth.commits if window.holds(c)
    )
    check_primary_keys(small.lists)


def test_csv_windows_never_exceed_366_days(small: Small) -> None:
    """400 days are exported in two windows of at most 366 days that tile [start, clock);
    the tables hold exactly what those windows serve, one row per commit and PR."""
    for kind in ("commits", "pull-requests"):
        entries = [e for e in small.exports_log if e["endpoint"] == f"{kind}.csv.global"]
        windows = sorted(
            (wire_time(e["params"]["sinceDate"]), wire_time(e["params"]["untilDate"]))
            for e in entries
        )
        assert len(windows) == 2, kind
        assert windows[0][0] == CSV_START and windows[-1][1] == small.truth.clock
        assert all(a[1] == b[0] for a, b in zip(windows, windows[1:], strict=False))
        assert all(end - since <= MAX_CSV_WINDOW for since, end in windows)
    sizes = check_exports_equal_served(
        small.exports, small.sim, small.exports_log, small.sim.basic_auth
    )
    window = Window(CSV_START, small.truth.clock)
    assert sizes["commits"] == sum(1 for c in small.truth.commits if window.holds(c))
    assert count(small.exports, "server_commit_exports") == sizes["commits"]
    assert count(small.exports, "server_pull_request_exports") == sizes["pull-requests"]
    check_primary_keys(small.exports)
