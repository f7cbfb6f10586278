"""Daily series derived from the lists (issue 11), against the simulator's ground truth.

The statistics endpoints are read by month by default; the daily series they used to give are
views over the list tables: `daily_commit_activity` (commits, merge commits, lines per day)
and `daily_pull_request_activity` (pull requests by creation day and current state, as the
statistics count them, and by the day they were merged, declined or superseded), at every
level of the edition. One tiny host per edition is loaded with the default settings, into
DuckDB and into Postgres (the views are the same on both, read in any session zone); every
expected value is computed here from `sim.truth(...)`, never from extractor code. The views'
monthly sums are also compared with the API's own monthly rows loaded by the same run.

The day: self-hosted, and every pull-request date, the UTC day; cloud commits, the author's
local calendar day (the API drops the zone: README, Statistics grain and derived daily series).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from simulator import SimConfig, Simulator
from tests.support import FIXED_NOW
from tests.support.loader import Loader

START = datetime(2026, 3, 1, tzinfo=UTC)  # the Loader's default start_date: before the history
CLOCK = datetime.fromtimestamp(FIXED_NOW, UTC)
MONTHS = (date(2026, 3, 1), date(2026, 4, 1), date(2026, 5, 1))  # complete months of the load
EDGE = timedelta(hours=14)  # the widest author offset: a local day's instants lie this far out
READER_ZONES = ("UTC", "America/Los_Angeles", "Pacific/Kiritimati")
TOP = {"cloud": "workspace", "server": "global"}
STATES = {
    "cloud": ("OPEN", "MERGED", "DECLINED", "SUPERSEDED"),
    "server": ("OPEN", "MERGED", "DECLINED"),
}
Row = tuple[Any, ...]
Key = tuple[str, str | None, date]  # level, scope (None: the top level), day


def next_month(day: date) -> date:
    return (day.replace(day=28) + timedelta(days=4)).replace(day=1)


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def utc_day(text: str) -> date:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).date()


# --------------------------------------------------------------------------------------------
# the truth, per edition: each commit and pull request with the scopes that list it
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TruthCommit:
    scopes: tuple[tuple[str, str | None], ...]  # (level, scope) of every list that holds it
    day: date
    month: date  # the UTC month the statistics count it in
    merge: bool
    added: int
    deleted: int


@dataclass(frozen=True)
class TruthPullRequest:
    scopes: tuple[tuple[str, str | None], ...]
    state: str
    created: datetime
    closed: datetime | None


def server_users(sim: Simulator) -> set[str]:
    """The users a default self-hosted run reads: seen in a commit's `user` object or as a
    pull request's author in the global lists (README: users stay unknown otherwise)."""
    seen = {c["user"]["name"] for c in sim.truth("commits") if c.get("user")}
    return seen | {p["author"]["user"]["name"] for p in sim.truth("pull-requests")}


def truth_commits(sim: Simulator, edition: str) -> list[TruthCommit]:
    out = []
    if edition == "cloud":
        uuid = {u["_sim"]["slug"]: u["uuid"] for u in sim.truth("users")}
        for c in sim.truth("commits"):
            user = c["_sim"]["user"]
            scopes = [("workspace", None), ("repository", c["repository"]["slug"])]
            if user is not None:
                scopes.append(("user", uuid[user]))
            out.append(
                TruthCommit(
                    tuple(scopes),
                    datetime.fromisoformat(c["date"]).date(),
                    utc_day(c["_sim"]["instant"]).replace(day=1),
                    c["_sim"]["is_merge"],
                    c["lines"]["added"],
                    c["lines"]["deleted"],
                )
            )
        return out
    users = server_users(sim)
    for c in sim.truth("commits"):
        repo, user = c["repository"], c["_sim"]["user"]
        scopes = [
            ("global", None),
            ("project", repo["project"]["key"]),
            ("repository", f"{repo['project']['key']}/{repo['slug']}"),
        ]
        if user in users:  # alias e-mails too: the user-level lists count them
            scopes.append(("user", user))
        day = utc_day(c["authorTimestamp"])
        out.append(
            TruthCommit(
                tuple(scopes),
                day,
                day.replace(day=1),
                c["_sim"]["is_merge"],
                c["linesOfCode"]["added"],
                c["linesOfCode"]["deleted"],
            )
        )
    return out


