"""Nightly runs: with nothing new nothing changes and only the look-back is read; after the
clock moves, late commits, state changes and new items are loaded."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.cloud.conftest import Loaded
from tests.cloud.request_log import (
    Cursors,
    assert_reads_only_look_back,
    assert_request_parameters,
    refreshed_periods,
)
from tests.cloud.truth import (
    ALL_TABLES,
    LOOKBACK,
    START,
    Truth,
    Window,
    check_change_statistics,
    check_everything,
    check_pr_statistics,
    instant,
)
from tests.support.helpers import DAY, GRAIN, count, from_ms, period_floor, run_with_log, select
from tests.support.loader import DESTINATIONS, Loader


def test_second_run_with_nothing_new_changes_nothing(loaded: Loaded) -> None:
    """Every table's full contents are identical after a second run at the same clock."""
    assert set(loaded.second_tables) == ALL_TABLES
    for table, rows in loaded.first_tables.items():
        assert loaded.second_tables[table] == rows, table


def test_second_run_reads_only_the_look_back(loaded: Loaded) -> None:
    """The nightly run starts each scope at its cursor minus the look-back, not at the start."""
    assert_reads_only_look_back(
        loaded.second_log,
        loaded.cursors,
        START,
        loaded.truth.workspace,
        refreshed_periods(loaded.truth, loaded.cursors, loaded.grain),
        loaded.grain,
    )
    assert len(loaded.second_log) < len(loaded.first_log)
    if loaded.grain == "day":  # a statistics request per day of the range, against 3 or 4
        assert len(loaded.second_log) < len(loaded.first_log) / 3


@pytest.mark.parametrize(
    ("destination", "grain"), [*((d, GRAIN) for d in DESTINATIONS), ("duckdb", "day")]
)
def test_incremental_load_after_advance(
    make_sim: Any, tmp_path: Path, destination: str, grain: str
) -> None:
    """After a day of activity the next run catches late commits, state changes, new items
    and the new user and repository, and every table equals the truth again; statistics by
    month (the default) or by day."""
    grained = {} if grain == GRAIN else {"statistics_period": grain}
    sim = make_sim(edition="cloud")
    loader = Loader(sim, tmp_path, destination)
    old = Truth.read(sim)
    loader.load(**grained)
    cursors = Cursors.read(loader, old.clock, old.workspace)
    before = {h for (h,) in select(loader, "cloud_workspace_commits", ("hash",))}
    answer = sim.advance(days=1)
    truth = Truth.read(sim)
    assert truth.clock == old.clock + DAY
    result, log = run_with_log(sim, loader, now=truth.clock, **grained)
    assert not result.report.skips
    window = Window(START, truth.clock)

    late = [truth.commit(sha) for sha in answer["late_commits"]]
    assert late and all(instant(c) < old.clock for c in late)  # authored before the old clock
    assert not {c["hash"] for c in late} & before
    # a plain date cursor would drop them: they are older than their repository's cursor
    assert any(
        datetime.fromisoformat(c["date"]).replace(tzinfo=UTC)
        < cursors.commits[("repository", c["repository"]["slug"])]
        for c in late
    )
    for table in ("cloud_commits", "cloud_workspace_commits"):
        loaded_hashes = {h for (h,) in select(loader, table, ("hash",))}
        assert {c["hash"] for c in late} <= loaded_hashes, table
    user_hashes = {h for (h,) in select(loader, "cloud_user_commits", ("hash",))}
    assert {c["hash"] for c in late if c["_sim"]["user"]} <= user_hashes

    assert answer["pull_request_changes"]
    # A new PR whose updated date is exactly the clock lies outside [since, until): the next
    # run's look-back reads it (check_everything below holds it to the same rule).
    updated = {
        (p["destination"]["repository"]["slug"], p["id"]): from_ms(p["_sim"]["updated_ms"])
        for p in truth.prs
    }
    new_prs = [tuple(k) for k in answer["new_pull_requests"] if updated[tuple(k)] < truth.clock]
    assert new_prs
    for table in (
        "cloud_pull_requests",
        "cloud_workspace_pull_requests",
        "cloud_user_pull_requests",
    ):
        states = {
            (s, i): st for s, i, st in select(loader, table, ("repository_slug", "id", "state"))
        }
        for slug, number, state in answer["pull_request_changes"]:
            assert states[(slug, number)] == state, (table, slug, number)
        for key in new_prs:
            assert states[key] == "OPEN", (table, key)
    assert answer["new_users"] and answer["new_repositories"]
    new_repo = answer["new_repositories"][0]
    assert count(loader, "cloud_commits", f"WHERE repository_slug = '{new_repo}'") == 3

    check_everything(loader, truth, window)
    # Statistics: every period equals the truth again — the re-read periods (and the new
    # one), and the older creation periods of pull requests that changed state (read again
    # for them).
    old_periods = {
        period_floor(from_ms(p["_sim"]["created_ms"]), grain)
        for p in truth.prs
        if (p["destination"]["repository"]["slug"], p["id"])
        in {(slug, number) for slug, number, _ in answer["pull_request_changes"]}
    }
    reread = period_floor(old.clock - LOOKBACK, grain)
    assert [d for d in old_periods if d < reread], "no changed pull request older than look-back"
    check_pr_statistics(loader, truth, window, grain=grain)
    check_change_statistics(loader, truth, window, from_day=reread, grain=grain)
    assert_reads_only_look_back(
        log, cursors, START, truth.workspace, refreshed_periods(truth, cursors, grain), grain
    )
    assert_request_parameters(log, truth.clock, grain)
