"""The figures a run reports: each window's own duration, waits as wall-clock time beside
their sum over threads, and the demo's commit times and window bounds as they are.

Real simulators over HTTP (latency on every answer, 429s with Retry-After), real DuckDB files,
the real `repo-analytics` command in subprocesses. Durations are only bounded by the run's
own wall time measured here and by what the simulator saw, never compared with a speed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from simulator import SimConfig, Simulator
from tests.runs.test_backfill import CLI, cli_env, log_since, run_cli, window_lines
from tests.runs.test_backfill_windows import LATENCY, backfill, planned_windows, window_of
from tests.support import FIXED_NOW
from tests.support.loader import Loader

WAITED = re.compile(r"retries, (\d+\.\d) s waited, (\d+\.\d) s;")


@pytest.fixture
def slow_sim() -> Iterator[Simulator]:
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        sim.set_faults({"rules": [{"kind": "slow", "rate": 1, "slow_seconds": LATENCY}]})
        yield sim


def test_each_window_reports_its_own_duration(slow_sim: Simulator, tmp_path: Path) -> None:
    """Five windows, read one after another, each loading while the next is read: each
    window's `duration_seconds` runs from its start to the end of its load, so it is at least
    the time its requests needed (each answer takes LATENCY; at most `concurrency` are open
    at once) and at most the backfill's wall time, and a window has ended before the window
    after the next one starts (one load under way at most). A duration measured to when the
    report is written would count the first windows again in every later one."""
    windows, concurrency = planned_windows(), 2
    before = slow_sim.requests()["total"]
    began, began_epoch = time.monotonic(), time.time()
    result = backfill(Loader(slow_sim, tmp_path), concurrency=concurrency)
    wall = time.monotonic() - began
    reports = [w.result.report for w in result.windows if w.result]
    assert len(reports) == len(windows) == 5

    requests: dict[int, int] = {}
    for entry in log_since(slow_sim, before):
        index = window_of(entry, windows)
        if index is not None:
            requests[index] = requests.get(index, 0) + 1
    durations = [r.as_dict()["duration_seconds"] for r in reports]
    for index, duration in enumerate(durations):
        assert requests[index] * LATENCY / concurrency <= duration <= wall, (index, durations)
    spans = [
        (r.started - began_epoch, r.started - began_epoch + r.duration_seconds) for r in reports
    ]
    for (start, _), (next_start, _) in zip(spans, spans[1:], strict=False):
        assert start < next_start, spans
    for (_, end), (later_start, _) in zip(spans, spans[2:], strict=False):
        assert end <= later_start, spans  # landed before the window after the next is read
    assert result.totals()["duration_seconds"] <= wall


def test_waits_are_wall_clock_time_beside_their_sum(tmp_path: Path) -> None:
    """429s with Retry-After 1 s hold every thread of every window (one gate per host), so
    several threads wait through the same second. `backfill` of five windows with
    window lines (no terminal): each window line's seconds waited are at most the window's
    own seconds; in the run report each window's `wait_seconds_wall` is at most its
    `duration_seconds` and its `wait_seconds_sum`, and the backfill's wall-clock waits are
    at most its wall time while the sum over threads is more than them."""
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        sim.set_faults(
            {
                "rules": [  # the first rule that fires wins
                    {
                        "kind": "429",
                        "rate": 1,
                        "count": 3,
                        "retry_after": 1,
                        "match": "commits.list.repository",
                    },
                    {"kind": "slow", "rate": 1, "slow_seconds": LATENCY},
                ]
            }
        )
        began = time.monotonic()
        done = run_cli(
            tmp_path,
            cli_env(sim),
            "backfill",
            "--since",
            "2026-03-01",
            "--until",
            "2026-06-01",
            "--window-days",
            "20",
            "--levels",
            "repository",
            "--resources",
            "commits,pull_requests",
            "--no-reconcile",
        )
        wall = time.monotonic() - began
        retried = [e for e in sim.requests()["log"] if e["fault"] == "429"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(retried) == 3

    lines = window_lines(done.stdout)
    assert sorted(lines) == [1, 2, 3, 4, 5]
    for number, (_, _, what) in lines.items():
        match = WAITED.search(what)
        assert match, what
        assert float(match[1]) <= float(match[2]) + 0.1, (number, what)

    report = json.loads((tmp_path / "data.report.json").read_text(encoding="utf-8"))
    windows = [w["report"] for w in report["backfill"]]
    for each in windows:
        assert each["wait_seconds_wall"] <= each["duration_seconds"] <= wall, each
        assert each["wait_seconds_wall"] <= each["wait_seconds_sum"] + 0.001, each
        for counts in each["resources"].values():
            assert counts["wait_seconds_wall"] <= counts["wait_seconds_sum"] + 0.001, counts
    totals = report["backfill_totals"]
    assert 1.0 <= totals["wait_seconds_wall"] <= totals["duration_seconds"] <= wall, totals
    assert totals["wait_seconds_sum"] == pytest.approx(
        sum(w["wait_seconds_sum"] for w in windows), abs=0.01
    )
    assert totals["wait_seconds_sum"] > totals["wait_seconds_wall"] + 0.5, totals


def test_demo_prints_local_commit_times_and_window_times(tmp_path: Path) -> None:
    """The cloud demo names its pipeline's folder with dlt's command to inspect it; the commit
    times it prints are the authors' local times, without a
    zone offset; each window line's bounds are the window's own (as the run report has
    them): a date when at midnight, else with the time of day, so no window prints as
    empty `[d .. d)`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOURCES__")}
    done = subprocess.run(
        [str(CLI), "demo", "--edition", "cloud", "--size", "tiny"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    folder = (tmp_path / ".repo-analytics-demo" / "pipelines").resolve()
    assert (
        f"pipeline repo_analytics_demo in {folder} (inspect it: dlt pipeline "
        f"--pipelines-dir {folder} repo_analytics_demo info | trace | show)"
    ) in done.stdout.splitlines(), done.stdout
    spans = [line for line in done.stdout.splitlines() if line.startswith("commits from ")]
    assert len(spans) == 1, done.stdout
    assert "+00:00" not in spans[0] and "no zone" in spans[0], spans[0]
    times = re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[+-]\d\d:?\d\d)?", spans[0])
    assert len(times) == 2 and all(len(t) == 19 for t in times), spans[0]

    report = json.loads((tmp_path / "demo.report.json").read_text(encoding="utf-8"))
    bounds = [tuple(datetime.fromisoformat(t) for t in w["window"]) for w in report["backfill"]]
    lines = window_lines(done.stdout)
    assert sorted(lines) == list(range(1, len(bounds) + 1))
    for number, (start, end, _) in lines.items():
        assert start != end, lines[number]
        shown = tuple(printed(text) for text in (start, end))
        assert shown == bounds[number - 1], (lines[number], bounds[number - 1])


def printed(text: str) -> datetime:
    """A printed window bound: a date is its midnight (the demo runs in UTC)."""
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
