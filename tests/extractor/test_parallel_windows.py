"""Backfill windows loaded at once: overlapping, bounded, sharing one gate, stopping together.

Real simulators over HTTP (with latency added to every answer, as a remote host has), real
DuckDB files. What the host saw comes from the simulator's own request log and its count of
requests open at once (`open_max`), never from extractor code.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pipelines.backfill import run_backfill
from simulator import SimConfig, Simulator
from sources.repo_analytics import FatalApiError
from tests.conftest import FIXED_NOW
from tests.extractor.conftest import Loader
from tests.extractor.test_backfill import (
    CLOCK,
    SINCE,
    SLACK,
    assert_tables_equal_truth,
    dated,
    log_since,
    snapshot,
    source_args,
)

WINDOW_DAYS = 20  # 2026-03-01 .. 2026-06-01: 5 windows
LATENCY = 0.02  # seconds added to every API answer


def planned_windows() -> list[tuple[datetime, datetime]]:
    starts = []
    start = SINCE
    while start < CLOCK:
        starts.append((start, min(start + timedelta(days=WINDOW_DAYS), CLOCK)))
        start += timedelta(days=WINDOW_DAYS)
    return starts


def window_of(entry: dict[str, Any], windows: list[tuple[datetime, datetime]]) -> int | None:
    """The window a dated request belongs to (the cloud commit lists read 26 h wider)."""
    span = dated(entry)
    if span is None:
        return None
    for index, (start, end) in enumerate(windows):
        if start - SLACK <= span[0] and span[1] <= end + SLACK and span[0] < end:
            return index
    return None


@pytest.fixture
def slow_sim() -> Iterator[Simulator]:
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        sim.set_faults({"rules": [{"kind": "slow", "rate": 1, "slow_seconds": LATENCY}]})
        yield sim


def backfill(loader: Loader, parallel: int, **overrides: Any) -> Any:
    args = source_args(loader, **{"levels": ["repository"],
                                  "resources": ["commits", "pull_requests"], **overrides})
    return run_backfill(loader.pipeline(), SINCE.date().isoformat(), None, WINDOW_DAYS,
                        now=CLOCK, parallel=parallel, **args)


def test_windows_overlap_within_the_request_bound(slow_sim: Simulator, tmp_path: Path) -> None:
    """Three windows at once with concurrency 2: the host sees requests of different windows
    interleaved, never more than 2 open at once (and 2 reached), each window on its own
    window pipeline, and the tables equal the truth."""
    sim, windows = slow_sim, planned_windows()
    loader = Loader(sim, tmp_path)
    before = sim.requests()["total"]
    result = backfill(loader, parallel=3, concurrency=2)

    assert [(w.start, w.end) for w in result.windows] == windows
    assert not any(w.resumed for w in result.windows)
    assert sim.requests()["open_max"] == 2
    serials: dict[int, list[int]] = {}
    for entry in log_since(sim, before):
        index = window_of(entry, windows)
        if index is not None:
            serials.setdefault(index, []).append(entry["n"])
    assert sorted(serials) == list(range(len(windows)))
    overlapping = [(a, b) for a in serials for b in serials if a < b
                   and min(serials[a]) < max(serials[b]) and min(serials[b]) < max(serials[a])]
    assert overlapping, "no two windows were read at the same time"
    names = {p.name for p in (tmp_path / "pipelines").iterdir()}
    assert {f"repo_analytics_window_{n}" for n in (1, 2, 3)} <= names
    assert_tables_equal_truth(loader.db_file, sim, "cloud", required=(SINCE, CLOCK),
                              allowed=(SINCE - SLACK, CLOCK))


def test_parallel_and_sequential_backfills_load_the_same_rows(tmp_path: Path) -> None:
    """What lands does not depend on how many windows run at once: every table (statistics
    included) is the same after one window at a time and after four."""
    with Simulator(SimConfig(edition="server", size="tiny", now=FIXED_NOW)) as sim:
        one, four = Loader(sim, tmp_path / "one"), Loader(sim, tmp_path / "four")
        overrides = {"resources": ["commits", "pull_requests", "commit_statistics"],
                     "statistics_period": "week"}
        backfill(one, parallel=1, **overrides)
        backfill(four, parallel=4, **overrides)
    first, second = snapshot(one.db_file), snapshot(four.db_file)
    assert first["server_commits"] and first["server_commit_statistics"]
    assert first == second


def test_a_429_in_one_window_holds_the_others(tmp_path: Path) -> None:
    """One window's 429 with Retry-After 1 s: that window retries, and another window, which
    got no 429, waited too (one gate per host, shared by the windows)."""
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        sim.set_faults({"rules": [  # the first rule that fires wins
            {"kind": "429", "rate": 1, "count": 1, "retry_after": 1,
             "match": "commits.list.repository"},
            {"kind": "slow", "rate": 1, "slow_seconds": LATENCY}]})
        result = backfill(Loader(sim, tmp_path), parallel=3)
    reports = [w.result.report.totals() for w in result.windows if w.result]
    limited = [t for t in reports if t.retries]
    held = [t for t in reports if not t.retries and t.wait_seconds_sum >= 0.5]
    assert len(limited) == 1
    assert held, [(t.retries, t.wait_seconds_sum) for t in reports]


def test_a_failing_window_starts_nothing_new(slow_sim: Simulator, tmp_path: Path) -> None:
    """A fatal answer (a login page) in one window, two at once: the run raises it, no window
    after the one that may be under way beside it is requested, and a rerun resumes: the
    windows that finished are not read again, the rest are, and the tables equal the truth."""
    sim, windows = slow_sim, planned_windows()
    sim.set_faults({"rules": [  # the first rule that fires wins
        {"kind": "html", "rate": 1, "count": 1, "match": "commits.list.repository"},
        {"kind": "slow", "rate": 1, "slow_seconds": LATENCY}]})
    loader = Loader(sim, tmp_path)
    before = sim.requests()["total"]
    with pytest.raises(Exception) as caught:
        backfill(loader, parallel=2)
    error: BaseException | None = caught.value
    while error is not None and not isinstance(error, FatalApiError):
        error = getattr(error, "exception", None) or error.__cause__
    assert isinstance(error, FatalApiError) and error.kind == "not_json"
    log = log_since(sim, before)
    failing = next(window_of(e, windows) for e in log if e["fault"] == "html")
    assert failing is not None
    touched = {window_of(e, windows) for e in log} - {None}
    assert failing in touched and max(touched) <= failing + 1  # parallel 2: one beside it
    assert max(touched) < len(windows) - 1, "the failure came too late to show anything"

    sim.clear_faults()
    again = sim.requests()["total"]
    result = backfill(loader, parallel=2)
    resumed = {i for i, w in enumerate(result.windows) if w.resumed}
    assert failing not in resumed and resumed <= touched
    reread = {window_of(e, windows) for e in log_since(sim, again)} - {None}
    assert reread == set(range(len(windows))) - resumed
    assert_tables_equal_truth(loader.db_file, sim, "cloud", required=(SINCE, CLOCK),
                              allowed=(SINCE - SLACK, CLOCK))
