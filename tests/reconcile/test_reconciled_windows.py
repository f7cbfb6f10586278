"""What reconciliation finds, the next run repairs: a backfill window is finished only once it
reconciles, a host that keeps mismatching is read a bounded number of times, a window whose
reconciliation never ran is reconciled by the next backfill, and a nightly whose
reconciliation fails keeps its cursors before the range that differs.

The fault is `first_page` (a later page answers the first page's items under its own
envelope: status 200, valid JSON, the envelope moves on), which only a reconciliation against
the API's statistics can notice. Real simulators over HTTP, the real command line on both
destinations, every table compared with the simulator's ground truth.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pipelines.runs.backfill import run_backfill
from tests.runs.test_backfill import CLOCK, SINCE, cli_env
from tests.support.loader import Loader
from tests.support.repairs import assert_equals_truth, dated, log_since, report_of, run

# the first three later pages of repository commit lists answer page 1's items; one scope at
# a time, so which lists they hit (and that each loses more than the cloud's edge tolerance)
# does not depend on threads
LISTS = "commits.list.repository"
FIRST_PAGES = {"rules": [{"kind": "first_page", "rate": 1, "count": 3, "match": LISTS}]}
ALWAYS = {"rules": [{"kind": "first_page", "rate": 1, "match": LISTS}]}
BACKFILL = (
    "backfill",
    "--since",
    SINCE.date().isoformat(),
    "--until",
    CLOCK.isoformat(),
    "--window-days",
    "30",
    "--page-size",
    "50",
    "--concurrency",
    "1",
)
DIFFERS = re.compile(
    r"^window \[(\S+) \.\. (\S+)\) differs from the API's statistics \((.+)\): recorded "
    r"unfinished, the next backfill reads it again \(read (\d) of at most 3\)$"
)
GIVEN_UP = re.compile(
    r"^window \[(\S+) \.\. (\S+)\) still differs from the API's statistics after 3 reads "
    r"\((.+)\): the host's lists disagree with its own statistics; the window is kept as it "
    r"is and not read again"
)


def windows_of(pattern: re.Pattern[str], stdout: str) -> dict[tuple[datetime, datetime], Any]:
    """The windows `pattern`'s lines name, with their other groups."""
    found = {}
    for line in stdout.splitlines():
        match = pattern.match(line)
        if match:
            span = (datetime.fromisoformat(match[1]), datetime.fromisoformat(match[2]))
            found[span] = match.groups()[2:]
    return found


def repository_lists_read(log: list[dict[str, Any]]) -> set[datetime]:
    """The ends of the windows whose repository-level commit lists were asked."""
    return {dated(e)[1] for e in log if e["endpoint"] == "commits.list.repository"}


@pytest.mark.parametrize("edition", ["cloud", "server"])
def test_a_window_that_mismatched_is_read_again_by_the_plain_rerun(
    make_sim: Any, tmp_path: Path, destination: str, edition: str
) -> None:
    """A backfill whose repository lists lose pages to the host exits 5 and records each
    window that differs unfinished (one line each: the window, the measure, read 1 of at
    most 3). The fault gone, the same command reads those windows again, and only those,
    reconciles them, exits 0, and every table equals the truth; a third run reads no list."""
    sim = make_sim(edition=edition)
    sim.set_faults(FIRST_PAGES)
    faulty = run(tmp_path, sim, destination, *BACKFILL)
    assert faulty.returncode == 5, faulty.stdout + faulty.stderr
    differing = windows_of(DIFFERS, faulty.stdout)
    assert differing, faulty.stdout
    assert all(reads == "1" for _, reads in differing.values())
    report = report_of(tmp_path)
    assert {
        (datetime.fromisoformat(w["start"]), datetime.fromisoformat(w["end"]))
        for w in report["windows_reconciled"]
        if w["verdict"] == "mismatch"
    } == set(differing)
    state = run(tmp_path, sim, destination, "state")
    assert f"backfill windows the next backfill reads again (a mismatch): {len(differing)}" in (
        state.stdout
    ), state.stdout

    sim.clear_faults()
    before = sim.requests()["total"]
    rerun = run(tmp_path, sim, destination, *BACKFILL)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert (
        f"backfill: {len(differing)} windows read again: their reconciliation found a mismatch "
        "in an earlier run" in rerun.stdout.splitlines()
    ), rerun.stdout
    assert repository_lists_read(log_since(sim, before)) == {end for _, end in differing}
    assert "reconciliation with the API's statistics: PASSED" in rerun.stdout
    assert not windows_of(DIFFERS, rerun.stdout)
    assert_equals_truth(Loader(sim, tmp_path, destination), sim, SINCE)

    before = sim.requests()["total"]
    third = run(tmp_path, sim, destination, *BACKFILL)
    assert third.returncode == 0, third.stdout + third.stderr
    assert not repository_lists_read(log_since(sim, before))


