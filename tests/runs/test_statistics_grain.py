"""Statistics by month, the default grain (issue 11), through a backfill whose windows are not
aligned with months, and through nightly runs.

The views are read on each SQL destination they are made on (DuckDB, Postgres).

A backfill drops each window's partial last period: a month spanning two windows is read,
complete, by the window holding its end, and by no other. The windows here are 30 days long,
so that every month spans two (the default, a third of a year of 122 days, is no more
aligned). A later backfill of a range ending inside a month never replaces that month's complete row
with a partial one. A nightly run reads the current month up to its end (partial), and
again each night until it is over.

Real simulators over HTTP; expected values come from the simulator's truth and request log.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pipelines.runs.backfill import BackfillResult
from simulator import SimConfig, Simulator
from tests.runs.test_backfill import backfill, dated, log_since
from tests.runs.test_daily_activity import server_users
from tests.support import FIXED_NOW
from tests.support.loader import Loader

CLOCK = datetime.fromtimestamp(FIXED_NOW, UTC)  # 2026-06-01T00:00Z
SINCE = datetime(2026, 3, 1, tzinfo=UTC)  # windows of 30 days: Mar 31, Apr 30, May 30, Jun 1
MONTHS = tuple(datetime(2026, m, 1, tzinfo=UTC) for m in (3, 4, 5))
Row = tuple[Any, ...]
Scope = tuple[str, str]  # (level, scope key as the statistics tables hold it)


def next_month(start: datetime) -> datetime:
    return (start.replace(day=28) + timedelta(days=4)).replace(day=1)


def month_of(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def from_z(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# --------------------------------------------------------------------------------------------
# the truth: each commit's and pull request's statistics scopes, by edition
# --------------------------------------------------------------------------------------------
def commit_facts(sim: Simulator, edition: str) -> list[tuple[list[Scope], datetime, int, int]]:
    """(scopes whose commit statistics count it, instant, lines added, deleted). Cloud: the
    repository level only (endpoint 10); self-hosted: every level, a user's alias e-mails
    included."""
    if edition == "cloud":
        return [
            (
                [("repository", c["repository"]["slug"])],
                from_z(c["_sim"]["instant"]),
                c["lines"]["added"],
                c["lines"]["deleted"],
            )
            for c in sim.truth("commits")
        ]
    out = []
    for c in sim.truth("commits"):
        repo = c["repository"]
        key = repo["project"]["key"]
        scopes = [
            ("global", "global"),
            ("project", key),
            ("repository", f"{key}/{repo['slug']}"),
            ("user", c["_sim"]["user"]),
        ]
        out.append(
            (
                [s for s in scopes if s[1] is not None],
                from_z(c["authorTimestamp"]),
                c["linesOfCode"]["added"],
                c["linesOfCode"]["deleted"],
            )
        )
    return out


def pull_request_facts(sim: Simulator, edition: str) -> list[tuple[list[Scope], datetime, str]]:
    """(scopes whose pull-request statistics count it, creation instant, current state)."""
    out = []
    for p in sim.truth("pull-requests"):
        if edition == "cloud":
            scopes = [
                ("workspace", sim.info()["workspace"]),
                ("repository", p["destination"]["repository"]["slug"]),
                ("user", p["author"]["uuid"]),
            ]
            out.append((scopes, from_ms(p["_sim"]["created_ms"]), p["state"]))
        else:
            repo = p["toRef"]["repository"]
            key = repo["project"]["key"]
            scopes = [
                ("global", "global"),
                ("project", key),
                ("repository", f"{key}/{repo['slug']}"),
                ("user", p["author"]["user"]["name"]),
            ]
            out.append((scopes, from_ms(p["createdDate"]), p["state"]))
    return out


STATES = {
    "cloud": ("open", "merged", "declined", "superseded"),
    "server": ("open", "merged", "declined"),
}


def expected_months(
    sim: Simulator, edition: str, read: dict[str, set[Scope]]
) -> dict[str, dict[tuple[str, str, datetime], Row]]:
    """Per statistics view: (level, scope, month) -> the month's numbers, for every scope
    the run read (a month without activity: zeros)."""
    commits: dict[tuple[str, str, datetime], list[int]] = {
        (*scope, m): [0, 0, 0] for scope in read["commit_statistics"] for m in MONTHS
    }
    for scopes, at, added, deleted in commit_facts(sim, edition):
        for scope in scopes:
            row = commits.get((*scope, month_of(at)))
            if row is not None:
                row[0] += 1
                row[1] += added
                row[2] += deleted
    states = STATES[edition]
    prs: dict[tuple[str, str, datetime], list[int]] = {
        (*scope, m): [0] * (1 + len(states))
        for scope in read["pull_request_statistics"]
        for m in MONTHS
    }
    for scopes, at, state in pull_request_facts(sim, edition):
        for scope in scopes:
            row = prs.get((*scope, month_of(at)))
            if row is not None:
                row[0] += 1
                row[1 + states.index(state.lower())] += 1
    return {
        "commit_statistics": {k: tuple(v) for k, v in commits.items()},
        "pull_request_statistics": {k: tuple(v) for k, v in prs.items()},
    }


MEASURES = {
    "commit_statistics": "commits, lines_added, lines_deleted",
    "pull_request_statistics": "pull_requests, {states}",
}


def stored(
    loader: Loader, edition: str, views: tuple[str, ...] = tuple(MEASURES)
) -> dict[str, dict[tuple[str, str, datetime], Row]]:
    """Each statistics view's rows: (level, scope, period_start) -> (period, period_end,
    numbers); a key held twice fails."""
    out: dict[str, dict[tuple[str, str, datetime], Row]] = {}
    for view in views:
        measures = MEASURES[view]
        rows = loader.rows(
            f"SELECT level, scope, period_start, period, period_end, "
            f"{measures.format(states=', '.join(STATES[edition]))} "
            f"FROM {view} WHERE edition = '{edition}'"
        )
        keyed = {
            (level, scope, start.astimezone(UTC)): (period, end.astimezone(UTC), *numbers)
            for level, scope, start, period, end, *numbers in rows
        }
        assert len(keyed) == len(rows), f"a {view} row is held twice"
        out[view] = keyed
    return out


def statistics_requests(log: list[dict[str, Any]]) -> Counter[tuple[str, datetime, datetime]]:
    """(path, since, until) of every statistics request, counted."""
    found: Counter[tuple[str, datetime, datetime]] = Counter()
    for entry in log:
        if "statistics" in entry["endpoint"]:
            span = dated(entry)
            assert span is not None, entry
            found[(entry["path"], *span)] += 1
    return found


# --------------------------------------------------------------------------------------------
# a tiny host per edition: backfilled with the defaults, then a range ending inside a month
# --------------------------------------------------------------------------------------------
@dataclass
class Backfilled:
    edition: str
    sim: Simulator
    loader: Loader
    first: BackfillResult
    first_log: list[dict[str, Any]]
    rows: dict[str, dict[tuple[str, str, datetime], Row]]
    inner: BackfillResult  # 2026-04-15 .. 2026-05-20: [Apr 15, May 15), [May 15, May 20)
    inner_log: list[dict[str, Any]]
    inner_rows: dict[str, dict[tuple[str, str, datetime], Row]]


@pytest.fixture(scope="module", params=["cloud", "server"])
def backfilled(
    request: pytest.FixtureRequest,
    views_destination: tuple[str, str | None],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Backfilled]:
    """Into each SQL destination of the statistics views (DuckDB, Postgres)."""
    edition = request.param
    with Simulator(SimConfig(edition=edition, size="tiny", now=FIXED_NOW)) as sim:
        folder = tmp_path_factory.mktemp(f"grain_{edition}")
        loader = Loader(sim, folder, *views_destination)
        first, first_log = backfill(loader, SINCE.date().isoformat(), None)  # the defaults
        rows = stored(loader, edition)
        inner, inner_log = backfill(loader, "2026-04-15", "2026-05-20")
        yield Backfilled(
            edition,
            sim,
            loader,
            first,
            first_log,
            rows,
            inner,
            inner_log,
            stored(loader, edition),
        )


def test_months_straddle_windows(backfilled: Backfilled) -> None:
    """Not vacuous: the 30-day windows end inside March, April and May (each month spans two
    windows), and the last window ends with May."""
    b = backfilled
    assert not b.first.partial and not b.inner.partial
    ends = [w.end for w in b.first.windows]
    assert ends == [
        datetime(2026, 3, 31, tzinfo=UTC),
        datetime(2026, 4, 30, tzinfo=UTC),
        datetime(2026, 5, 30, tzinfo=UTC),
        CLOCK,
    ]
    for month in MONTHS:
        assert sum(w.start < next_month(month) and w.end > month for w in b.first.windows) == 2


def test_each_month_is_requested_once_and_complete(backfilled: Backfilled) -> None:
    """Every statistics request of the backfill asks for one whole calendar month; each scope's
    March, April and May once each, none twice (a window's partial last month is dropped)."""
    requested = statistics_requests(backfilled.first_log)
    assert requested and set(requested.values()) == {1}
    by_path: dict[str, set[tuple[datetime, datetime]]] = defaultdict(set)
    for path, since, until in requested:
        by_path[path].add((since, until))
    expected = {(m, next_month(m)) for m in MONTHS}
    assert {path: spans for path, spans in by_path.items() if spans != expected} == {}
    rows = sum(len(keyed) for keyed in backfilled.rows.values())
    assert len(requested) == rows  # one request per stored row


def test_month_rows_equal_truth(backfilled: Backfilled) -> None:
    """One complete row per scope and month (period `month`, ending at the next month's
    start), with the truth's numbers, in both statistics views."""
    b = backfilled
    read = {view: {key[:2] for key in keyed} for view, keyed in b.rows.items()}
    levels = {view: {level for level, _ in scopes} for view, scopes in read.items()}
    assert levels == (
        {
            "commit_statistics": {"repository"},
            "pull_request_statistics": {"workspace", "repository", "user"},
        }
        if b.edition == "cloud"
        else {
            "commit_statistics": {"global", "project", "repository", "user"},
            "pull_request_statistics": {"global", "project", "repository", "user"},
        }
    )
    scopes = read["pull_request_statistics"]
    repositories = {
        r["slug"] if b.edition == "cloud" else f"{r['project']['key']}/{r['slug']}"
        for r in b.sim.truth("repositories")
    }
    users = (
        {u["uuid"] for u in b.sim.truth("users")} if b.edition == "cloud" else server_users(b.sim)
    )
    assert {s for level, s in scopes if level == "repository"} == repositories
    assert {s for level, s in scopes if level == "user"} == users
    expected = expected_months(b.sim, b.edition, read)
    for view, keyed in b.rows.items():
        assert {k: (row[0], row[1]) for k, row in keyed.items()} == {
            k: ("month", next_month(k[2])) for k in expected[view]
        }, view
        assert {k: row[2:] for k, row in keyed.items()} == expected[view], view
        assert sum(row[0] for row in expected[view].values()) > 0


def test_partial_month_never_replaces_a_complete_one(backfilled: Backfilled) -> None:
    """A backfill of [2026-04-15, 2026-05-20): its first window reads April (complete), no
    window reads May (partial in both): every stored row is unchanged, May's still complete."""
    b = backfilled
    requested = statistics_requests(b.inner_log)
    april = (MONTHS[1], MONTHS[2])
    assert requested and {(since, until) for _, since, until in requested} == {april}
    assert set(requested.values()) == {1}
    assert b.inner_rows == b.rows
    mays = [row for view in b.rows.values() for key, row in view.items() if key[2] == MONTHS[2]]
    assert mays and {row[1] for row in mays} == {CLOCK}


# --------------------------------------------------------------------------------------------
# nightly runs: the current month, partial, read again each night
# --------------------------------------------------------------------------------------------
def test_nightly_reads_the_current_month_each_night(
    make_sim: Callable[..., Simulator], tmp_path: Path
) -> None:
    """Three nightly loads with the default grain, the clock moved a day, then half a day: each
    night stores the current month once, up to the run's end, with the truth's numbers, and
    completes the month before (late pushes into it included)."""
    sim = make_sim(edition="server")
    loader = Loader(sim, tmp_path)
    args = {"levels": ["repository"], "resources": ["commits", "commit_statistics"]}
    nights = []
    for advance in (None, {"days": 1}, {"hours": 12}):
        if advance:
            sim.advance(**advance)
        clock = datetime.fromtimestamp(sim.info()["now"], UTC)
        before = sim.requests()["total"]
        result = loader.load(**args)
        assert not result.report.partial
        rows = stored(loader, "server", ("commit_statistics",))["commit_statistics"]
        read = {key[:2] for key in rows}
        nights.append((clock, log_since(sim, before), len(read)))
        assert max(key[2] for key in rows) == month_of(clock - timedelta(microseconds=1))
        truth: dict[tuple[str, str, datetime], list[int]] = defaultdict(lambda: [0, 0, 0])
        for scopes, at, added, deleted in commit_facts(sim, "server"):
            for scope in scopes:
                if scope in read and at < clock:
                    row = truth[(*scope, month_of(at))]
                    row[0] += 1
                    row[1] += added
                    row[2] += deleted
        for key, (period, end, *numbers) in rows.items():
            assert (period, end) == ("month", min(next_month(key[2]), clock)), key
            assert tuple(numbers) == tuple(truth[key]), key
    assert [night[0] for night in nights] == [
        CLOCK,
        CLOCK + timedelta(days=1),
        CLOCK + timedelta(days=1, hours=12),
    ]
    # A repository's first night: every month from start_date (2026-03-01). Later nights, from
    # 3 days before the last run's end: May again (complete, late pushes included), and June
    # up to the night's end. (The first advance adds a repository: its first night.)
    assert [night[2] for night in nights] == [5, 6, 6]
    known = 0
    for index, (clock, log, repositories) in enumerate(nights):
        spans = Counter((since, until) for _, since, until in statistics_requests(log))
        expected: Counter[tuple[datetime, datetime]] = Counter()
        for m in MONTHS:
            expected[(m, next_month(m))] = repositories if m == MONTHS[2] else repositories - known
        if index:
            expected[(CLOCK, clock)] = repositories
        assert spans == expected, (index, spans)
        known = repositories
