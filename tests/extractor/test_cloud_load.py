"""End-to-end loads of the cloud edition: real HTTP to the simulator, real DuckDB, ground truth.

Every expected value is computed here from the simulator's ground truth (`sim.truth(kind)`,
the clock of `sim.info()`) and the spec, never from extractor code. Commit lists are filtered by
the commit's real instant while the table keeps the zone-less local `date`, so the extractor
reads [start - 26 h, clock) for commits: an item must be loaded when its instant lies in
[start, clock) and may be loaded when it lies in [start - 26 h, start).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pipelines.load import LoadResult
from simulator import SimConfig, Simulator
from tests.conftest import FIXED_NOW
from tests.extractor.conftest import CLOUD_PRIMARY_KEYS, DESTINATIONS, FAST_RETRY, Loader

START = datetime(2026, 3, 1, tzinfo=UTC)  # the Loader's default start_date
SLACK = timedelta(hours=26)  # the zone-less commit date's extra re-read
LOOKBACK = timedelta(days=3)  # the default lookback_days
DAY = timedelta(days=1)
# The default statistics_period (README: Configuration); `day` and `week` are explicit choices.
GRAIN = "month"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
STATES = ("DECLINED", "MERGED", "OPEN", "SUPERSEDED")
WIRE_FORMAT = "%Y-%m-%dT%H:%M:%S+00:00"

PRIMARY_KEYS = CLOUD_PRIMARY_KEYS
ALL_TABLES = frozenset(PRIMARY_KEYS)
COMMIT_COLUMNS = ("repository_slug", "hash", "author_display_name", "author_uuid", "date_local",
                  "parent_count", "is_merge")
PR_COLUMNS = ("repository_slug", "id", "title", "state", "closed", "author_display_name",
              "author_uuid", "destination_branch", "created_at", "updated_at", "closed_at",
              "comment_count", "task_count")
MEASURES = ("added", "changed", "deleted")
DISTRIBUTION = ("average", "median", "p75", "p95", "p99", "total")
CHANGE_COLUMNS = ("commits", *(f"lines_{m}_{d}" for m in MEASURES for d in DISTRIBUTION))


# --------------------------------------------------------------------------------------------
# ground truth
# --------------------------------------------------------------------------------------------
def from_ms(ms: int) -> datetime:
    """Epoch milliseconds as aware UTC, exactly (no float rounding)."""
    return EPOCH + timedelta(milliseconds=ms)


def from_z(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def as_utc(moment: datetime) -> datetime:
    """A cursor value as aware UTC (zone-less ones are read as UTC, as the API reads them)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def day_floor(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def period_floor(moment: datetime, grain: str = GRAIN) -> datetime:
    """The start of the UTC day, ISO week (Monday) or calendar month holding `moment`."""
    day = day_floor(moment)
    if grain == "week":
        return day - timedelta(days=day.weekday())
    return day.replace(day=1) if grain == "month" else day


def period_next(start: datetime, grain: str = GRAIN) -> datetime:
    """The start of the period after the one starting at `start`."""
    if grain == "month":
        return (start.replace(day=28) + timedelta(days=4)).replace(day=1)
    return start + (timedelta(days=7) if grain == "week" else DAY)


@dataclass(frozen=True)
class Truth:
    """One host's ground truth, read at one moment."""

    clock: datetime
    workspace: str
    commits: list[dict[str, Any]]
    prs: list[dict[str, Any]]
    users: list[dict[str, Any]]
    repos: list[dict[str, Any]]

    @classmethod
    def read(cls, sim: Simulator) -> Truth:
        info = sim.info()
        return cls(datetime.fromtimestamp(info["now"], UTC), info["workspace"],
                   sim.truth("commits"), sim.truth("pull-requests"), sim.truth("users"),
                   sim.truth("repositories"))

    @property
    def uuid_of(self) -> dict[str, str]:
        """User slug -> uuid."""
        return {u["_sim"]["slug"]: u["uuid"] for u in self.users}

    def commit(self, sha: str) -> dict[str, Any]:
        return next(c for c in self.commits if c["hash"] == sha)


def instant(commit: Mapping[str, Any]) -> datetime:
    return from_z(commit["_sim"]["instant"])


def commit_row(commit: Mapping[str, Any]) -> tuple[Any, ...]:
    """A truth commit as COMMIT_COLUMNS: `date_local` is the API's naive `date` as it is."""
    parents = commit["parents"]
    return (commit["repository"]["slug"], commit["hash"], commit["author"]["display_name"],
            commit["author"]["uuid"], datetime.fromisoformat(commit["date"]), len(parents),
            len(parents) > 1)


def pr_row(pr: Mapping[str, Any]) -> tuple[Any, ...]:
    """A truth pull request as PR_COLUMNS, dates from the simulator's own milliseconds."""
    facts = pr["_sim"]
    closed = facts["closed_ms"]
    return (pr["destination"]["repository"]["slug"], pr["id"], pr["title"], pr["state"],
            pr["closed"], pr["author"]["display_name"], pr["author"]["uuid"],
            pr["destination"]["branch"]["name"], from_ms(facts["created_ms"]),
            from_ms(facts["updated_ms"]), from_ms(closed) if closed is not None else None,
            pr["comment_count"], pr["task_count"])


def percentile(ordered: list[int], fraction: float) -> float:
    """numpy's default (linear) interpolation between closest ranks."""
    if not ordered:
        return 0.0
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def distribution(values: list[int]) -> list[float]:
    ordered = sorted(values)
    return [statistics.fmean(ordered) if ordered else 0.0,
            statistics.median(ordered) if ordered else 0.0,
            percentile(ordered, 0.75), percentile(ordered, 0.95), percentile(ordered, 0.99),
            sum(ordered)]


def days(start: datetime, clock: datetime) -> list[tuple[datetime, datetime]]:
    """UTC calendar days from the one holding `start` up to `clock`; the last may be partial."""
    return periods(start, clock, "day")


def periods(start: datetime, clock: datetime, grain: str = GRAIN
            ) -> list[tuple[datetime, datetime]]:
    """UTC calendar periods from the one holding `start` up to `clock`; the last may be
    partial."""
    out = []
    low = period_floor(start, grain)
    while low < clock:
        high = period_next(low, grain)
        out.append((low, min(high, clock)))
        low = high
    return out


# --------------------------------------------------------------------------------------------
# reading the loaded dataset
# --------------------------------------------------------------------------------------------
def data_tables(loader: Loader) -> set[str]:
    """The dataset's data tables; none when the dataset (schema) was never created."""
    if loader.destination == "duckdb" and not loader.db_file.exists():
        return set()
    return {name for (name,) in loader.rows(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = "
        "'repo_analytics' AND table_name NOT LIKE '_dlt%' AND table_type = 'BASE TABLE'")}


def column_types(loader: Loader, table: str) -> dict[str, str]:
    return {row[0]: row[1] for row in loader.rows(f'DESCRIBE "{table}"')}


def select(loader: Loader, table: str, columns: Iterable[str], where: str = "") -> list[tuple]:
    names = ", ".join(f'"{c}"' for c in columns)
    return loader.rows(f'SELECT {names} FROM "{table}" {where}')


def count(loader: Loader, table: str, where: str = "") -> int:
    return loader.rows(f'SELECT count(*) FROM "{table}" {where}')[0][0]


def snapshot(loader: Loader) -> dict[str, list[tuple[Any, ...]]]:
    """Every data table's full contents without dlt's own columns, sorted."""
    out = {}
    for table in sorted(data_tables(loader)):
        columns = [c for c in column_types(loader, table) if not c.startswith("_dlt_")]
        out[table] = select(loader, table, columns, "ORDER BY ALL")
    return out


def by_key(rows: Iterable[tuple[Any, ...]], width: int) -> dict[tuple[Any, ...], tuple]:
    """Rows keyed by their first `width` values; a repeated key fails."""
    keyed: dict[tuple[Any, ...], tuple] = {}
    for row in rows:
        key = tuple(row[:width])
        assert key not in keyed, f"duplicate key {key}"
        keyed[key] = row
    return keyed


def assert_window_rows(got: dict[tuple, tuple], expected: dict[tuple, tuple[datetime, tuple]],
                       since: datetime, must_since: datetime, clock: datetime,
                       what: str) -> None:
    """Loaded rows: every expected item with instant in [must_since, clock), none outside
    [since, clock), each equal to its truth row."""
    required = {k for k, (at, _) in expected.items() if must_since <= at < clock}
    allowed = {k for k, (at, _) in expected.items() if since <= at < clock}
    missing, extra = required - set(got), set(got) - allowed
    assert not missing, f"{what}: {len(missing)} truth items not loaded, e.g. {sorted(missing)[:3]}"
    assert not extra, f"{what}: {len(extra)} rows outside the window, e.g. {sorted(extra)[:3]}"
    wrong = [(got[k], expected[k][1]) for k in got if got[k] != expected[k][1]]
    assert not wrong, f"{what}: {len(wrong)} rows differ from truth, e.g. {wrong[:2]}"


# --------------------------------------------------------------------------------------------
# table checks against truth
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Window:
    """What a load was asked for: [start, clock), restricted to some repositories and users."""

    start: datetime
    clock: datetime
    repos: frozenset[str] | None = None  # None: every repository
    users: frozenset[str] | None = None  # user uuids; None: every user
    hidden: frozenset[str] = frozenset()  # forbidden repositories (left out of 8 and 11)

    def repo_ok(self, slug: str) -> bool:
        return self.repos is None or slug in self.repos


def commit_truth(truth: Truth, repos_ok: Any) -> dict[tuple, tuple]:
    """Truth commits of the accepted repositories: key -> (instant, row)."""
    return {(c["repository"]["slug"], c["hash"]): (instant(c), commit_row(c))
            for c in truth.commits if repos_ok(c["repository"]["slug"])}


def check_repository_commits(loader: Loader, truth: Truth, window: Window,
                             no_lines: Iterable[str] = ()) -> None:
    """cloud_commits: the repository-level commits with their line counts."""
    without = set(no_lines)
    expected = {}
    for c in truth.commits:
        slug = c["repository"]["slug"]
        if window.repo_ok(slug):
            lines = (None, None) if slug in without else (c["lines"]["added"],
                                                          c["lines"]["deleted"])
            expected[(slug, c["hash"])] = (instant(c), (*commit_row(c), *lines))
    got = by_key(select(loader, "cloud_commits",
                        (*COMMIT_COLUMNS, "lines_added", "lines_deleted")), 2)
    assert_window_rows(got, expected, window.start - SLACK, window.start, window.clock,
                       "cloud_commits")


def check_workspace_commits(loader: Loader, truth: Truth, window: Window) -> None:
    expected = commit_truth(truth, lambda slug: slug not in window.hidden)
    got = by_key(select(loader, "cloud_workspace_commits", COMMIT_COLUMNS), 2)
    assert_window_rows(got, expected, window.start - SLACK, window.start, window.clock,
                       "cloud_workspace_commits")


def check_user_commits(loader: Loader, truth: Truth, window: Window) -> None:
    """cloud_user_commits: exactly each user's truth commits, tagged with the user read."""
    uuid_of = truth.uuid_of
    expected = {}
    for c in truth.commits:
        slug, user = c["repository"]["slug"], c["_sim"]["user"]
        if user is None or slug in window.hidden:
            continue
        uuid = uuid_of[user]
        if window.users is None or uuid in window.users:
            expected[(uuid, slug, c["hash"])] = (instant(c), (uuid, *commit_row(c)))
    got = by_key(select(loader, "cloud_user_commits", ("read_for_user_uuid", *COMMIT_COLUMNS)),
                 3)
    assert_window_rows(got, expected, window.start - SLACK, window.start, window.clock,
                       "cloud_user_commits")
    assert all(row[0] == row[4] for row in got.values()), "a user row authored by another"


def check_parents(loader: Loader, truth: Truth, window: Window,
                  repos: Iterable[str] | None = None) -> None:
    """cloud_commit_parents: each loaded commit's truth parents, in order, with its date."""
    wanted = None if repos is None else set(repos)
    expected = {}
    for c in truth.commits:
        slug = c["repository"]["slug"]
        if wanted is not None and slug not in wanted:
            continue
        for position, parent in enumerate(c["parents"]):
            expected[(slug, c["hash"], position)] = (
                instant(c), (slug, c["hash"], position, parent["hash"],
                             datetime.fromisoformat(c["date"])))
    got = by_key(select(loader, "cloud_commit_parents",
                        ("repository_slug", "hash", "position", "parent_hash", "date_local")), 3)
    assert_window_rows(got, expected, window.start - SLACK, window.start, window.clock,
                       "cloud_commit_parents")


def check_pull_requests(loader: Loader, truth: Truth, window: Window, level: str) -> None:
    """A pull-request table: truth PRs updated in [start, clock) with their current values."""
    table = {"repository": "cloud_pull_requests", "workspace": "cloud_workspace_pull_requests",
             "user": "cloud_user_pull_requests"}[level]
    uuid_of = truth.uuid_of
    expected = {}
    for pr in truth.prs:
        row = pr_row(pr)
        at = from_ms(pr["_sim"]["updated_ms"])
        if level == "user":
            uuid = uuid_of[pr["_sim"]["user"]]
            if window.users is None or uuid in window.users:
                expected[(uuid, *row[:2])] = (at, (uuid, *row))
        elif level == "workspace" or window.repo_ok(row[0]):
            expected[row[:2]] = (at, row)
    extra = ("read_for_user_uuid",) if level == "user" else ()
    got = by_key(select(loader, table, (*extra, *PR_COLUMNS)), len(extra) + 2)
    assert_window_rows(got, expected, window.start, window.start, window.clock, table)


def check_users(loader: Loader, truth: Truth) -> None:
    got = sorted(select(loader, "cloud_users", ("uuid", "display_name")))
    assert got == sorted((u["uuid"], u["display_name"]) for u in truth.users)


def expected_pr_statistics(truth: Truth, window: Window,
                           levels: Iterable[str] = ("workspace", "repository", "user"),
                           grain: str = GRAIN) -> dict[tuple, tuple]:
    """Per level, scope and period: PRs created in it, counted by their current state."""
    uuid_of = truth.uuid_of
    scopes: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for level in levels:
        if level == "workspace":
            scopes[(level, truth.workspace)] = truth.prs
        elif level == "repository":
            for repo in truth.repos:
                if window.repo_ok(repo["slug"]):
                    scopes[(level, repo["slug"])] = [
                        p for p in truth.prs
                        if p["destination"]["repository"]["slug"] == repo["slug"]]
        else:
            for user in truth.users:
                if window.users is None or user["uuid"] in window.users:
                    scopes[(level, user["uuid"])] = [
                        p for p in truth.prs if uuid_of[p["_sim"]["user"]] == user["uuid"]]
    expected = {}
    for (level, scope), prs in scopes.items():
        for low, high in periods(window.start, window.clock, grain):
            counts = Counter(p["state"] for p in prs
                             if low <= from_ms(p["_sim"]["created_ms"]) < high)
            expected[(level, scope, low)] = (
                level, scope, low, grain, high, "all", "created", sum(counts.values()),
                *(counts[s] for s in STATES))
    return expected


PR_STAT_COLUMNS = ("level", "scope", "period_start", "period", "period_end", "state_filter",
                   "date_type", "pull_requests", "declined", "merged", "open", "superseded")


def check_pr_statistics(loader: Loader, truth: Truth, window: Window,
                        from_day: datetime | None = None, grain: str = GRAIN,
                        **levels: Any) -> None:
    """cloud_pull_request_statistics equals the truth's counts (on periods from `from_day`).

    Rows before the window are the creation periods of pull requests the run read that were
    created before `start_date`: the refresh reads those periods too (README), and they must
    be the truth's complete counts."""
    expected = expected_pr_statistics(truth, window, grain=grain, **levels)
    got = by_key(select(loader, "cloud_pull_request_statistics", PR_STAT_COLUMNS), 3)
    before = {k for k in set(got) - set(expected) if k[2] < window.start}
    assert set(got) - before == set(expected)
    if before:
        earlier = expected_pr_statistics(
            truth, dataclasses.replace(window, start=min(k[2] for k in before)), grain=grain,
            **levels)
        wrong = [(got[k], earlier.get(k)) for k in before if got[k] != earlier.get(k)]
        assert not wrong, f"{len(wrong)} refreshed rows before the window differ: {wrong[:2]}"
    keys = [k for k in expected if from_day is None or k[2] >= from_day]
    wrong = [(got[k], expected[k]) for k in keys if got[k] != expected[k]]
    assert not wrong, f"{len(wrong)} statistics rows differ, e.g. {wrong[:2]}"
    assert sum(expected[k][7] for k in keys) > 0, "no pull request in the compared periods"


def check_change_statistics(loader: Loader, truth: Truth, window: Window,
                            from_day: datetime | None = None,
                            skipped: Iterable[str] = (), grain: str = GRAIN) -> None:
    """cloud_commit_change_statistics: per repository and period, its commits' lines."""
    left_out = set(skipped)
    expected = {}
    for repo in truth.repos:
        slug = repo["slug"]
        if not window.repo_ok(slug) or slug in left_out:
            continue
        commits = [c for c in truth.commits if c["repository"]["slug"] == slug]
        for low, high in periods(window.start, window.clock, grain):
            today = [c["lines"] for c in commits if low <= instant(c) < high]
            values: list[float] = [len(today)]
            for measure in MEASURES:
                values += distribution([
                    line["added"] + line["deleted"] if measure == "changed" else line[measure]
                    for line in today])
            expected[(slug, low)] = ((slug, low, grain, high, "include"), values)
    got = by_key(select(
        loader, "cloud_commit_change_statistics",
        ("repository_slug", "period_start", "period", "period_end", "merges", *CHANGE_COLUMNS)), 2)
    assert set(got) == set(expected)
    compared = 0.0
    for key, (head, values) in expected.items():
        if from_day is not None and key[1] < from_day:
            continue
        assert got[key][:5] == head
        assert list(got[key][5:]) == pytest.approx(values), key
        compared += values[0]
    assert compared > 0, "no commit in the compared days"


def check_primary_keys(loader: Loader) -> None:
    """No duplicates: every table's natural key is unique."""
    for table in sorted(data_tables(loader)):
        key = ", ".join(f'"{c}"' for c in PRIMARY_KEYS[table])
        total, distinct = loader.rows(
            f'SELECT (SELECT count(*) FROM "{table}"), '
            f'(SELECT count(*) FROM (SELECT DISTINCT {key} FROM "{table}"))')[0]
        assert total == distinct, f"{table}: {total} rows, {distinct} distinct keys"
        assert total > 0, f"{table} is empty"
        if "removed" in column_types(loader, table):  # README: marker rows are never stored
            assert count(loader, table, "WHERE removed") == 0, f"{table} stores marker rows"


def check_everything(loader: Loader, truth: Truth, window: Window) -> None:
    """Every table equals the truth restricted to the window."""
    check_repository_commits(loader, truth, window)
    check_workspace_commits(loader, truth, window)
    check_user_commits(loader, truth, window)
    check_parents(loader, truth, window)
    for level in ("repository", "workspace", "user"):
        check_pull_requests(loader, truth, window, level)
    check_users(loader, truth)
    check_primary_keys(loader)


# --------------------------------------------------------------------------------------------
# request log
# --------------------------------------------------------------------------------------------
def run_with_log(sim: Simulator, loader: Loader, **overrides: Any,
                 ) -> tuple[LoadResult, list[dict[str, Any]]]:
    """One load, and the API requests it made (in the simulator's log)."""
    before = sim.requests()["total"]
    result = loader.load(**overrides)
    return result, sim.requests(since=before)["log"]


def wire_time(text: str) -> datetime:
    """A since/until parameter: must carry an explicit +00:00 offset."""
    moment = datetime.strptime(text, WIRE_FORMAT)
    return moment.replace(tzinfo=UTC)


def path_part(path: str, segment: str) -> str | None:
    """The path segment after `segment` (`repos` -> slug, `users` -> uuid), if any."""
    parts = path.split("/")
    if segment in parts and parts.index(segment) + 1 < len(parts):
        return parts[parts.index(segment) + 1]
    return None


@dataclass(frozen=True)
class Cursors:
    """Each scope's newest loaded cursor value, read from the tables before a run."""

    until: datetime  # the previous run's clock
    commits: dict[tuple[str, str | None], datetime]  # (level, scope) -> date_local as UTC
    pull_requests: dict[tuple[str, str | None], datetime]
    statistics: dict[tuple[str, str | None], datetime]  # (endpoint kind, scope) -> period_end

    @classmethod
    def read(cls, loader: Loader, until: datetime, workspace: str) -> Cursors:
        def newest(table: str, scope: str, column: str, level: str) -> dict:
            return {(level, scope_value): as_utc(value) for scope_value, value in loader.rows(
                f'SELECT {scope}, max("{column}") FROM "{table}" GROUP BY 1')}

        commits = {**newest("cloud_commits", "repository_slug", "date_local", "repository"),
                   **newest("cloud_user_commits", "read_for_user_uuid", "date_local", "user"),
                   **newest("cloud_workspace_commits", f"'{workspace}'", "date_local",
                            "workspace")}
        prs = {**newest("cloud_pull_requests", "repository_slug", "updated_at", "repository"),
               **newest("cloud_user_pull_requests", "read_for_user_uuid", "updated_at", "user"),
               **newest("cloud_workspace_pull_requests", f"'{workspace}'", "updated_at",
                        "workspace")}
        stats = {("pull-requests", scope): as_utc(end) for scope, end in loader.rows(
            "SELECT scope, max(period_end) FROM cloud_pull_request_statistics GROUP BY 1")}
        stats.update({("changes", scope): as_utc(end) for scope, end in loader.rows(
            "SELECT repository_slug, max(period_end) FROM cloud_commit_change_statistics "
            "GROUP BY 1")})
        return cls(until, commits, prs, stats)


def refreshed_periods(truth: Truth, cursors: Cursors, grain: str = GRAIN
                      ) -> frozenset[tuple[str, datetime]]:
    """(scope, creation period) of each pull request a nightly run's list of that scope
    reads: the periods whose pull-request statistics the run reads again."""
    days = set()
    for p in truth.prs:
        for level, scope in (("workspace", truth.workspace),
                             ("repository", p["destination"]["repository"]["slug"]),
                             ("user", truth.uuid_of[p["_sim"]["user"]])):
            cursor = cursors.pull_requests.get((level, scope))
            if from_ms(p["_sim"]["updated_ms"]) >= (START if cursor is None
                                                     else cursor - LOOKBACK):
                days.add((scope, period_floor(from_ms(p["_sim"]["created_ms"]), grain)))
    return frozenset(days)


def assert_reads_only_look_back(log: list[dict[str, Any]], cursors: Cursors, start: datetime,
                                workspace: str,
                                refreshed: frozenset[tuple[str, datetime]] = frozenset(),
                                grain: str = GRAIN) -> None:
    """A nightly run re-reads only the look-back behind each scope's cursor: every dated
    request's since_date is no earlier than (cursor - look-back), minus 26 h for commits.
    Repository discovery reads the workspace lists from (previous clock - look-back - 26 h).
    Older pull-request statistics are read only for the (scope, period) pairs in
    `refreshed`, one period each: the creation periods of pull requests the run read."""
    discovery = cursors.until - LOOKBACK - SLACK
    checked = 0
    for entry in log:
        since_text = entry["params"].get("since_date")
        if since_text is None:
            continue
        since = wire_time(since_text)
        endpoint, path = entry["endpoint"], entry["path"]
        level = endpoint.split(".")[2]
        scope = {"repository": path_part(path, "repos"), "user": path_part(path, "users"),
                 "workspace": workspace}[level]
        if endpoint.startswith("commits.list"):
            cursor = cursors.commits.get((level, scope))
            bound = None if cursor is None else max(start - SLACK, cursor - LOOKBACK - SLACK)
        elif endpoint.startswith("pull-requests.list"):
            cursor = cursors.pull_requests.get((level, scope))
            bound = None if cursor is None else max(start, cursor - LOOKBACK)
        else:
            kind = "changes" if "changes" in endpoint else "pull-requests"
            cursor = cursors.statistics.get((kind, scope))
            bound = None if cursor is None else period_floor(max(start, cursor - LOOKBACK),
                                                              grain)
            until = wire_time(entry["params"]["until_date"])
            if (kind == "pull-requests" and (scope, since) in refreshed
                    and until == period_next(since, grain)):
                checked += 1
                continue
        if level == "workspace" and ".list." in endpoint:
            bound = discovery if bound is None else min(bound, discovery)
        if bound is None:  # a scope new in this run starts at the start
            assert since >= start - SLACK, entry
            continue
        # the wire form has whole seconds: a bound inside a second may be floored to it
        assert since >= bound.replace(microsecond=0), (
            f"{endpoint} {scope}: since {since} is before the look-back bound {bound} "
            f"(cursor {cursor})")
        checked += 1
    assert checked > 0


def assert_request_parameters(log: list[dict[str, Any]], clock: datetime,
                              grain: str = GRAIN) -> None:
    """Every request: raw-token auth, JSON, explicit +00:00 offsets, the endpoint's params,
    list requests with the run's frozen until_date, statistics in whole UTC periods of the
    run's grain."""
    until = clock.strftime(WIRE_FORMAT)
    seen: Counter[str] = Counter()
    for entry in log:
        endpoint, params = entry["endpoint"], entry["params"]
        seen[endpoint.rsplit(".", 1)[0] if endpoint.startswith("users.") else endpoint] += 1
        assert entry["auth"] == "token" and entry["accept"] == "application/json", entry
        assert entry["status"] == 200, entry
        if endpoint.startswith("users.list"):
            assert not {"since_date", "until_date"} & set(params), entry
            continue
        since = wire_time(params["since_date"])
        wire_time(params["until_date"])
        assert since < clock, entry
        if ".list." in endpoint:
            assert params["until_date"] == until, entry
            assert params["pagelen"] == "500", entry
        if endpoint.startswith("commits.list"):
            assert params["merges"] == "include" and params["order"] == "oldest", entry
            assert params.get("with_lines") == (
                "true" if endpoint == "commits.list.repository" else None), entry
        elif endpoint.startswith("pull-requests.list"):
            assert params["date_type"] == "updated" and params["state"] == "all", entry
        elif endpoint.startswith("pull-requests.statistics"):
            assert params["date_type"] == "created" and params["state"] == "all", entry
        elif endpoint == "commits.changes-statistics.repository":
            assert params["merges"] == "include", entry
        else:
            pytest.fail(f"unexpected endpoint {endpoint}")
        if ".list." not in endpoint:
            assert since == period_floor(since, grain), entry
            assert wire_time(params["until_date"]) == min(period_next(since, grain), clock), entry
            assert "pagelen" not in params, entry
    assert {e for e in seen if e != "users.list"} == {
        "commits.list.workspace", "commits.list.repository", "commits.list.user",
        "commits.changes-statistics.repository", "pull-requests.list.workspace",
        "pull-requests.list.repository", "pull-requests.list.user",
        "pull-requests.statistics.workspace", "pull-requests.statistics.repository",
        "pull-requests.statistics.user.short"}
    assert seen["users.list"] >= 1


# --------------------------------------------------------------------------------------------
# one host loaded twice, shared by the read-only tests
# --------------------------------------------------------------------------------------------
@dataclass
class Loaded:
    sim: Simulator
    loader: Loader
    truth: Truth
    window: Window
    first: LoadResult
    first_log: list[dict[str, Any]]
    first_tables: dict[str, list[tuple]]
    cursors: Cursors
    second: LoadResult
    second_log: list[dict[str, Any]]
    second_tables: dict[str, list[tuple]]
    grain: str  # the statistics_period of both runs


# Each destination with its default settings; and DuckDB with daily statistics, the explicit
# choice whose look-back and refresh edges fall on days.
LOADS = [pytest.param((destination, GRAIN), id=destination) for destination in DESTINATIONS]
LOADS.append(pytest.param(("duckdb", "day"), id="duckdb-day"))


@pytest.fixture(scope="module", params=LOADS)
def loaded(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loaded]:
    """A tiny cloud host loaded from 2026-03-01 to its clock, then loaded again unchanged,
    into each destination with its default settings (and into DuckDB by day)."""
    destination, grain = request.param
    grained = {} if grain == GRAIN else {"statistics_period": grain}
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        loader = Loader(sim, Path(tmp_path_factory.mktemp("cloud_load")), destination)
        truth = Truth.read(sim)
        first, first_log = run_with_log(sim, loader, **grained)
        first_tables = snapshot(loader)
        cursors = Cursors.read(loader, truth.clock, truth.workspace)
        second, second_log = run_with_log(sim, loader, **grained)
        yield Loaded(sim, loader, truth, Window(START, truth.clock), first, first_log,
                     first_tables, cursors, second, second_log, snapshot(loader), grain)


def test_first_run_is_clean(loaded: Loaded) -> None:
    """Both runs read every table, with no skip and no note."""
    for result in (loaded.first, loaded.second):
        assert not result.report.skips and not result.report.notes
        assert not result.report.partial
    assert set(loaded.first_tables) == ALL_TABLES


def test_column_types(loaded: Loaded) -> None:
    """The commit date stays zone-less (TIMESTAMP); pull-request and period dates are aware."""
    for table in ("cloud_commits", "cloud_workspace_commits", "cloud_user_commits",
                  "cloud_commit_parents"):
        assert column_types(loaded.loader, table)["date_local"] == "TIMESTAMP", table
    for table in ("cloud_pull_requests", "cloud_workspace_pull_requests",
                  "cloud_user_pull_requests"):
        types = column_types(loaded.loader, table)
        for name in ("created_at", "updated_at", "closed_at"):
            assert types[name] == "TIMESTAMP WITH TIME ZONE", (table, name)
    types = column_types(loaded.loader, "cloud_commits")
    assert (types["lines_added"], types["parent_count"], types["is_merge"]) == (
        "BIGINT", "INTEGER", "BOOLEAN")


def test_repository_commits_equal_truth(loaded: Loaded) -> None:
    """cloud_commits: every commit of the window with author, local date, parents and lines."""
    check_repository_commits(loaded.loader, loaded.truth, loaded.window)
    merges = loaded.loader.rows("SELECT count(*) FROM cloud_commits WHERE is_merge")[0][0]
    roots = loaded.loader.rows("SELECT count(*) FROM cloud_commits WHERE parent_count = 0")[0][0]
    assert merges > 0 and roots > 0  # both edge shapes were compared


def test_local_date_is_the_wall_time_not_the_instant(loaded: Loaded) -> None:
    """date_local is the author's wall time: instant + offset, never the UTC instant."""
    rows = dict(((s, h), d) for s, h, d in select(
        loaded.loader, "cloud_commits", ("repository_slug", "hash", "date_local")))
    shifted = 0
    for c in loaded.truth.commits:
        offset = timedelta(minutes=c["_sim"]["offset_minutes"])
        local = rows[(c["repository"]["slug"], c["hash"])]
        assert local == (instant(c) + offset).replace(tzinfo=None)
        shifted += offset != timedelta(0)
    assert shifted > 0


def test_workspace_commits_equal_truth(loaded: Loaded) -> None:
    check_workspace_commits(loaded.loader, loaded.truth, loaded.window)


def test_user_commits_equal_truth(loaded: Loaded) -> None:
    """cloud_user_commits: each user's truth commits (alias e-mails included), no one else's."""
    check_user_commits(loaded.loader, loaded.truth, loaded.window)
    users = {u for (u,) in loaded.loader.rows(
        "SELECT DISTINCT read_for_user_uuid FROM cloud_user_commits")}
    assert len(users) == len(loaded.truth.users)


def test_commit_parents_equal_truth(loaded: Loaded) -> None:
    """cloud_commit_parents: exactly the truth parents of every commit, in order."""
    check_parents(loaded.loader, loaded.truth, loaded.window)
    assert loaded.loader.rows("SELECT max(position) FROM cloud_commit_parents")[0][0] >= 1


@pytest.mark.parametrize("level", ["repository", "workspace", "user"])
def test_pull_requests_equal_truth(loaded: Loaded, level: str) -> None:
    """Each pull-request table: state (SUPERSEDED too), aware UTC dates, counts."""
    check_pull_requests(loaded.loader, loaded.truth, loaded.window, level)
    table = {"repository": "cloud_pull_requests", "workspace": "cloud_workspace_pull_requests",
             "user": "cloud_user_pull_requests"}[level]
    assert {s for (s,) in select(loaded.loader, table, ("state",))} == set(STATES)


def test_users_equal_truth(loaded: Loaded) -> None:
    check_users(loaded.loader, loaded.truth)


def test_pull_request_statistics_equal_truth(loaded: Loaded) -> None:
    """One row per level, scope and period (month by default, or day); counts by state of the
    PRs created in it."""
    check_pr_statistics(loaded.loader, loaded.truth, loaded.window, grain=loaded.grain)
    assert {p for (p,) in loaded.loader.rows(
        "SELECT DISTINCT period FROM cloud_pull_request_statistics")} == {loaded.grain}


def test_change_statistics_equal_truth(loaded: Loaded) -> None:
    """Per repository and period: commits, and line totals and distributions of it."""
    check_change_statistics(loaded.loader, loaded.truth, loaded.window, grain=loaded.grain)


def test_no_duplicate_keys(loaded: Loaded) -> None:
    check_primary_keys(loaded.loader)


def test_second_run_with_nothing_new_changes_nothing(loaded: Loaded) -> None:
    """Every table's full contents are identical after a second run at the same clock."""
    assert set(loaded.second_tables) == ALL_TABLES
    for table, rows in loaded.first_tables.items():
        assert loaded.second_tables[table] == rows, table


def test_second_run_reads_only_the_look_back(loaded: Loaded) -> None:
    """The nightly run starts each scope at its cursor minus the look-back, not at the start."""
    assert_reads_only_look_back(loaded.second_log, loaded.cursors, START,
                                loaded.truth.workspace,
                                refreshed_periods(loaded.truth, loaded.cursors, loaded.grain),
                                loaded.grain)
    assert len(loaded.second_log) < len(loaded.first_log)
    if loaded.grain == "day":  # a statistics request per day of the range, against 3 or 4
        assert len(loaded.second_log) < len(loaded.first_log) / 3


def test_requests_carry_expected_parameters(loaded: Loaded) -> None:
    """Both runs: auth, explicit offsets, frozen until, page size, list and statistics params."""
    assert_request_parameters(loaded.first_log, loaded.truth.clock, loaded.grain)
    assert_request_parameters(loaded.second_log, loaded.truth.clock, loaded.grain)


# --------------------------------------------------------------------------------------------
# incremental: the clock moves, late commits arrive, pull requests change state
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("destination", "grain"),
                         [*((d, GRAIN) for d in DESTINATIONS), ("duckdb", "day")])
