"""Pull-request statistics after "backfill, then nightly": every stored row stays the API's.

Pull-request statistics count pull requests by creation period and current state, so a period
that only a backfill read changes when one of its pull requests does. After a backfill from
well before the nightly's `start_date` (30 days back by default) and a day of activity, the
nightly must leave every stored row equal to what the API answers for that row's scope and
period; and reconciliation must report a stored row that is not (exit 5 on the command line).

Real simulators over HTTP; expected values are the simulator's own statistics answers, asked
for each stored row, never computed by extractor code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
import requests

from pipelines.reconcile.check import reconcile
from pipelines.runs.backfill import run_backfill
from simulator import Simulator
from tests.support.helpers import GRAIN, period_floor, period_next
from tests.support.loader import DATASET, DESTINATIONS, Loader

BACKFILL_SINCE = "2026-03-01"  # the tiny history begins after it; the clock is 2026-06-01
DEFAULT_START = timedelta(days=30)  # README: start_date defaults to 30 days before end_date
LOOKBACK = timedelta(days=3)  # README: lookback_days defaults to 3
CLI = Path(sys.executable).with_name("repo-analytics")
TOP_LEVEL = {"cloud": "workspace", "server": "global"}
# The grains the refresh is checked at: the default (month), and day, the finest.
GRAINS = [GRAIN, "day"]


def scopes_read(edition: str) -> dict[str, Any]:
    """What the runs read: pull requests and their statistics, by repository and at the top
    level (the refresh is the same at every level; fewer scopes keep the test quick)."""
    return {
        "levels": ["repository", TOP_LEVEL[edition]],
        "resources": ["pull_requests", "pull_request_statistics"],
    }


@dataclass(frozen=True)
class PrStatistics:
    """One edition's pull-request statistics, as its spec describes them."""

    table: str
    params: Mapping[str, str]  # state=all, by creation date
    since: str
    until: str
    total: str  # the body's count of pull requests
    states: tuple[str, ...]  # the body's `state` object
    paths: Mapping[str, str]  # level -> path below the API base, from the scope

    def path(self, level: str, scope: str, workspace: str) -> str:
        if level == "repository" and "/" in scope:  # self-hosted: KEY/slug
            project, slug = scope.split("/")
            return self.paths[level].format(project=project, slug=slug)
        return self.paths[level].format(scope=scope, slug=scope, workspace=workspace)


EDITIONS = {
    "cloud": PrStatistics(
        "cloud_pull_request_statistics",
        {"state": "all", "date_type": "created"},
        "since_date",
        "until_date",
        "pull_requests",
        ("declined", "merged", "open", "superseded"),
        {
            "workspace": "/workspace/{workspace}/pull-requests/statistics",
            "repository": "/workspace/{workspace}/repos/{slug}/pull-requests/statistics",
            "user": "/workspace/{workspace}/users/{scope}/pull-requests/statistics",
        },
    ),
    "server": PrStatistics(
        "server_pull_request_statistics",
        {"state": "all", "dateType": "created"},
        "sinceDate",
        "untilDate",
        "pullRequests",
        ("declined", "merged", "open"),
        {
            "global": "/pull-requests/statistics",
            "project": "/projects/{scope}/pull-requests/statistics",
            "repository": "/projects/{project}/repos/{slug}/pull-requests/statistics",
            "user": "/users/{scope}/pull-requests/statistics",
        },
    ),
}


def clock_of(sim: Simulator) -> datetime:
    return datetime.fromtimestamp(sim.info()["now"], UTC)


def backfill_args(loader: Loader, **overrides: Any) -> dict[str, Any]:
    args = loader.source_args(**overrides)
    args.pop("start_date", None)
    args.pop("now", None)
    return args


def stored_rows(
    loader: Loader, grain: str = GRAIN
) -> dict[tuple[str, str, datetime], tuple[Any, ...]]:
    """(level, scope, period_start) -> (period_end, pull requests, counts by state), of the
    rows of one grain."""
    spec = EDITIONS[loader.sim.config.edition]
    columns = ", ".join(
        ("level", "scope", "period_start", "period_end", "pull_requests", *spec.states)
    )
    return {
        (level, scope, start.astimezone(UTC)): (end.astimezone(UTC), *counts)
        for level, scope, start, end, *counts in loader.rows(
            f"SELECT {columns} FROM {spec.table} WHERE period = '{grain}'"
        )
    }


def api_row(
    sim: Simulator,
    session: requests.Session,
    level: str,
    scope: str,
    start: datetime,
    end: datetime,
) -> tuple[Any, ...]:
    """What the host answers now for one scope and period, in the stored row's shape."""
    spec = EDITIONS[sim.config.edition]
    workspace = sim.info().get("workspace") or ""
    answer = session.get(
        sim.api_base + spec.path(level, scope, workspace),
        params={**spec.params, spec.since: start.isoformat(), spec.until: end.isoformat()},
        headers=sim.auth_headers,
        timeout=30,
    )
    answer.raise_for_status()
    body = answer.json()
    return (end, body[spec.total], *(body["state"][s] for s in spec.states))


