"""Nightly runs: with nothing new nothing changes and only the look-back is read; after the
clock moves, late commits arrive and pull requests change, people lists included."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pipelines.runs.load import LoadResult
from simulator import SimConfig, Simulator
from tests.selfhosted.conftest import LOADS, Loaded
from tests.selfhosted.request_log import (
    assert_request_parameters,
    check_exports_equal_served,
    scope_of_path,
    wire_time,
)
from tests.selfhosted.truth import (
    ALL_TABLES,
    DAY,
    KINDS,
    LATE_START,
    LEVEL_TABLES,
    LEVELS,
    LOOKBACK,
    START,
    Truth,
    Window,
    at,
    check_list,
    check_parents,
    check_people,
    check_primary_keys,
    check_statistics,
    expected_commit_statistics,
    expected_pr_statistics,
    expected_scopes,
    in_scope,
    pr_statistics_rows,
)
from tests.support import FIXED_NOW
from tests.support.helpers import (
    GRAIN,
    as_utc,
    assert_no_list_request_twice,
    count,
    from_ms,
    period_floor,
    period_next,
    run_with_log,
    select,
)
from tests.support.loader import Loader


def test_second_run_changes_nothing(loaded: Loaded) -> None:
    """Identical contents after a second run at the same clock (an export row's window
    columns say which window last delivered it, so they are left out)."""
    assert set(loaded.second_tables) == ALL_TABLES
    for table, rows in loaded.first_tables.items():
        assert loaded.second_tables[table] == rows, table


def test_second_run_reads_only_the_look_back(loaded: Loaded) -> None:
    """A nightly run starts each list scope at its newest loaded cursor minus the look-back,
    the global lists too (discovery reads them from there, and the global resources take
    its pages: no list page is asked twice). Older pull-request statistics are read one
    period at a time, and only for the creation periods of pull requests the run's lists
    read again (their counts by state may have changed)."""
    checked = refreshed = 0
    grain = loaded.grain
    prefix = loaded.sim.info()["api_prefix"]
    oldest_read = (
        min(c for (kind, _, _), c in loaded.cursors.items() if kind == "pull-requests") - LOOKBACK
    )
    created_periods = {
        period_floor(from_ms(p["createdDate"]), grain)
        for p in loaded.truth.prs
        if from_ms(p["updatedDate"]) >= oldest_read
    }
    horizon = period_floor(loaded.truth.clock - LOOKBACK, grain)
    for entry in loaded.second_log:
        kind, op, _ = entry["endpoint"].split(".")
        since = wire_time(entry["params"]["sinceDate"])
        if op != "list":  # statistics and exports: their cursor is the last run's end
            if since < horizon:
                assert op == "statistics" and kind == "pull-requests", entry
                assert wire_time(entry["params"]["untilDate"]) == period_next(since, grain), entry
                assert since in created_periods, entry
                refreshed += 1
                continue
            assert since >= horizon, entry
            continue
        level, scope = scope_of_path(entry["path"], prefix)
        bound = max(START, loaded.cursors[(kind, level, scope)] - LOOKBACK)
        assert since == bound.replace(microsecond=0), (entry, bound)
        checked += 1
    assert checked > 10 and refreshed > 0
    assert_no_list_request_twice(loaded.second_log)
    assert len(loaded.second_log) < len(loaded.first_log)
    if grain == "day":  # a statistics request per day of the range, against 3 or 4
        assert len(loaded.second_log) < len(loaded.first_log) / 3


def change_people(sim: Simulator, loaded: Window, when: datetime) -> dict[str, tuple[str, int]]:
    """On the host: of the PRs loaded before (updated inside `loaded`), one loses all its
    reviewers, another keeps only its first, a third keeps only its first participant; each
    is touched (updated date `when`)."""
    world = sim.app.world
    low, high = (int(moment.timestamp() * 1000) for moment in (loaded.start, loaded.clock))
    with world.lock:
        prs_before = [p for p in world.prs if low <= p.updated_ms < high]
        emptied = next(p for p in prs_before if len(p.reviewers) >= 2)
        shortened = next(p for p in prs_before if len(p.reviewers) >= 2 and p is not emptied)
        fewer = next(
            p for p in prs_before if len(p.participants) >= 2 and p not in (emptied, shortened)
        )
        emptied.reviewers = []
        shortened.reviewers = shortened.reviewers[:1]
        fewer.participants = fewer.participants[:1]
        for pr in (emptied, shortened, fewer):
            world.touch_pull_request(pr, int(when.timestamp() * 1000))
    return {
        name: (pr.repo, pr.id)
        for name, pr in (("emptied", emptied), ("shortened", shortened), ("fewer", fewer))
    }


@dataclass
class Advanced:
    sim: Simulator
    loader: Loader
    old: Truth
    truth: Truth
    answer: dict[str, Any]
    changed: dict[str, tuple[str, int]]
    before: set[str]  # commit ids loaded before the advance
    people_before: dict[str, Counter[tuple[str, int]]]
    first_log: list[dict[str, Any]]
    result: LoadResult
    log: list[dict[str, Any]]
    grain: str  # the statistics_period of both runs


def people_counts(loader: Loader) -> dict[str, Counter[tuple[str, int]]]:
    return {
        which: Counter(select(loader, f"server_pull_request_{which}", ("repository_slug", "id")))
        for which in ("reviewers", "participants")
    }


@contextmanager
def edition_variable(edition: str | None) -> Iterator[None]:
    """`SOURCES__REPO_ANALYTICS__EDITION` set to `edition` for the block (None: unset)."""
    name = "SOURCES__REPO_ANALYTICS__EDITION"
    before = os.environ.pop(name, None)
    if edition is not None:
        os.environ[name] = edition
    try:
        yield
    finally:
        os.environ.pop(name, None)
        if before is not None:
            os.environ[name] = before


@pytest.fixture(scope="module", params=LOADS)
def advanced(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Advanced]:
    """A tiny host loaded, advanced a day (late commits, state changes, a new user and
    repository) with three PRs' reviewer or participant lists shortened, loaded again, into
    each destination with its default settings (and into DuckDB by day); into Delta tables
    with the edition set by its variable, not by an argument."""
    destination, grain = request.param
    grained: dict[str, Any] = {} if grain == GRAIN else {"statistics_period": grain}
    if destination == "parquet":  # the edition from config, as a user's runs have it
        grained["edition"] = None
    with (
        Simulator(SimConfig(edition="server", size="tiny", now=FIXED_NOW)) as sim,
        edition_variable("server" if destination == "parquet" else None),
    ):
        loader = Loader(sim, Path(tmp_path_factory.mktemp("server_advance")), destination)
        old = Truth.read(sim)
        _, first_log = run_with_log(sim, loader, start_date=LATE_START.isoformat(), **grained)
        before = {i for (i,) in select(loader, "server_commits_global", ("id",))}
        people_before = people_counts(loader)
        answer = sim.advance(days=1)
        clock = datetime.fromtimestamp(sim.info()["now"], UTC)
        changed = change_people(sim, Window(LATE_START, old.clock), clock - timedelta(hours=1))
        truth = Truth.read(sim)
        result, log = run_with_log(
            sim, loader, now=clock, start_date=LATE_START.isoformat(), **grained
        )
        yield Advanced(
            sim,
            loader,
            old,
            truth,
            answer,
            changed,
            before,
            people_before,
            first_log,
            result,
            log,
            grain,
        )


def test_incremental_load_after_advance(advanced: Advanced) -> None:
    """After a day of activity the next run loads late commits, state changes, new items, the
    new user and repository; no duplicates; every table equals the truth again."""
    a = advanced
    assert a.truth.clock == a.old.clock + DAY
    assert not a.result.report.skips
    window = Window(LATE_START, a.truth.clock)
    late = [c for c in a.truth.commits if c["id"] in set(a.answer["late_commits"])]
    assert late and all(at(c) < a.old.clock for c in late)
    assert not {c["id"] for c in late} & a.before
    for level in LEVELS:
        ids = {i for (i,) in select(a.loader, LEVEL_TABLES["commits"][level], ("id",))}
        assert {c["id"] for c in late if level != "user" or c["_sim"]["user"]} <= ids, level
    states = {
        (s, i): st
        for s, i, st in select(
            a.loader, "server_pull_requests_global", ("repository_slug", "id", "state")
        )
    }
    assert a.answer["pull_request_changes"]
    for slug, number, state in a.answer["pull_request_changes"]:
        assert states[(slug, number)] == state
    assert a.answer["new_users"] and a.answer["new_repositories"]
    new_repo = a.answer["new_repositories"][0]
    assert count(a.loader, "server_commits", f"WHERE repository_slug = '{new_repo}'") == 3
    assert (
        count(
            a.loader, "server_commits_user", f"WHERE read_for_user = '{a.answer['new_users'][0]}'"
        )
        >= 1
    )

    scopes = expected_scopes(a.truth, window)
    for kind in KINDS:
        for level in LEVELS:
            check_list(a.loader, a.truth, window, kind, level, scopes)
    check_parents(a.loader, a.truth, window)
    check_primary_keys(a.loader)
    # Late commits are authored inside the look-back: every commit statistics period is right
    # again. PR statistics count PRs by creation period and current state: the creation
    # periods of the PRs this run read (they changed) are read again, also before the
    # look-back and before `start_date` (a row of its own there), so every period is right
    # again too.
    grain = a.grain
    check_statistics(
        a.loader,
        "server_commit_statistics",
        expected_commit_statistics(a.truth, window, scopes, grain),
    )
    older = {
        (level, scope, as_utc(low))
        for level, scope, low in select(
            a.loader, "server_pull_request_statistics", ("level", "scope", "period_start")
        )
        if as_utc(low) < window.start
    }
    changed = {(slug, number) for slug, number, _ in a.answer["pull_request_changes"]}
    assert {
        (level, scope, period_floor(from_ms(p["createdDate"]), grain))
        for p in a.truth.prs
        if (p["toRef"]["repository"]["slug"], p["id"]) in changed
        and from_ms(p["createdDate"]) < window.start
        for level, names in scopes.items()
        for scope in names
        if in_scope(level, scope, p)
    } <= older
    check_statistics(
        a.loader,
        "server_pull_request_statistics",
        {
            **expected_pr_statistics(a.truth, window, scopes, grain),
            **pr_statistics_rows(a.truth, window, older, grain),
        },
    )
    # re-fetched now, the first run's windows and this run's give today's rows
    check_exports_equal_served(a.loader, a.sim, a.first_log + a.log, a.sim.basic_auth)
    assert_request_parameters(a.log, a.truth.clock, grain=grain)


def test_reread_pull_requests_replace_their_people(advanced: Advanced) -> None:
    """Reviewers and participants of a re-read PR replace the old lists: no stale position
    remains (the PR whose reviewers all left is the next test's)."""
    a = advanced
    emptied = a.changed["emptied"]
    before, after = a.people_before, people_counts(a.loader)
    assert before["reviewers"][a.changed["shortened"]] >= 2
    assert after["reviewers"][a.changed["shortened"]] == 1
    assert before["participants"][a.changed["fewer"]] >= 2
    assert after["participants"][a.changed["fewer"]] == 1
    for which in ("reviewers", "participants"):
        check_people(a.loader, a.truth, Window(LATE_START, a.truth.clock), which, [emptied])


def test_reread_pull_request_without_reviewers_loses_them(advanced: Advanced) -> None:
    a = advanced
    assert a.people_before["reviewers"][a.changed["emptied"]] >= 2
    assert people_counts(a.loader)["reviewers"][a.changed["emptied"]] == 0
    check_people(a.loader, a.truth, Window(LATE_START, a.truth.clock), "reviewers")