def test_incremental_load_after_advance(make_sim: Any, tmp_path: Path, destination: str,
                                        grain: str) -> None:
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
    assert any(datetime.fromisoformat(c["date"]).replace(tzinfo=UTC)
               < cursors.commits[("repository", c["repository"]["slug"])] for c in late)
    for table in ("cloud_commits", "cloud_workspace_commits"):
        loaded_hashes = {h for (h,) in select(loader, table, ("hash",))}
        assert {c["hash"] for c in late} <= loaded_hashes, table
    user_hashes = {h for (h,) in select(loader, "cloud_user_commits", ("hash",))}
    assert {c["hash"] for c in late if c["_sim"]["user"]} <= user_hashes

    assert answer["pull_request_changes"]
    # A new PR whose updated date is exactly the clock lies outside [since, until): the next
    # run's look-back reads it (check_everything below holds it to the same rule).
    updated = {(p["destination"]["repository"]["slug"], p["id"]): from_ms(p["_sim"]["updated_ms"])
               for p in truth.prs}
    new_prs = [tuple(k) for k in answer["new_pull_requests"] if updated[tuple(k)] < truth.clock]
    assert new_prs
    for table in ("cloud_pull_requests", "cloud_workspace_pull_requests",
                  "cloud_user_pull_requests"):
        states = {(s, i): st for s, i, st in select(loader, table,
                                                    ("repository_slug", "id", "state"))}
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
    old_periods = {period_floor(from_ms(p["_sim"]["created_ms"]), grain) for p in truth.prs
                   if (p["destination"]["repository"]["slug"], p["id"])
                   in {(slug, number) for slug, number, _ in answer["pull_request_changes"]}}
    reread = period_floor(old.clock - LOOKBACK, grain)
    assert [d for d in old_periods if d < reread], "no changed pull request older than look-back"
    check_pr_statistics(loader, truth, window, grain=grain)
    check_change_statistics(loader, truth, window, from_day=reread, grain=grain)
    assert_reads_only_look_back(log, cursors, START, truth.workspace,
                                refreshed_periods(truth, cursors, grain), grain)
    assert_request_parameters(log, truth.clock, grain)