def stale_rows(
    loader: Loader, grain: str = GRAIN
) -> dict[tuple[str, str, datetime], tuple[Any, Any]]:
    """Every stored row of one grain that differs from the host's answer: (stored, API)."""
    wrong = {}
    with requests.Session() as session:
        for (level, scope, start), row in stored_rows(loader, grain).items():
            api = api_row(loader.sim, session, level, scope, start, row[0])
            if api != row:
                wrong[(level, scope, start)] = (row, api)
    return wrong


def old_changed_periods(
    sim: Simulator, answer: Mapping[str, Any], before: datetime, grain: str = GRAIN
) -> set[tuple[str, datetime]]:
    """(repository slug, creation period) of the pull requests the advance changed that were
    created before `before` (and before the nightly's look-back): the periods only a backfill
    read."""
    changed = {(slug, number) for slug, number, _ in answer["pull_request_changes"]}
    found = set()
    for pr in sim.truth("pull-requests"):
        facts = pr["_sim"]
        key = (facts.get("repo") or repository_slug(pr), pr["id"])
        created = datetime.fromtimestamp((facts.get("created_ms") or pr["createdDate"]) / 1000, UTC)
        if (
            key in changed
            and created < before
            and period_next(period_floor(created, grain), grain) <= before
        ):
            found.add((key[0], period_floor(created, grain)))
    return found


def repository_slug(pr: Mapping[str, Any]) -> str:
    ref = pr.get("destination") or pr["toRef"]
    return str(ref["repository"]["slug"])


@dataclass
class Refreshed:
    sim: Simulator
    loader: Loader
    clock: datetime
    old_periods: set[tuple[str, datetime]]  # (slug, period) only the backfill had read
    backfill_loads: tuple[str, ...]  # the load ids of the backfill's windows
    nightly_loads: tuple[str, ...]  # the nightly's: the run a reconciliation follows
    grain: str


def backfill_then_nightly(
    sim: Simulator, folder: Path, destination: str = "duckdb", grain: str = GRAIN
) -> Refreshed:
    """The whole tiny history backfilled; a day of activity; the nightly load with its
    default `start_date` (30 days back); statistics of one grain (month: the default)."""
    loader = Loader(sim, folder, destination)
    scopes = scopes_read(sim.config.edition)
    if grain != GRAIN:
        scopes["statistics_period"] = grain
    result = run_backfill(
        loader.pipeline(),
        BACKFILL_SINCE,
        None,
        30,
        now=clock_of(sim),
        **backfill_args(loader, **scopes),
    )
    assert not result.partial and len(result.windows) == 4
    answer = sim.advance(days=1)
    clock = clock_of(sim)
    old = old_changed_periods(sim, answer, clock - DEFAULT_START, grain)
    assert old, "the advance changed no pull request created before the nightly's start"
    nightly = loader.load(start_date=None, now=clock, **scopes)
    assert not nightly.report.skips
    backfilled = tuple(i for w in result.windows if w.result for i in w.result.load_ids)
    assert backfilled and nightly.load_ids and not set(backfilled) & set(nightly.load_ids)
    return Refreshed(sim, loader, clock, old, backfilled, nightly.load_ids, grain)


@pytest.mark.parametrize(
    ("destination", "grain"), [*((d, GRAIN) for d in DESTINATIONS), ("duckdb", "day")]
)
@pytest.mark.parametrize("edition", ["cloud", "server"])
def test_nightly_after_backfill_keeps_every_statistics_row_current(
    edition: str, destination: str, grain: str, make_sim: Callable[..., Simulator], tmp_path: Path
) -> None:
    """Backfill from 2026-03-01, advance a day (pull requests change state), nightly load:
    every stored pull-request statistics row equals the API's answer for its scope and
    period, including the creation periods older than the nightly's `start_date`; by month
    (the default) and by day."""
    r = backfill_then_nightly(make_sim(edition=edition), tmp_path, destination, grain)
    rows = stored_rows(r.loader, grain)
    spec = EDITIONS[edition]
    scope_of = {
        slug: scope
        for level, scope, _ in rows
        if level == "repository"
        for slug in (scope.split("/")[-1],)
    }
    for slug, start in r.old_periods:  # the periods of the example are held
        assert ("repository", scope_of[slug], start) in rows, (slug, start)
    # every scope (5 repositories and the top level) and period of 2026-03-01 .. 2026-06-02
    assert len(rows) >= 6 * {"day": 93, "month": 4}[grain], spec.table
    wrong = stale_rows(r.loader, grain)
    assert not wrong, f"{len(wrong)} stale rows (stored, API), e.g. {sorted(wrong.items())[:3]}"


