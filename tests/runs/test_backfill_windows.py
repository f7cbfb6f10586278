"""Backfill windows: one after another on the one pipeline, each a load, stopping at a failure.

Real simulators over HTTP (with latency added to every answer, as a remote host has), real
DuckDB files. What the host saw comes from the simulator's own request log and its count of
requests open at once (`open_max`), never from extractor code.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
from dlt.load import Load

from pipelines.runs.backfill import run_backfill
from pipelines.runs.progress import Progress
from simulator import SimConfig, Simulator
from sources.repo_analytics import FatalApiError
from sources.repo_analytics.errors import DuckDBFileHeld
from tests.destinations.test_duckdb_lock import Holders
from tests.runs.test_backfill import (
    CLOCK,
    SINCE,
    SLACK,
    assert_tables_equal_truth,
    dated,
    log_since,
    snapshot,
    source_args,
)
from tests.support import FIXED_NOW
from tests.support.loader import Loader

WINDOW_DAYS = 20  # 2026-03-01 .. 2026-06-01: 5 windows
LATENCY = 0.02  # seconds added to every API answer
SLOW_LIST = 0.2  # seconds added to the discovery lists' answers where a test says so
# the top-level lists a repository-level backfill reads to find its repositories
DISCOVERY_LISTS = ("commits.list.workspace", "pull-requests.list.workspace")


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


def own_window(entry: dict[str, Any], windows: list[tuple[datetime, datetime]]) -> int | None:
    """The window whose own reading made a request: the discovery lists excluded (the first
    window to run reads every later window's slice of them too)."""
    return None if entry["endpoint"] in DISCOVERY_LISTS else window_of(entry, windows)


@pytest.fixture
def slow_sim() -> Iterator[Simulator]:
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        sim.set_faults({"rules": [{"kind": "slow", "rate": 1, "slow_seconds": LATENCY}]})
        yield sim


def backfill(loader: Loader, progress: Progress | None = None, **overrides: Any) -> Any:
    args = source_args(
        loader, **{"levels": ["repository"], "resources": ["commits", "pull_requests"], **overrides}
    )
    return run_backfill(
        loader.pipeline(),
        SINCE.date().isoformat(),
        None,
        WINDOW_DAYS,
        progress=progress,
        now=CLOCK,
        **args,
    )


class FaultAfterWindows(Progress):
    """Sets a fault on the host once `windows` windows have ended. A window ends when its load
    lands, which is after the window after it was read (they overlap): the second window
    after it is the first to meet the fault."""

    def __init__(self, sim: Simulator, windows: int, faults: dict[str, Any]) -> None:
        self.sim, self.windows, self.faults = sim, windows, faults

    def window_ended(self, outcome: Any, ended: int, total: int) -> None:
        if ended == self.windows:
            self.sim.set_faults(self.faults)


def test_windows_load_one_after_another_on_the_pipeline(
    slow_sim: Simulator, tmp_path: Path
) -> None:
    """Five windows with concurrency 2: the host sees the discovery of each window's
    repositories (the workspace lists) before the window's own requests, the first window's
    before any, and each window's own requests after the last one of the window before (one
    window at a time), 2 open at once and never more (the
    scopes of a window read together), one dlt load per window, all by the one pipeline --
    no pipeline of its own per window -- and the tables equal the truth."""
    sim, windows = slow_sim, planned_windows()
    loader = Loader(sim, tmp_path)
    before = sim.requests()["total"]
    result = backfill(loader, concurrency=2)

    assert [(w.start, w.end) for w in result.windows] == windows
    assert not any(w.resumed for w in result.windows)
    assert sim.requests()["open_max"] == 2
    log = log_since(sim, before)
    discovery = [e for e in log if e["endpoint"] in DISCOVERY_LISTS]
    # every window's slice of the workspace lists is read before the window's own lists (the
    # later windows' slices while the windows before them read), the first window's first
    found: dict[int | None, list[int]] = {}
    for entry in discovery:
        found.setdefault(window_of(entry, windows), []).append(entry["n"])
    assert sorted(found) == list(range(len(windows)))
    serials: dict[int, list[int]] = {}
    for entry in log:
        index = window_of(entry, windows)
        if index is not None and entry["endpoint"] not in DISCOVERY_LISTS:
            serials.setdefault(index, []).append(entry["n"])
    assert sorted(serials) == list(range(len(windows)))
    assert max(found[0]) < min(n for ns in serials.values() for n in ns)
    for index in range(len(windows)):
        assert max(found[index]) < min(serials[index]), index
    for earlier, later in zip(range(len(windows)), range(1, len(windows)), strict=False):
        assert max(serials[earlier]) < min(serials[later]), (earlier, later)
    assert [p.name for p in (tmp_path / "pipelines").iterdir()] == ["repo_analytics"]
    with duckdb.connect(str(loader.db_file), read_only=True) as db:
        names = db.execute(
            "SELECT DISTINCT pipeline_name FROM repo_analytics._dlt_pipeline_state"
        ).fetchall()
        loads = db.execute(
            "SELECT load_id FROM repo_analytics._dlt_loads WHERE status = 0 ORDER BY load_id"
        ).fetchall()
    assert names == [("repo_analytics",)]
    # a load per window, the last one also setting the nightly cursors at the end: no other
    assert [load_id for (load_id,) in loads] == list(result.load_ids)
    assert len(result.load_ids) == len(windows) == len(loads)
    assert_tables_equal_truth(
        loader.db_file, sim, "cloud", required=(SINCE, CLOCK), allowed=(SINCE - SLACK, CLOCK)
    )


def test_discovery_reads_the_windows_slices_concurrency_at_once(tmp_path: Path) -> None:
    """The windows' slices of the workspace lists are read `concurrency` (3) at once, not one
    page after another: with 0.2 s added to each of their answers, a request that comes in
    less than 0.2 s after another came while that one was still being answered, and a
    reader of one slice at a time could never send it then (on the code before, at most 1
    was open). Every slice is read once, and the tables equal the truth."""
    faults = {
        "rules": [  # the first rule that fires wins
            {"kind": "slow", "rate": 1, "slow_seconds": SLOW_LIST, "match": "list.workspace"},
            {"kind": "slow", "rate": 1, "slow_seconds": LATENCY},
        ]
    }
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        sim.set_faults(faults)
        windows, loader = planned_windows(), Loader(sim, tmp_path)
        before = sim.requests()["total"]
        backfill(loader, concurrency=3)
        discovery = [e for e in log_since(sim, before) if e["endpoint"] in DISCOVERY_LISTS]
        arrivals = sorted(e["at"] for e in discovery)
        open_at_once = max(
            sum(1 for later in arrivals if first <= later < first + SLOW_LIST) for first in arrivals
        )
        assert open_at_once == 3, arrivals
        asked = Counter((e["endpoint"], tuple(sorted(e["params"].items()))) for e in discovery)
        assert set(asked.values()) == {1}, asked
        assert {window_of(e, windows) for e in discovery} == set(range(len(windows)))
        assert_tables_equal_truth(
            loader.db_file, sim, "cloud", required=(SINCE, CLOCK), allowed=(SINCE - SLACK, CLOCK)
        )


def test_a_window_loads_while_the_next_one_is_read(
    slow_sim: Simulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first window's load (dlt's load step) is held until the host sees a request of
    the second window: the second window is read while the first one loads. Every window
    then lands, a load each in plan order, and the tables equal the truth. (One window at a
    time, the held load would hold the whole backfill until the hold's limit.)"""
    sim, windows = slow_sim, planned_windows()
    second_window_read = threading.Event()
    held: list[bool] = []  # per hold: whether the second window's request released it
    real_run = Load.run

    def held_first(self: Load, pool: Any) -> Any:
        if not held:
            held.append(second_window_read.wait(timeout=30))
        return real_run(self, pool)

    monkeypatch.setattr(Load, "run", held_first)
    loader = Loader(sim, tmp_path)
    before = sim.requests()["total"]
    stop_watching = threading.Event()

    def watch() -> None:
        while not stop_watching.is_set():
            if any(own_window(e, windows) == 1 for e in log_since(sim, before)):
                second_window_read.set()
                return
            stop_watching.wait(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = backfill(loader)
    finally:
        stop_watching.set()
        watcher.join()

    assert held == [True]
    assert [(w.start, w.end) for w in result.windows] == windows
    with duckdb.connect(str(loader.db_file), read_only=True) as db:
        loads = db.execute(
            "SELECT load_id FROM repo_analytics._dlt_loads WHERE status = 0 ORDER BY load_id"
        ).fetchall()
    assert [load_id for (load_id,) in loads] == list(result.load_ids)
    assert len(result.load_ids) == len(windows)
    assert_tables_equal_truth(
        loader.db_file, sim, "cloud", required=(SINCE, CLOCK), allowed=(SINCE - SLACK, CLOCK)
    )


def test_a_load_that_fails_behind_the_next_window_stops_there_and_the_rerun_lands_both(
    slow_sim: Simulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first window's load meets its DuckDB file held by a reader (waiting 0 s) while the
    second window is read: the backfill stops with the holder named, once the second window's
    package is extracted, and nothing of the third is asked. The rerun (the reader gone) lands
    both packages first, asks nothing of those two windows again, reads the rest, and the
    tables equal the truth."""
    sim, windows = slow_sim, planned_windows()
    loader = Loader(sim, tmp_path)
    holders, readers = Holders(), []
    real_init = Load.__init__

    def held_once(self: Load, *args: Any, **kwargs: Any) -> None:
        # the first window's load step is made: a reader takes the file before it opens it
        # (the load makes the file of a new dataset: here it is made for the reader first)
        if not readers:
            duckdb.connect(str(loader.db_file)).close()
            readers.append(holders.hold(loader.db_file))
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(Load, "__init__", held_once)
    before = sim.requests()["total"]
    try:
        with pytest.raises(DuckDBFileHeld) as caught:
            backfill(loader, duckdb_lock_wait_seconds=0)
    finally:
        holders.stop_all()
    assert f"held by process {readers[0].pid}" in str(caught.value)
    asked = {own_window(e, windows) for e in log_since(sim, before)} - {None}
    assert asked == {0, 1}

    again = sim.requests()["total"]
    result = backfill(loader)
    assert {i for i, w in enumerate(result.windows) if w.resumed} == {0, 1}
    rerun = log_since(sim, again)
    reread = {own_window(e, windows) for e in rerun} - {None}
    assert reread == set(range(2, len(windows)))
    # every window's slice of the top-level lists is read: the landed windows' to find the
    # scopes that appeared since they were read (none here)
    rediscovered = {window_of(e, windows) for e in rerun if e["endpoint"] in DISCOVERY_LISTS}
    assert rediscovered == set(range(len(windows)))
    assert not result.appeared.windows
    assert_tables_equal_truth(
        loader.db_file, sim, "cloud", required=(SINCE, CLOCK), allowed=(SINCE - SLACK, CLOCK)
    )


def test_concurrency_does_not_change_what_lands(tmp_path: Path) -> None:
    """What lands does not depend on how many scopes are read at once: every table
    (statistics included) is the same after concurrency 1 and concurrency 4."""
    with Simulator(SimConfig(edition="server", size="tiny", now=FIXED_NOW)) as sim:
        one, four = Loader(sim, tmp_path / "one"), Loader(sim, tmp_path / "four")
        overrides = {
            "resources": ["commits", "pull_requests", "commit_statistics"],
            "statistics_period": "week",
        }
        backfill(one, concurrency=1, **overrides)
        backfill(four, concurrency=4, **overrides)
    first, second = snapshot(one.db_file), snapshot(four.db_file)
    assert first["server_commits"] and first["server_commit_statistics"]
    assert first == second


def test_a_failing_window_stops_the_backfill(slow_sim: Simulator, tmp_path: Path) -> None:
    """A fatal answer (a login page) in one window: the run raises it, no later window is
    requested, and a rerun resumes: the windows before it are not read again, it and the
    rest are, and the tables equal the truth."""
    sim, windows = slow_sim, planned_windows()
    faults = {
        "rules": [  # the first rule that fires wins
            {"kind": "html", "rate": 1, "count": 1, "match": "commits.list.repository"},
            {"kind": "slow", "rate": 1, "slow_seconds": LATENCY},
        ]
    }
    loader = Loader(sim, tmp_path)
    before = sim.requests()["total"]
    with pytest.raises(Exception) as caught:
        backfill(loader, FaultAfterWindows(sim, 1, faults))
    error: BaseException | None = caught.value
    while error is not None and not isinstance(error, FatalApiError):
        error = getattr(error, "exception", None) or error.__cause__
    assert isinstance(error, FatalApiError) and error.kind == "not_json"
    log = log_since(sim, before)
    failing = next(window_of(e, windows) for e in log if e["fault"] == "html")
    assert failing is not None
    assert failing == 2
    touched = {own_window(e, windows) for e in log} - {None}
    assert touched == {0, 1, 2}

    sim.clear_faults()
    again = sim.requests()["total"]
    result = backfill(loader)
    resumed = {i for i, w in enumerate(result.windows) if w.resumed}
    assert resumed == {0, 1}
    reread = {own_window(e, windows) for e in log_since(sim, again)} - {None}
    assert reread == set(range(2, len(windows)))
    assert_tables_equal_truth(
        loader.db_file, sim, "cloud", required=(SINCE, CLOCK), allowed=(SINCE - SLACK, CLOCK)
    )