# --------------------------------------------------------------------------------------------
# host conditions: indexing disabled, unindexed changes, forbidden repositories
# --------------------------------------------------------------------------------------------
@dataclass
class Conditioned:
    loader: Loader
    truth: Truth
    window: Window
    result: LoadResult
    log: list[dict[str, Any]]
    loc_disabled: str
    unindexed: str
    forbidden: str


CONDITIONS_START = datetime(2026, 5, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def conditioned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Conditioned]:
    """One load of a host where one repository has indexing disabled, one has unindexed
    changes on every request, and one is forbidden to the token."""
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        slugs = sorted(r["slug"] for r in sim.truth("repositories"))
        loc, unindexed, forbidden = slugs[0], slugs[1], slugs[2]
        sim.set_conditions(loc_disabled=[loc], unindexed={unindexed: -1}, forbidden=[forbidden])
        loader = Loader(sim, Path(tmp_path_factory.mktemp("cloud_conditions")))
        truth = Truth.read(sim)
        result, log = run_with_log(sim, loader, start_date=CONDITIONS_START.date().isoformat())
        yield Conditioned(loader, truth, Window(CONDITIONS_START, truth.clock,
                                                hidden=frozenset({forbidden})),
                          result, log, loc, unindexed, forbidden)


def repo_requests(c: Conditioned, endpoint: str, slug: str) -> list[dict[str, Any]]:
    return [e for e in c.log if e["endpoint"] == endpoint and path_part(e["path"], "repos") == slug]