def test_a_host_that_keeps_mismatching_is_read_three_times(
    make_sim: Any, tmp_path: Path, destination: str
) -> None:
    """A host whose lists always lose the same pages: the window that differs is read three
    times (exit 5 each time, the count in the state and the report), then kept as it is with
    one line naming it and the measure; the fourth run reads nothing of it, exits 0 and
    notes it; `state` shows it given up."""
    sim = make_sim(edition="cloud")
    sim.set_faults(ALWAYS)
    first = run(tmp_path, sim, destination, *BACKFILL)
    assert first.returncode == 5, first.stdout + first.stderr
    differing = windows_of(DIFFERS, first.stdout)
    assert differing
    for reads in (2, 3):
        before = sim.requests()["total"]
        again = run(tmp_path, sim, destination, *BACKFILL)
        assert again.returncode == 5, again.stdout + again.stderr
        assert repository_lists_read(log_since(sim, before)) == {end for _, end in differing}
        verdicts = report_of(tmp_path)["windows_reconciled"]
        assert {w["reads"] for w in verdicts if w["verdict"] != "passed"} == {reads}
        if reads == 2:
            assert windows_of(DIFFERS, again.stdout).keys() == differing.keys()
            assert all(r == "2" for _, r in windows_of(DIFFERS, again.stdout).values())
        else:
            given_up = windows_of(GIVEN_UP, again.stdout)
            assert given_up.keys() == differing.keys(), again.stdout
            assert not windows_of(DIFFERS, again.stdout)
            assert {w["verdict"] for w in verdicts if w["verdict"] != "passed"} == {"given_up"}
    before = sim.requests()["total"]
    fourth = run(tmp_path, sim, destination, *BACKFILL)
    assert fourth.returncode == 0, fourth.stdout + fourth.stderr
    assert not repository_lists_read(log_since(sim, before))
    assert (
        f"note: {len(differing)} windows differ from the API's statistics and are no longer "
        "read (see `repo-analytics state`)" in fourth.stdout.splitlines()
    )
    state = run(tmp_path, sim, destination, "state")
    assert state.stdout.count(": given up, not read again after 3 of at most 3 reads (") == len(
        differing
    ), state.stdout


def test_a_window_whose_reconciliation_never_ran_is_reconciled_by_the_next_backfill(
    make_sim: Any, tmp_path: Path, destination: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backfill that stops after its last window's load, before reconciling (here: run
    in-process, as the command runs it, without the reconciliation that follows): its
    windows are finished, their reconciliation pending. The next backfill reads none of
    them, reconciles them all, finds the window that differs and records it unfinished
    (exit 5); the one after reads it again and exits 0 with every table equal to the truth."""
    sim = make_sim(edition="server")
    sim.set_faults(FIRST_PAGES)
    loader = Loader(sim, tmp_path, destination)
    for name, value in cli_env(sim).items():  # the settings as the command reads them
        if name.startswith("SOURCES__"):
            monkeypatch.setenv(name, value)
    stopped = run_backfill(
        loader.pipeline(),
        SINCE.date().isoformat(),
        CLOCK.isoformat(),
        30,
        reconcile=True,
        page_size=50,
        concurrency=1,
    )
    sim.clear_faults()
    windows = len(stopped.windows)
    assert [w.resumed for w in stopped.windows] == [False] * windows

    before = sim.requests()["total"]
    checked = run(tmp_path, sim, destination, *BACKFILL)
    assert checked.returncode == 5, checked.stdout + checked.stderr
    assert (
        f"backfill: {windows} windows an earlier run read are reconciled now (its "
        "reconciliation never ran)" in checked.stdout.splitlines()
    ), checked.stdout
    assert f"backfill done: {windows} windows, {windows} already finished before" in checked.stdout
    assert not repository_lists_read(log_since(sim, before))
    differing = windows_of(DIFFERS, checked.stdout)
    assert differing, checked.stdout

    before = sim.requests()["total"]
    repaired = run(tmp_path, sim, destination, *BACKFILL)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert repository_lists_read(log_since(sim, before)) == {end for _, end in differing}
    assert_equals_truth(loader, sim, SINCE)


def test_a_nightly_that_mismatched_keeps_its_cursors_before_the_range(
    make_sim: Any, tmp_path: Path, destination: str
) -> None:
    """A nightly `load` whose repository lists lose pages exits 5 and holds its cursors at the
    start of the range it reconciled. The fault gone, the next nightly, with a look-back of
    one day only (from the cursors the first run would have stored, it would not reach
    back), reads the whole range again: exit 0, every list table equal to the truth."""
    sim = make_sim(edition="cloud")
    sim.set_faults({"rules": [{"kind": "first_page", "rate": 1, "count": 4, "match": LISTS}]})
    start = CLOCK - timedelta(days=10)
    nightly = ("load", "--end-date", CLOCK.isoformat(), "--page-size", "5", "--concurrency", "1")
    first = run(
        tmp_path,
        sim,
        destination,
        *nightly,
        "--start-date",
        start.isoformat(),
        "--lookback-days",
        "10",
    )
    assert first.returncode == 5, first.stdout + first.stderr
    pattern = r"^cursors held: (\d+) scopes keep their cursor at (\S+), "
    held = re.search(pattern, first.stdout, re.M)
    assert held, first.stdout
    assert datetime.fromisoformat(held[2]) == start
    assert report_of(tmp_path)["held_cursors"] == int(held[1]) > 0

    sim.clear_faults()
    before = sim.requests()["total"]
    second = run(
        tmp_path,
        sim,
        destination,
        *nightly,
        "--start-date",
        start.isoformat(),
        "--lookback-days",
        "1",
    )
    assert second.returncode == 0, second.stdout + second.stderr
    assert "cursors held" not in second.stdout
    log = log_since(sim, before)
    since = {dated(e)[0] for e in log if e["endpoint"] == "pull-requests.list.repository"}
    # from the held cursor less its look-back, never before the start
    assert since == {start}
    assert_equals_truth(Loader(sim, tmp_path, destination), sim, start, statistics=False)