def truth_pull_requests(sim: Simulator, edition: str) -> list[TruthPullRequest]:
    """Pull requests updated in the load's range (the lists read them by update)."""
    out = []
    for p in sim.truth("pull-requests"):
        if edition == "cloud":
            facts = p["_sim"]
            scopes = (
                ("workspace", None),
                ("repository", p["destination"]["repository"]["slug"]),
                ("user", p["author"]["uuid"]),
            )
            created, updated = from_ms(facts["created_ms"]), from_ms(facts["updated_ms"])
        else:
            repo = p["toRef"]["repository"]
            scopes = (
                ("global", None),
                ("project", repo["project"]["key"]),
                ("repository", f"{repo['project']['key']}/{repo['slug']}"),
                ("user", p["author"]["user"]["name"]),
            )
            created, updated = from_ms(p["createdDate"]), from_ms(p["updatedDate"])
        closed = p["_sim"]["closed_ms"]
        if START <= updated < CLOCK:
            out.append(
                TruthPullRequest(
                    scopes, p["state"], created, from_ms(closed) if closed is not None else None
                )
            )
    return out


def expected_commit_days(commits: list[TruthCommit]) -> dict[Key, Row]:
    """(level, scope, day) -> (commits, merge commits, commits with lines, added, deleted)."""
    sums: dict[Key, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    for c in commits:
        for level, scope in c.scopes:
            row = sums[(level, scope, c.day)]
            for i, value in enumerate((1, int(c.merge), 1, c.added, c.deleted)):
                row[i] += value
    return {key: tuple(values) for key, values in sums.items()}


def expected_pull_request_days(prs: list[TruthPullRequest], edition: str) -> dict[Key, Row]:
    """(level, scope, day) -> (created, created by current state (the edition's states),
    merged, declined, superseded that day)."""
    states = STATES[edition]
    counts: Counter[tuple[str, str | None, date, str]] = Counter()
    for p in prs:
        for level, scope in p.scopes:
            counts[(level, scope, p.created.date(), "created")] += 1
            counts[(level, scope, p.created.date(), "created " + p.state)] += 1
            if p.closed is not None:
                counts[(level, scope, p.closed.date(), "resolved " + p.state)] += 1
    groups = {key[:3] for key in counts}
    return {
        group: (
            counts[(*group, "created")],
            *(counts[(*group, "created " + s)] for s in states),
            *(counts[(*group, "resolved " + s)] for s in ("MERGED", "DECLINED", "SUPERSEDED")),
        )
        for group in groups
    }


# --------------------------------------------------------------------------------------------
# one default load per edition
# --------------------------------------------------------------------------------------------
@dataclass
class Loaded:
    edition: str
    sim: Simulator
    loader: Loader

    def rows(self, sql: str, zone: str = "UTC") -> list[Row]:
        return self.loader.rows(f"SET TimeZone = '{zone}'; {sql}")

    def commit_days(self, zone: str = "UTC") -> dict[Key, Row]:
        found: dict[Key, Row] = {}
        for level, scope, day, basis, *measures in self.rows(
            "SELECT level, scope, day, day_basis, commits, merge_commits, "
            "commits_with_lines, lines_added, lines_deleted FROM daily_commit_activity "
            f"WHERE edition = '{self.edition}'",
            zone,
        ):
            assert (level, scope, day) not in found, (level, scope, day)
            assert basis == ("author_local" if self.edition == "cloud" else "utc")
            found[(level, scope, day)] = tuple(measures)
        return found

    def pull_request_days(self, zone: str = "UTC") -> dict[Key, Row]:
        states = ", ".join(f"created_{s.lower()}" for s in STATES[self.edition])
        found: dict[Key, Row] = {}
        for level, scope, day, *measures in self.rows(
            f"SELECT level, scope, day, created, {states}, merged, declined, superseded "
            f"FROM daily_pull_request_activity WHERE edition = '{self.edition}'",
            zone,
        ):
            assert (level, scope, day) not in found, (level, scope, day)
            found[(level, scope, day)] = tuple(measures)
        return found


@pytest.fixture(scope="module", params=["cloud", "server"])
def loaded(
    request: pytest.FixtureRequest,
    views_destination: tuple[str, str | None],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Loaded]:
    """A tiny host's whole history, loaded with the default settings (every level and
    resource, statistics by month), into each SQL destination of the views."""
    edition = request.param
    with Simulator(SimConfig(edition=edition, size="tiny", now=FIXED_NOW)) as sim:
        folder = tmp_path_factory.mktemp(f"daily_{edition}")
        loader = Loader(sim, folder, *views_destination)
        result = loader.load()
        assert not result.report.partial, result.report.skips
        yield Loaded(edition, sim, loader)


def test_default_statistics_are_monthly(loaded: Loaded) -> None:
    """The default grain is the month: every statistics row is a month's."""
    periods = loaded.rows(
        "SELECT DISTINCT period FROM pull_request_statistics UNION "
        "SELECT DISTINCT period FROM commit_statistics"
    )
    assert periods == [("month",)]


@pytest.mark.parametrize("zone", READER_ZONES)
def test_daily_commit_activity_equals_truth(loaded: Loaded, zone: str) -> None:
    """Per level, scope and day: commits, merge commits, lines, as the truth sums them (the
    cloud's user and workspace levels take their lines from the repository-level list), read
    in any session time zone."""
    expected = expected_commit_days(truth_commits(loaded.sim, loaded.edition))
    levels = {key[0] for key in expected}
    assert levels == (
        {"workspace", "repository", "user"}
        if loaded.edition == "cloud"
        else {"global", "project", "repository", "user"}
    )
    assert any(row[1] for row in expected.values())  # merge commits: not vacuous
    assert loaded.commit_days(zone) == expected


@pytest.mark.parametrize("zone", READER_ZONES)
def test_daily_pull_request_activity_equals_truth(loaded: Loaded, zone: str) -> None:
    """Per level, scope and UTC day: pull requests created (and their current states), and
    those merged, declined or superseded that day, as the truth has them."""
    expected = expected_pull_request_days(
        truth_pull_requests(loaded.sim, loaded.edition), loaded.edition
    )
    width = len(STATES[loaded.edition])
    resolved = [sum(row[1 + width :]) for row in expected.values()]
    assert sum(row[0] for row in expected.values()) > 0 and sum(resolved) > 0
    # not vacuous: resolutions are counted on their own days, not on the creation days
    assert any(not row[0] for row in expected.values())
    assert loaded.pull_request_days(zone) == expected
    if loaded.edition == "server":  # self-hosted closing times come from the CSV export
        unresolved = loaded.rows(
            "SELECT sum(resolutions_from_updated_at) FROM daily_pull_request_activity"
        )
        assert unresolved == [(0,)]


def monthly(days: Mapping[Key, Row], measures: Callable[[Row], Row]) -> dict[Key, Row]:
    """Daily rows summed by (level, scope, month)."""
    sums: dict[Key, list[int]] = {}
    for (level, scope, day), row in days.items():
        values = measures(row)
        total = sums.setdefault((level, scope, day.replace(day=1)), [0] * len(values))
        for i, value in enumerate(values):
            total[i] += value
    return {key: tuple(values) for key, values in sums.items()}


def api_months(loaded: Loaded, view: str, measures: str) -> dict[Key, Row]:
    """The API's own monthly rows of the load's complete months, the top level's scope as the
    daily views name it (NULL)."""
    top = TOP[loaded.edition]
    return {
        (level, None if level == top else scope, start.astimezone(UTC).date()): tuple(row)
        for level, scope, start, *row in loaded.rows(
            f"SELECT level, scope, period_start, {measures} FROM {view} "
            f"WHERE edition = '{loaded.edition}' AND period = 'month' "
            f"AND period_start >= '{START.isoformat()}' AND period_end <= "
            f"'{CLOCK.isoformat()}'"
        )
    }


def test_pull_request_days_sum_to_the_apis_months(loaded: Loaded) -> None:
    """The daily creations (by current state) of a month sum to the API's monthly row of the
    same scope, at every level: the monthly requests lose nothing the days had."""
    width = len(STATES[loaded.edition])
    states = ", ".join(s.lower() for s in STATES[loaded.edition])
    api = api_months(loaded, "pull_request_statistics", f"pull_requests, {states}")
    assert {key[2] for key in api} == set(MONTHS)
    derived = monthly(loaded.pull_request_days(), lambda row: row[: 1 + width])
    assert {key: derived.get(key, (0,) * (1 + width)) for key in api} == api
    assert set(derived) <= set(api)


def test_commit_days_sum_to_the_apis_months(loaded: Loaded) -> None:
    """Self-hosted (UTC days): the daily commits and lines of a month sum to the API's monthly
    commit statistics of the same scope, at every level (users under alias e-mails too).
    Cloud (the authors' local days; repository-level statistics only): a month's sums differ
    from the API's by no more than its commits within 14 hours of the month's edges."""
    api = api_months(loaded, "commit_statistics", "commits, lines_added, lines_deleted")
    derived = monthly(loaded.commit_days(), lambda row: (row[0], row[3], row[4]))
    if loaded.edition == "server":
        assert {key[0] for key in api} == {"global", "project", "repository", "user"}
        assert {key: derived.get(key, (0, 0, 0)) for key in api} == api
        return
    assert {key[0] for key in api} == {"repository"}
    near: dict[Key, list[int]] = defaultdict(lambda: [0, 0, 0])
    for c in loaded.sim.truth("commits"):
        instant = datetime.fromisoformat(c["_sim"]["instant"].replace("Z", "+00:00"))
        for month in MONTHS:
            edges = (
                datetime.combine(month, datetime.min.time(), UTC),
                datetime.combine(next_month(month), datetime.min.time(), UTC),
            )
            if any(abs(instant - edge) < EDGE for edge in edges):
                row = near[("repository", c["repository"]["slug"], month)]
                row[0] += 1
                row[1] += c["lines"]["added"]
                row[2] += c["lines"]["deleted"]
    assert any(near.values())
    differ = 0
    for key, values in api.items():
        got = derived.get(key, (0, 0, 0))
        differ += got != values
        assert all(abs(a - b) <= n for a, b, n in zip(got, values, near[key], strict=True)), key
    assert differ < len(api)  # most months agree


def test_cloud_lines_where_the_lists_carry_them(
    make_sim: Callable[..., Simulator], tmp_path: Path
) -> None:
    """A cloud repository without lines-of-code indexing: its commits count at every level,
    with no lines; `commits_with_lines` says how many of a day's commits have lines."""
    sim = make_sim(edition="cloud")
    off = sorted(r["slug"] for r in sim.truth("repositories"))[0]
    sim.set_conditions(loc_disabled=[off])
    loader = Loader(sim, tmp_path)
    assert not loader.load(levels=["workspace", "repository"], resources=["commits"]).report.partial
    commits = truth_commits(sim, "cloud")
    assert any(c.scopes[1][1] == off for c in commits)
    expected: dict[Key, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for c in commits:
        lines = c.scopes[1][1] != off
        for level, scope in c.scopes[:2]:
            row = expected[(level, scope, c.day)]
            row[0] += 1
            row[1] += lines
            row[2] += c.added if lines else 0
            row[3] += c.deleted if lines else 0
    found = {
        (level, scope, day): [commits_, with_lines, added or 0, deleted or 0]
        for level, scope, day, commits_, with_lines, added, deleted in loader.rows(
            "SELECT level, scope, day, commits, commits_with_lines, lines_added, "
            "lines_deleted FROM daily_commit_activity"
        )
    }
    assert found == dict(expected)
    assert (
        loader.rows(
            f"SELECT count(*), count(lines_added) FROM daily_commit_activity WHERE scope = '{off}'"
        )[0][1]
        == 0
    )