def test_conditions_are_reported_precisely(conditioned: Conditioned) -> None:
    """Skips name each refused scope and its kind; the lines fallback and the changes
    statistics of a repository without lines-of-code indexing are notes (a setting, not a
    failure: no partial run every night); the run is partial (the CLI's exit code 3) because
    other scopes were skipped."""
    c = conditioned
    skips = {(s.resource, s.kind) for s in c.result.report.skips}
    assert skips == {
        (f"commits.repository:{c.unindexed}", "unindexed"),
        (f"change_statistics.repository:{c.unindexed}", "unindexed"),
        (f"commits.repository:{c.forbidden}", "forbidden"),
        (f"change_statistics.repository:{c.forbidden}", "forbidden"),
    }
    assert c.result.report.partial
    notes = sorted(c.result.report.notes)
    assert len(notes) == 2
    assert notes[0].startswith(f"change_statistics.repository:{c.loc_disabled}:")
    assert notes[0].endswith("nothing to read")
    assert notes[1].startswith(f"commits.repository:{c.loc_disabled}:")
    assert all("indexing is disabled" in note for note in notes)


def test_indexing_disabled_loads_commits_without_lines(conditioned: Conditioned) -> None:
    """The repository's commits are read again without with_lines: NULL lines, all else equal;
    the other readable repositories keep their lines."""
    c = conditioned
    readable = {r["slug"] for r in c.truth.repos} - {c.unindexed, c.forbidden}
    check_repository_commits(c.loader, c.truth, replace_repos(c.window, readable),
                             no_lines=[c.loc_disabled])
    assert count(c.loader, "cloud_commits", f"WHERE repository_slug = '{c.loc_disabled}'") > 0
    assert count(c.loader, "cloud_commits", "WHERE lines_added IS NOT NULL") > 0
    requests = repo_requests(c, "commits.list.repository", c.loc_disabled)
    assert [(e["params"].get("with_lines"), e["status"]) for e in requests] == [
        ("true", 400), (None, 200)]
    assert not count(c.loader, "cloud_commit_change_statistics",
                     f"WHERE repository_slug = '{c.loc_disabled}'")