@pytest.mark.parametrize("grain", GRAINS)
def test_reconcile_reports_a_stale_statistics_row(
    grain: str, make_sim: Callable[..., Simulator], tmp_path: Path
) -> None:
    """A stored pull-request statistics row made stale (UPDATE) in a creation period older
    than the nightly's start, of a pull request the nightly read, and stamped with an
    earlier load's id (as a row the nightly did not write again): reconciliation after the
    nightly asks for it again and reports that repository, period and state as a mismatch;
    nothing else differs."""
    r = backfill_then_nightly(make_sim(edition="server"), tmp_path, grain=grain)
    args = backfill_args(r.loader, **scopes_read("server"))
    if grain != GRAIN:
        args["statistics_period"] = grain
    window = (r.clock - LOOKBACK, r.clock)
    clean = reconcile(str(r.loader.db_file), DATASET, [window], args, r.nightly_loads)
    assert clean.ok and clean.differences == [], clean.as_dict()
    slug, start = min(r.old_periods)
    scope = next(
        s
        for (s,) in r.loader.rows(
            "SELECT DISTINCT scope FROM server_pull_request_statistics WHERE level = 'repository'"
        )
        if s.split("/")[-1] == slug
    )
    tamper(
        r.loader.db_file, "server_pull_request_statistics", scope, start, r.backfill_loads[0], grain
    )

    check = reconcile(str(r.loader.db_file), DATASET, [window], args, r.nightly_loads)
    assert not check.ok
    found = {
        (d.repository, d.window, d.measure): (d.api, d.landed, d.verdict) for d in check.differences
    }
    label = f"{start.date()}..{period_next(start, grain).date()}"
    key = (scope, label, "pull_request_statistics_open")
    assert set(found) == {key}, found
    assert found[key][1] == found[key][0] + 1 and found[key][2] == "mismatch"
    # the tampered row alone is asked for again: its four measures (total and three states)
    assert check.rows_rechecked == clean.rows_rechecked + 1
    assert check.rows_written == clean.rows_written - 1 > 0
    assert check.checked == clean.checked + 4


def tamper(
    db_file: Path, table: str, scope: str, start: datetime, load_id: str, grain: str = GRAIN
) -> None:
    """One more `open` pull request in a stored row, and the id of an earlier load than the
    run's: a stale row some earlier run left (a row the run wrote is its own answer)."""
    with duckdb.connect(str(db_file)) as con:
        con.execute(f"SET schema '{DATASET}'")
        assert con.execute(
            f"UPDATE {table} SET open = open + 1, _dlt_load_id = ? WHERE level = 'repository' "
            "AND scope = ? AND period = ? AND period_start = ? RETURNING 1",
            [load_id, scope, grain, start],
        ).fetchall() == [(1,)]


@pytest.mark.parametrize("edition", ["cloud", "server"])
def test_cli_exits_5_on_a_stale_statistics_row(
    edition: str, make_sim: Callable[..., Simulator], tmp_path: Path
) -> None:
    """A nightly load of the repository-level pull-request statistics alone, after a stored
    row of an old creation period (of a pull request updated in the run's look-back) was
    made stale: that run does not read the period again (it read no pull-request list), and
    its reconciliation reports the row: exit 5, the mismatch printed (statistics by month,
    the default)."""
    r = backfill_then_nightly(make_sim(edition=edition), tmp_path)
    spec = EDITIONS[edition]
    slug, start = min(r.old_periods)
    scope = next(
        s
        for (s,) in r.loader.rows(
            f"SELECT DISTINCT scope FROM {spec.table} WHERE level = 'repository'"
        )
        if s.split("/")[-1] == slug
    )
    tamper(r.loader.db_file, spec.table, scope, start, r.backfill_loads[0])
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOURCES__")}
    env.update(
        {
            "SOURCES__REPO_ANALYTICS__EDITION": edition,
            "SOURCES__REPO_ANALYTICS__BASE_URL": r.sim.base_url,
        }
    )
    if edition == "cloud":
        env.update(
            {
                "SOURCES__REPO_ANALYTICS__WORKSPACE": r.sim.info()["workspace"],
                "SOURCES__REPO_ANALYTICS__TOKEN": r.sim.config.token,
            }
        )
    else:
        env.update(
            {
                "SOURCES__REPO_ANALYTICS__USERNAME": r.sim.config.username,
                "SOURCES__REPO_ANALYTICS__PASSWORD": r.sim.config.password,
            }
        )
    folder = r.loader.path
    done = subprocess.run(
        [
            str(CLI),
            "--duckdb",
            str(r.loader.db_file),
            "--pipelines-dir",
            str(folder / "pipelines"),
            "--schemas-dir",
            str(folder / "schemas"),
            "load",
            "--levels",
            "repository",
            "--resources",
            "pull_request_statistics",
            "--end-date",
            r.clock.isoformat(),
        ],
        env=env,
        cwd=folder,
        text=True,
        capture_output=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 5, done.stdout + done.stderr
    label = f"{start.date()}..{period_next(start).date()}"
    assert f"mismatch {scope} {label} pull_request_statistics_open:" in done.stdout, done.stdout
