"""The self-hosted CSV exports in a backfill: one export window for a year, read after the
other windows, the same rows whether it runs in the same process or in a rerun.

Real simulators over HTTP, real DuckDB files; what the host saw comes from its request log.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from simulator import Simulator
from tests.extractor.conftest import Loader
from tests.extractor.test_backfill import CLOCK, SINCE, backfill, dated, snapshot

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