def test_unindexed_repository_is_skipped_after_retries(conditioned: Conditioned) -> None:
    """Endpoints 9 and 10 are retried (retry.skip_retry_attempts) then skipped; the workspace
    list still has the repository's commits."""
    c = conditioned
    for endpoint, label in (("commits.list.repository", "commits.repository"),
                            ("commits.changes-statistics.repository",
                             "change_statistics.repository")):
        statuses = [e["status"] for e in repo_requests(c, endpoint, c.unindexed)]
        attempts = int(FAST_RETRY["skip_retry_attempts"])
        assert statuses == [409] * attempts, endpoint
        assert c.result.report.counts[f"{label}:{c.unindexed}"].retries == attempts - 1
    for table in ("cloud_commits", "cloud_commit_change_statistics"):
        assert not count(c.loader, table, f"WHERE repository_slug = '{c.unindexed}'")
    check_workspace_commits(c.loader, c.truth, c.window)
    assert count(c.loader, "cloud_workspace_commits",
                 f"WHERE repository_slug = '{c.unindexed}'") > 0


def test_forbidden_repository_is_skipped_and_absent(conditioned: Conditioned) -> None:
    """Its commits are in no commit table; its pull requests (not refused) are loaded."""
    c = conditioned
    for table in ("cloud_commits", "cloud_workspace_commits", "cloud_user_commits",
                  "cloud_commit_parents", "cloud_commit_change_statistics"):
        assert not count(c.loader, table, f"WHERE repository_slug = '{c.forbidden}'")
    assert [e["status"] for e in repo_requests(c, "commits.list.repository", c.forbidden)] == [
        403]
    check_user_commits(c.loader, c.truth, c.window)
    check_pull_requests(c.loader, c.truth, c.window, "repository")
    assert count(c.loader, "cloud_pull_requests", f"WHERE repository_slug = '{c.forbidden}'") > 0


