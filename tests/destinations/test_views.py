"""Resolution times of self-hosted pull requests in the canonical views, against the truth.

The self-hosted JSON items carry no closed date; `updatedDate` moves on after closing (a
comment, a reviewer), so it is not the resolution time. The CSV export's `Time to resolve`
is. A tiny self-hosted host is loaded with the default settings (every level and resource),
and the views' per-pull-request resolution times, per-repository median cycle times and
weekly outcome buckets are compared with values computed here from the simulator's ground
truth (`sim.truth("pull-requests")` and its `_sim.closed_ms`), never from extractor code;
on DuckDB and on Postgres.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from statistics import median
from typing import Any

import pytest

from simulator import SimConfig, Simulator
from tests.support import FIXED_NOW
from tests.support.loader import Loader

START = datetime(2026, 3, 1, tzinfo=UTC)  # the Loader's default start_date
STATES = ("MERGED", "DECLINED", "SUPERSEDED")  # the weekly view's counts, in its column order
# The CSV gives whole seconds: a resolution time may be up to a second before the truth's.
CSV_PRECISION = timedelta(seconds=1)
Key = tuple[str, str, int]


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def key_of(pr: dict[str, Any]) -> Key:
    repo = pr["toRef"]["repository"]
    return repo["project"]["key"], repo["slug"], pr["id"]


def monday(moment: datetime) -> date:
    day = moment.astimezone(UTC).date()
    return day - timedelta(days=day.weekday())


def rows(loader: Loader, sql: str) -> list[tuple[Any, ...]]:
    return loader.rows(f"SET TimeZone = 'UTC'; {sql}")


def closed_truth(sim: Simulator) -> dict[Key, dict[str, Any]]:
    """The host's closed pull requests updated in the load's window, by key."""
    clock = datetime.fromtimestamp(sim.info()["now"], UTC)
    return {
        key_of(pr): pr
        for pr in sim.truth("pull-requests")
        if pr["_sim"]["closed_ms"] is not None and START <= from_ms(pr["updatedDate"]) < clock
    }


@pytest.fixture(scope="module")
def host() -> Iterator[Simulator]:
    with Simulator(SimConfig(edition="server", size="tiny", now=FIXED_NOW)) as sim:
        yield sim


@pytest.fixture(scope="module")
def loaded(
    host: Simulator,
    views_destination: tuple[str, str | None],
    tmp_path_factory: pytest.TempPathFactory,
) -> Loader:
    """One load with the default settings (all levels and resources, CSV exports included)."""
    loader = Loader(host, tmp_path_factory.mktemp("views-default"), *views_destination)
    assert not loader.load().report.partial
    return loader


def test_truth_has_pull_requests_updated_after_closing(host: Simulator) -> None:
    """Not vacuous: updated_at would be wrong for some of the host's closed pull requests."""
    truth = closed_truth(host)
    late = [k for k, pr in truth.items() if pr["updatedDate"] > pr["_sim"]["closed_ms"]]
    assert len(truth) > 20 and len(late) >= 5, (len(truth), len(late))


def test_resolution_times_are_the_closing_times(host: Simulator, loaded: Loader) -> None:
    """Every closed pull request: resolved_at is the host's closing time, from the CSV."""
    truth = closed_truth(host)
    found = {
        (key, slug, number): (state, created, done, source, hours)
        for key, slug, number, state, created, done, source, hours in rows(
            loaded,
            "SELECT project_key, repository_slug, pull_request_id, state, "
            "created_at, resolved_at, resolved_at_source, hours_to_resolve "
            "FROM pull_request_cycle_times WHERE edition = 'server'",
        )
    }
    assert set(found) == set(truth)
    for key, pr in truth.items():
        state, created, done, source, hours = found[key]
        closed = from_ms(pr["_sim"]["closed_ms"])
        assert state == pr["state"], key
        assert source == "csv_time_to_resolve", key
        assert closed - CSV_PRECISION < done <= closed, (key, done, closed)
        true_hours = (pr["_sim"]["closed_ms"] - pr["createdDate"]) / 3_600_000
        assert abs(hours - true_hours) <= 1 / 60, (key, hours, true_hours)
    in_view = rows(
        loaded,
        "SELECT resolved_at, resolved_at_source FROM pull_requests "
        "WHERE edition = 'server' AND state = 'OPEN'",
    )
    assert in_view and set(in_view) == {(None, None)}  # open: not resolved


def test_median_cycle_times_per_repository(host: Simulator, loaded: Loader) -> None:
    """Per repository, the median hours to resolve equal the truth's (to the minute)."""
    hours: dict[tuple[str, str], list[float]] = {}
    for (key, slug, _), pr in closed_truth(host).items():
        hours.setdefault((key, slug), []).append(
            (pr["_sim"]["closed_ms"] - pr["createdDate"]) / 3_600_000
        )
    expected = {repo: median(values) for repo, values in hours.items()}
    found = dict(
        ((key, slug), value)
        for key, slug, value in rows(
            loaded,
            "SELECT project_key, repository_slug, median(hours_to_resolve) "
            "FROM pull_request_cycle_times WHERE edition = 'server' GROUP BY ALL",
        )
    )
    assert set(found) == set(expected)
    for repo, value in expected.items():
        assert abs(found[repo] - value) <= 1 / 60, (repo, found[repo], value)


def test_weekly_outcomes_are_by_closing_week(host: Simulator, loaded: Loader) -> None:
    """Counts by state per UTC week (Monday) of the host's closing time."""
    counts: Counter[tuple[str, str, date, str]] = Counter()
    for (key, slug, _), pr in closed_truth(host).items():
        counts[(key, slug, monday(from_ms(pr["_sim"]["closed_ms"])), pr["state"])] += 1
    groups = {group[:3] for group in counts}
    expected = {group: tuple(counts[(*group, s)] for s in STATES) for group in groups}
    found = {
        (key, slug, monday(week)): (merged, declined, superseded)
        for key, slug, week, merged, declined, superseded in rows(
            loaded,
            "SELECT project_key, repository_slug, week, merged, declined, "
            "superseded FROM pull_request_outcomes_weekly WHERE edition = 'server'",
        )
    }
    assert found == expected
    fallbacks = rows(
        loaded,
        "SELECT sum(resolutions_from_updated_at) "
        "FROM pull_request_outcomes_weekly WHERE edition = 'server'",
    )
    assert fallbacks == [(0,)]


def test_without_the_export_resolution_falls_back_to_updated_at(
    host: Simulator, views_destination: tuple[str, str | None], tmp_path: Path
) -> None:
    """No CSV export loaded: resolved_at is updated_at, and the view says so."""
    loader = Loader(host, tmp_path, *views_destination)
    assert not loader.load(levels=["repository"], resources=["pull_requests"]).report.partial
    found = rows(
        loader,
        """
        SELECT count(*), count(*) FILTER (WHERE c.resolved_at_source = 'updated_at'),
               count(*) FILTER (WHERE c.resolved_at = p.updated_at)
        FROM pull_request_cycle_times c JOIN pull_requests p USING (edition, project_key,
             repository_slug, pull_request_id)""",
    )
    closed = len(closed_truth(host))
    assert found == [(closed, closed, closed)]
    weekly = rows(
        loader,
        "SELECT sum(merged + declined + superseded), "
        "sum(resolutions_from_updated_at) "
        "FROM pull_request_outcomes_weekly",
    )
    assert weekly == [(closed, closed)]
