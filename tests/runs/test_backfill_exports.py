"""The self-hosted CSV exports in a backfill: one export window for a year, read after the
other windows, the same rows whether it runs in the same process or in a rerun.

Real simulators over HTTP, real DuckDB files; what the host saw comes from its request log.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from simulator import Simulator
from tests.runs.test_backfill import (
    CLOCK,
    SINCE,
    backfill,
    cli_env,
    dated,
    run_cli,
    snapshot,
    window_lines,
)
from tests.support.loader import Loader

EXPORT_TABLES = ("server_commit_exports", "server_pull_request_exports")
# a month: short enough that some users show in the pull-request lists only
MONTH = datetime(2026, 5, 2, tzinfo=UTC)


def test_exports_are_read_once_for_the_backfill(make_sim: Any, tmp_path: Path) -> None:
    """Four 30-day windows: every list is read per window, every CSV export once per scope
    over the whole backfill (an export answers its range at once), in a window of its own
    after the others; the summary counts it apart."""
    sim: Simulator = make_sim(edition="server")
    result, log = backfill(Loader(sim, tmp_path), SINCE, CLOCK)
    assert len(result.windows) == 4
    assert [(w.start, w.end, w.resumed) for w in result.exports] == [(SINCE, CLOCK, False)]
    exports = [e for e in log if ".csv." in e["endpoint"]]
    assert exports and {dated(e) for e in exports} == {(SINCE, CLOCK)}
    per_scope = [(e["endpoint"], e["path"]) for e in exports]
    assert len(per_scope) == len(set(per_scope)), "a scope's export was asked twice"
    users = {e["path"] for e in exports if e["endpoint"].endswith(".user")}
    listed = {
        e["path"].replace("/export/csv", "") for e in log if e["endpoint"].endswith("list.user")
    }
    assert users and {p.replace("/export/csv", "") for p in users} == listed


def test_a_rerun_export_window_reads_what_a_whole_run_reads(make_sim: Any, tmp_path: Path) -> None:
    """The exports fail (a login page) after every other window finished; the rerun reads
    only the export window, in a new process state, and its export tables equal those of a
    backfill that ran through: the same users and repositories, found in the lists of every
    family the backfill reads (the export window reads no list of its own)."""
    sim: Simulator = make_sim(edition="server")
    whole, rerun = Loader(sim, tmp_path / "whole"), Loader(sim, tmp_path / "rerun")
    backfill(whole, MONTH, CLOCK, 10)
    sim.set_faults({"rules": [{"kind": "html", "rate": 1, "match": ".csv."}]})
    with pytest.raises(Exception, match="instead of CSV"):
        backfill(rerun, MONTH, CLOCK, 10)
    sim.clear_faults()
    result, _ = backfill(rerun, MONTH, CLOCK, 10)
    assert all(w.resumed for w in result.windows)
    assert [w.resumed for w in result.exports] == [False]
    expected, got = snapshot(whole.db_file), snapshot(rerun.db_file)
    for table in EXPORT_TABLES:
        assert expected[table], table
        assert got[table] == expected[table], table


def test_the_command_shows_the_export_window_apart(make_sim: Any, tmp_path: Path) -> None:
    """`repo-analytics backfill` of a month in 10-day windows: three window lines, then the
    export window's line, which says so; the summary counts it apart, and the run report
    lists it under `backfill_exports` with its own requests (the exports, nothing else)."""
    sim: Simulator = make_sim(edition="server")
    done = run_cli(
        tmp_path,
        cli_env(sim),
        "backfill",
        "--since",
        "2026-05-02",
        "--until",
        "2026-06-01",
        "--window-days",
        "10",
        "--no-reconcile",
    )  # no terminal: the default progress prints a line per window
    assert done.returncode == 0, done.stdout + done.stderr
    lines = window_lines(done.stdout)
    assert sorted(lines) == [1, 2, 3, 4]
    assert [
        what.endswith("; the CSV exports") for _, _, what in (lines[n] for n in sorted(lines))
    ] == [False, False, False, True]
    assert lines[4][:2] == ("2026-05-02", "2026-06-01")
    assert (
        "backfill done: 3 windows, 0 already finished before; CSV exports: 1 windows, "
        "0 already finished before"
    ) in done.stdout
    report = json.loads((tmp_path / "data.report.json").read_text())
    assert [w["window"] for w in report["backfill_exports"]] == [
        ["2026-05-02T00:00:00+00:00", "2026-06-01T00:00:00+00:00"]
    ]
    resources = report["backfill_exports"][0]["report"]["resources"]
    assert resources and all("exports" in name for name in resources), resources