def test_other_repositories_load_fully_under_conditions(conditioned: Conditioned) -> None:
    """Parents and change statistics of every readable repository, and every key unique."""
    c = conditioned
    others = {r["slug"] for r in c.truth.repos} - {c.loc_disabled, c.unindexed, c.forbidden}
    assert len(others) == 2
    # parents come from all three commit lists: the unindexed repository's via 8 and 11
    check_parents(c.loader, c.truth, c.window, repos=others | {c.loc_disabled, c.unindexed})
    check_change_statistics(c.loader, c.truth, c.window,
                            skipped={c.loc_disabled, c.unindexed, c.forbidden})
    check_primary_keys(c.loader)


def replace_repos(window: Window, repos: Iterable[str]) -> Window:
    return Window(window.start, window.clock, frozenset(repos), window.users, window.hidden)


# --------------------------------------------------------------------------------------------
# configured scopes
# --------------------------------------------------------------------------------------------
SCOPES_START = datetime(2026, 5, 20, tzinfo=UTC)


def test_configured_repository_and_user_only(make_sim: Any, tmp_path: Path) -> None:
    """repositories=[slug] and users=[uuid]: only those are read at their levels, and a late
    start_date bounds every table (commits from start - 26 h at the earliest)."""
    sim = make_sim(edition="cloud")
    truth = Truth.read(sim)
    slug = "Ui Api 3"  # spaces in the slug: quoted in the path
    assert slug in {r["slug"] for r in truth.repos}
    user = max(truth.users, key=lambda u: sum(
        1 for c in truth.commits if c["_sim"]["user"] == u["_sim"]["slug"]))["uuid"]
    loader = Loader(sim, tmp_path)
    result, log = run_with_log(sim, loader, repositories=[slug], users=[user],
                               start_date=SCOPES_START.date().isoformat())
    assert not result.report.skips
    window = Window(SCOPES_START, truth.clock, frozenset({slug}), frozenset({user}))
    # the window's lower edge is exercised: older commits of the repository exist
    assert any(instant(c) < SCOPES_START - SLACK for c in truth.commits
               if c["repository"]["slug"] == slug)
    for entry in log:
        if entry["endpoint"].endswith(".repository"):
            assert path_part(entry["path"], "repos") == slug, entry
        if ".user" in entry["endpoint"]:
            assert path_part(entry["path"], "users") == user, entry
    endpoints = {e["endpoint"] for e in log}
    assert {"commits.list.repository", "commits.list.user"} <= endpoints
    check_repository_commits(loader, truth, window)
    check_user_commits(loader, truth, window)
    check_workspace_commits(loader, truth, window)
    check_pull_requests(loader, truth, window, "repository")
    check_pull_requests(loader, truth, window, "user")
    check_pull_requests(loader, truth, window, "workspace")
    check_pr_statistics(loader, truth, window)
    check_change_statistics(loader, truth, window)
    check_primary_keys(loader)


def test_repository_level_only(make_sim: Any, tmp_path: Path) -> None:
    """levels=["repository"]: no workspace or user table, no user or statistics request above
    the repository level (the workspace lists are read only to discover repositories)."""
    sim = make_sim(edition="cloud")
    truth = Truth.read(sim)
    loader = Loader(sim, tmp_path)
    result, log = run_with_log(sim, loader, levels=["repository"],
                               start_date=SCOPES_START.date().isoformat())
    assert not result.report.skips
    assert data_tables(loader) == {"cloud_commits", "cloud_commit_parents",
                                   "cloud_pull_requests", "cloud_pull_request_statistics",
                                   "cloud_commit_change_statistics"}
    endpoints = {e["endpoint"] for e in log}
    assert {e for e in endpoints if not e.endswith(".repository")} <= {
        "commits.list.workspace", "pull-requests.list.workspace"}
    assert {path_part(e["path"], "repos") for e in log
            if e["endpoint"] == "commits.list.repository"} == {r["slug"] for r in truth.repos}
    window = Window(SCOPES_START, truth.clock)
    check_repository_commits(loader, truth, window)
    check_pr_statistics(loader, truth, window, levels=("repository",))


def test_commit_resources_only(make_sim: Any, tmp_path: Path) -> None:
    """resources=["commits"]: the three commit tables and their parents, nothing else."""
    sim = make_sim(edition="cloud")
    truth = Truth.read(sim)
    loader = Loader(sim, tmp_path)
    result, log = run_with_log(sim, loader, resources=["commits"],
                               start_date=SCOPES_START.date().isoformat())
    assert not result.report.skips
    assert data_tables(loader) == {"cloud_commits", "cloud_workspace_commits",
                                   "cloud_user_commits", "cloud_commit_parents"}
    endpoints = {e["endpoint"] for e in log}
    assert not {e for e in endpoints if "statistics" in e}
    assert {e for e in endpoints if e.startswith("pull-requests")} <= {
        "pull-requests.list.workspace"}  # repository discovery only
    window = Window(SCOPES_START, truth.clock)
    check_repository_commits(loader, truth, window)
    check_user_commits(loader, truth, window)
    check_parents(loader, truth, window)


def test_quiet_repository_read_before_is_still_read(make_sim: Any, tmp_path: Path) -> None:
    """A repository read in an earlier run is read again when the discovery window shows no
    activity for it (README: discovered repositories plus every repository seen before)."""
    sim = make_sim(edition="cloud")
    truth = Truth.read(sim)
    activity: dict[str, list[datetime]] = {}
    for c in truth.commits:
        activity.setdefault(c["repository"]["slug"], []).append(instant(c))
    for pr in truth.prs:
        activity.setdefault(pr["destination"]["repository"]["slug"], []).extend(
            from_ms(pr["_sim"][k]) for k in ("created_ms", "updated_ms"))
    gap, low, high, slug = max((b - a, a, b, slug) for slug, times in activity.items()
                               for a, b in zip(sorted(times), sorted(times)[1:], strict=False))
    first = (low + timedelta(days=5, hours=2)).replace(minute=0, second=0, microsecond=0)
    second = first + timedelta(hours=6)
    assert second < high, f"no quiet gap long enough ({gap})"
    loader = Loader(sim, tmp_path)
    args: dict[str, Any] = dict(levels=["repository"], resources=["commits"],
                                start_date=(low - timedelta(days=5)).isoformat())
    loader.load(now=first, **args)
    quiet = f"WHERE repository_slug = '{slug}' ORDER BY ALL"
    rows = select(loader, "cloud_commits", COMMIT_COLUMNS, quiet)
    assert rows
    result, log = run_with_log(sim, loader, now=second, **args)
    assert not result.report.skips
    discovery = [wire_time(e["params"]["since_date"]) for e in log
                 if e["endpoint"] in ("commits.list.workspace", "pull-requests.list.workspace")]
    assert discovery and min(discovery) > low  # the quiet repository is not discoverable
    assert slug in {path_part(e["path"], "repos") for e in log
                    if e["endpoint"] == "commits.list.repository"}
    assert select(loader, "cloud_commits", COMMIT_COLUMNS, quiet) == rows
    start = datetime.fromisoformat(args["start_date"])
    check_repository_commits(loader, truth, Window(start, second))
    check_parents(loader, truth, Window(start, second))
    check_primary_keys(loader)
