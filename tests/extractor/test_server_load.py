"""End-to-end loads of the self-hosted edition: real HTTP to the simulator, real DuckDB, truth.

Every expected value is computed here from the simulator's ground truth (`sim.truth(kind)`,
the clock of `sim.info()`), from the spec and from the README, never from extractor code.
Self-hosted cursors are aware UTC instants, so a run reads [start, clock): a commit belongs to
the window when its `authorTimestamp` lies in it, a pull request when its `updatedDate` does.
Scopes below the global level are discovered from the global lists: repositories (and their
projects) with any commit or pull request in the window, users from the `user` objects of
commits and the authors of pull requests seen there.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
import requests

from pipelines.cli import root_cause as cause_of
from pipelines.load import LoadResult
from simulator import SimConfig, Simulator
from sources.repo_analytics import FatalApiError
from tests.conftest import FIXED_NOW
from tests.extractor.conftest import DATASET, DESTINATIONS, FAST_RETRY, Loader
from tests.extractor.test_cloud_load import (
    GRAIN,
    as_utc,
    assert_window_rows,
    by_key,
    column_types,
    count,
    data_tables,
    from_ms,
    period_floor,
    period_next,
    periods,
    run_with_log,
    select,
)

START = datetime(2026, 3, 1, tzinfo=UTC)  # the Loader's default start_date
LATE_START = datetime(2026, 5, 1, tzinfo=UTC)  # a month: for the loads of single features
CLOCK = datetime.fromtimestamp(FIXED_NOW, UTC)
LOOKBACK = timedelta(days=3)  # the default lookback_days
# Discovery reads the global lists from 26 h before the start: the slack of the cloud's
# zone-less commit date, applied to the self-hosted edition too (its dates are aware).
DISCOVERY_SLACK = timedelta(hours=26)
DAY = timedelta(days=1)
MAX_CSV_WINDOW = timedelta(days=366)
WIRE_FORMAT = "%Y-%m-%dT%H:%M:%S+00:00"
LEVELS = ("global", "project", "repository", "user")
KINDS = ("commits", "pull_requests")
LEVEL_TABLES: dict[str, dict[str, str]] = {
    kind: {"global": f"server_{kind}_global", "project": f"server_{kind}_project",
           "repository": f"server_{kind}", "user": f"server_{kind}_user"} for kind in KINDS}
PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    **{LEVEL_TABLES[kind][level]: (("read_for_user",) if level == "user" else ())
       + ("project_key", "repository_slug", "id") for kind in KINDS for level in LEVELS},
    "server_commit_parents": ("project_key", "repository_slug", "id", "position"),
    "server_pull_request_reviewers": ("project_key", "repository_slug", "id", "position"),
    "server_pull_request_participants": ("project_key", "repository_slug", "id", "position"),
    "server_commit_statistics": ("level", "scope", "period_start", "period", "merges"),
    "server_pull_request_statistics": ("level", "scope", "period_start", "period",
                                       "state_filter", "date_type"),
    "server_commit_exports": ("level", "scope", "project", "repository", "commit_hash"),
    "server_pull_request_exports": ("level", "scope", "project", "repository",
                                    "pull_request_id"),
    "server_commit_files": ("project_key", "repository_slug", "id", "path"),
}
ALL_TABLES = frozenset(PRIMARY_KEYS) - {"server_commit_files"}
COMMIT_COLUMNS = ("project_key", "repository_slug", "id", "repository_name", "project_name",
                  "author_display_name", "author_email", "user_name", "user_display_name",
                  "user_email", "author_timestamp", "lines_added", "lines_deleted",
                  "parent_count", "is_merge")
PR_COLUMNS = ("project_key", "repository_slug", "id", "title", "description", "state", "open",
              "closed", "locked", "version", "created_at", "updated_at", "author_user_name",
              "author_display_name", "author_email", "from_branch", "from_ref",
              "from_project_key", "from_repository_slug", "from_latest_commit", "to_branch",
              "to_ref", "to_latest_commit", "repository_name", "project_name", "link")
LIST_COLUMNS = {"commits": COMMIT_COLUMNS, "pull_requests": PR_COLUMNS}
PEOPLE_COLUMNS = ("project_key", "repository_slug", "id", "position", "user_name",
                  "user_display_name", "user_email", "role", "approved", "status", "updated_at")
COMMIT_STAT_COLUMNS = ("level", "scope", "period_start", "period", "period_end", "merges",
                       "commits", "lines_added", "lines_deleted")
PR_STAT_COLUMNS = ("level", "scope", "period_start", "period", "period_end", "state_filter",
                   "date_type", "pull_requests", "declined", "merged", "open")
EXPORT_META = ("window_start", "window_end", "row_number")
CSV_KEYS = {"commits": ("project", "repository", "commit_hash"),
            "pull-requests": ("project", "repository", "pull_request_id")}
EXPORT_TABLES = {"commits": "server_commit_exports",
                 "pull-requests": "server_pull_request_exports"}


# --------------------------------------------------------------------------------------------
# ground truth
# --------------------------------------------------------------------------------------------
def from_z(text: str) -> datetime:
    """The API's `authorTimestamp` (`...Z`) as aware UTC."""
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def wire(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(WIRE_FORMAT)


def wire_time(text: str) -> datetime:
    """A sinceDate/untilDate parameter: must carry an explicit +00:00 offset."""
    return datetime.strptime(text, WIRE_FORMAT).replace(tzinfo=UTC)


def project_of(item: Mapping[str, Any]) -> str:
    repo = item["repository"] if "repository" in item else item["toRef"]["repository"]
    return str(repo["project"]["key"])


def repo_of(item: Mapping[str, Any]) -> str:
    """The repository scope key, `KEY/slug`."""
    repo = item["repository"] if "repository" in item else item["toRef"]["repository"]
    return f"{repo['project']['key']}/{repo['slug']}"


def user_of(item: Mapping[str, Any]) -> str | None:
    """The user a level-`user` list counts the item for: the owning user of a commit (also
    through an alias e-mail), the author of a pull request."""
    if "authorTimestamp" in item:
        return item["_sim"]["user"]
    return str(item["author"]["user"]["name"])


def at(item: Mapping[str, Any]) -> datetime:
    """The cursor instant: a commit's author time, a pull request's updated date."""
    if "authorTimestamp" in item:
        return from_z(item["authorTimestamp"])
    return from_ms(item["updatedDate"])


def commit_row(c: Mapping[str, Any]) -> tuple[Any, ...]:
    """A truth commit as COMMIT_COLUMNS; merge and parent facts from the simulator's own."""
    repo, user = c["repository"], c.get("user") or {}
    return (repo["project"]["key"], repo["slug"], c["id"], repo["name"],
            repo["project"]["name"], c["author"]["displayName"], c["author"]["emailAddress"],
            user.get("name"), user.get("displayName"), user.get("emailAddress"),
            from_z(c["authorTimestamp"]), c["linesOfCode"]["added"],
            c["linesOfCode"]["deleted"], len(c["_sim"]["parents"]), c["_sim"]["is_merge"])


def pr_row(pr: Mapping[str, Any]) -> tuple[Any, ...]:
    """A truth pull request as PR_COLUMNS, dates from epoch milliseconds exactly."""
    to, source, author = pr["toRef"], pr["fromRef"], pr["author"]["user"]
    return (to["repository"]["project"]["key"], to["repository"]["slug"], pr["id"], pr["title"],
            pr["description"], pr["state"], pr["open"], pr["closed"], pr["locked"],
            pr["version"], from_ms(pr["createdDate"]), from_ms(pr["updatedDate"]),
            author["name"], author["displayName"], author["emailAddress"],
            source["displayId"], source["id"], source["repository"]["project"]["key"],
            source["repository"]["slug"], source["latestCommit"], to["displayId"], to["id"],
            to["latestCommit"], to["repository"]["name"], to["repository"]["project"]["name"],
            pr["links"]["self"][0]["href"])


@dataclass(frozen=True)
class Truth:
    """One host's ground truth, read at one moment."""

    clock: datetime
    commits: list[dict[str, Any]]
    prs: list[dict[str, Any]]
    users: list[dict[str, Any]]
    repos: list[dict[str, Any]]
    projects: list[dict[str, Any]]

    @classmethod
    def read(cls, sim: Simulator) -> Truth:
        return cls(datetime.fromtimestamp(sim.info()["now"], UTC), sim.truth("commits"),
                   sim.truth("pull-requests"), sim.truth("users"), sim.truth("repositories"),
                   sim.truth("projects"))

    def items(self, kind: str) -> list[dict[str, Any]]:
        return self.commits if kind == "commits" else self.prs


@dataclass(frozen=True)
class Window:
    """What a load read: [start, clock) of the projects the caller may read (None: all)."""

    start: datetime
    clock: datetime
    projects: frozenset[str] | None = None

    def readable(self, item: Mapping[str, Any]) -> bool:
        return self.projects is None or project_of(item) in self.projects

    def holds(self, item: Mapping[str, Any], slack: timedelta = timedelta(0)) -> bool:
        return self.readable(item) and self.start - slack <= at(item) < self.clock


def expected_scopes(truth: Truth, window: Window) -> dict[str, set[str]]:
    """Scopes per level, as the README says they are discovered from the global lists."""
    commits = [c for c in truth.commits if window.holds(c, DISCOVERY_SLACK)]
    prs = [p for p in truth.prs if window.holds(p, DISCOVERY_SLACK)]
    repos = {repo_of(i) for i in (*commits, *prs)}
    users = {c["user"]["name"] for c in commits if "user" in c} | {user_of(p) for p in prs}
    return {"global": {"global"}, "project": {r.split("/")[0] for r in repos},
            "repository": repos, "user": {u for u in users if u}}


def in_scope(level: str, scope: str, item: Mapping[str, Any]) -> bool:
    if level == "global":
        return True
    if level == "project":
        return project_of(item) == scope
    if level == "repository":
        return repo_of(item) == scope
    return user_of(item) == scope


# --------------------------------------------------------------------------------------------
# table checks against truth
# --------------------------------------------------------------------------------------------
def check_list(loader: Loader, truth: Truth, window: Window, kind: str, level: str,
               scopes: Mapping[str, set[str]]) -> None:
    """A commit or pull-request table at one level equals the truth of its scopes."""
    row_of = commit_row if kind == "commits" else pr_row
    expected: dict[tuple, tuple[datetime, tuple]] = {}
    for item in truth.items(kind):
        if not window.readable(item):
            continue
        row = row_of(item)
        if level == "user":
            user = user_of(item)
            if user in scopes["user"]:
                expected[(user, *row[:3])] = (at(item), (user, *row))
        elif any(in_scope(level, scope, item) for scope in scopes[level]):
            expected[row[:3]] = (at(item), row)
    table = LEVEL_TABLES[kind][level]
    extra = ("read_for_user",) if level == "user" else ()
    got = by_key(select(loader, table, (*extra, *LIST_COLUMNS[kind])), len(extra) + 3)
    assert_window_rows(got, expected, window.start, window.start, window.clock, table)


def check_parents(loader: Loader, truth: Truth, window: Window) -> None:
    """server_commit_parents: every loaded commit's parents, ids exactly as served."""
    expected = {}
    for c in truth.commits:
        if window.readable(c):
            head = commit_row(c)[:3]
            for position, parent in enumerate(c["parents"]):
                expected[(*head, position)] = (at(c), (*head, position, parent["id"], at(c)))
    got = by_key(select(loader, "server_commit_parents",
                        ("project_key", "repository_slug", "id", "position", "parent_id",
                         "author_timestamp")), 4)
    assert_window_rows(got, expected, window.start, window.start, window.clock,
                       "server_commit_parents")


def check_people(loader: Loader, truth: Truth, window: Window, which: str,
                 leave_out: Iterable[tuple[str, int]] = ()) -> None:
    """server_pull_request_reviewers / _participants: exactly each PR's list, in order
    (PRs `leave_out`, as (slug, id), are compared elsewhere)."""
    left = set(leave_out)
    expected = {}
    for pr in truth.prs:
        if window.readable(pr) and (pr["toRef"]["repository"]["slug"], pr["id"]) not in left:
            head = pr_row(pr)[:3]
            for position, person in enumerate(pr[which]):
                user = person["user"]
                expected[(*head, position)] = (at(pr), (
                    *head, position, user["name"], user["displayName"], user["emailAddress"],
                    person["role"], person["approved"], person["status"], at(pr)))
    table = f"server_pull_request_{which}"
    got = by_key((r for r in select(loader, table, PEOPLE_COLUMNS) if (r[1], r[2]) not in left),
                 4)
    assert_window_rows(got, expected, window.start, window.start, window.clock, table)


def expected_commit_statistics(truth: Truth, window: Window, scopes: Mapping[str, set[str]],
                               grain: str = GRAIN) -> dict[tuple, tuple]:
    """Per level, scope and UTC period (month by default): its commits and line totals."""
    expected = {}
    for level, names in scopes.items():
        for scope in names:
            mine = [c for c in truth.commits if window.readable(c) and in_scope(level, scope, c)]
            for low, high in periods(window.start, window.clock, grain):
                today = [c["linesOfCode"] for c in mine if low <= at(c) < high]
                expected[(level, scope, low)] = (
                    level, scope, low, grain, high, "include", len(today),
                    sum(x["added"] for x in today), sum(x["deleted"] for x in today))
    return expected


def expected_pr_statistics(truth: Truth, window: Window, scopes: Mapping[str, set[str]],
                           grain: str = GRAIN) -> dict[tuple, tuple]:
    """Per level, scope and UTC period: PRs created in it, counted by their current state."""
    return pr_statistics_rows(truth, window, [
        (level, scope, low) for level, names in scopes.items() for scope in names
        for low, _ in periods(window.start, window.clock, grain)], grain)


def pr_statistics_rows(truth: Truth, window: Window, keys: Iterable[tuple[str, str, datetime]],
                       grain: str = GRAIN) -> dict[tuple, tuple]:
    """The truth's row of each (level, scope, UTC period start): PRs created in the period (up
    to the clock) by state."""
    expected = {}
    for level, scope, low in keys:
        high = min(period_next(low, grain), window.clock)
        states = Counter(p["state"] for p in truth.prs
                         if window.readable(p) and in_scope(level, scope, p)
                         and low <= from_ms(p["createdDate"]) < high)
        expected[(level, scope, low)] = (
            level, scope, low, grain, high, "all", "created", sum(states.values()),
            states["DECLINED"], states["MERGED"], states["OPEN"])
    return expected


def check_statistics(loader: Loader, table: str, expected: dict[tuple, tuple],
                     from_day: datetime | None = None) -> None:
    """One row per level, scope and period; values equal on the periods from `from_day`."""
    columns = COMMIT_STAT_COLUMNS if "commit" in table else PR_STAT_COLUMNS
    got = by_key(select(loader, table, columns), 3)  # (level, scope, period_start)
    assert set(got) == set(expected), (
        f"{table}: missing {sorted(set(expected) - set(got))[:3]}, "
        f"extra {sorted(set(got) - set(expected))[:3]}")
    keys = [k for k in expected if from_day is None or k[2] >= from_day]
    wrong = [(got[k], expected[k]) for k in keys if got[k] != expected[k]]
    assert not wrong, f"{table}: {len(wrong)} rows differ from truth, e.g. {wrong[:2]}"
    assert sum(expected[k][7 if "pull" in table else 6] for k in keys) > 0, "nothing compared"


def check_primary_keys(loader: Loader) -> None:
    """Every table's natural key is unique and never NULL; no table is empty."""
    for table in sorted(data_tables(loader)):
        key = ", ".join(f'"{c}"' for c in PRIMARY_KEYS[table])
        nulls = " OR ".join(f'"{c}" IS NULL' for c in PRIMARY_KEYS[table])
        total, distinct, null = loader.rows(
            f'SELECT (SELECT count(*) FROM "{table}"), '
            f'(SELECT count(*) FROM (SELECT DISTINCT {key} FROM "{table}")), '
            f'(SELECT count(*) FROM "{table}" WHERE {nulls})')[0]
        assert total == distinct, f"{table}: {total} rows, {distinct} distinct keys"
        assert null == 0, f"{table}: {null} rows with a NULL key column"
        assert total > 0, f"{table} is empty"
        if "removed" in column_types(loader, table):  # README: marker rows are never stored
            assert count(loader, table, "WHERE removed") == 0, f"{table} stores marker rows"


def check_lists(loader: Loader, truth: Truth, window: Window,
                scopes: Mapping[str, set[str]]) -> None:
    """Every list table at every level, and the child tables."""
    for kind in KINDS:
        for level in LEVELS:
            check_list(loader, truth, window, kind, level, scopes)
    check_parents(loader, truth, window)
    check_people(loader, truth, window, "reviewers")
    check_people(loader, truth, window, "participants")


def contents(loader: Loader, tables: Iterable[str] | None = None,
             drop: Iterable[str] = EXPORT_META) -> dict[str, list[tuple[Any, ...]]]:
    """Tables' full contents without dlt's columns (and `drop`: an export row's window),
    sorted."""
    out = {}
    for table in sorted(tables if tables is not None else data_tables(loader)):
        columns = [c for c in column_types(loader, table)
                   if not c.startswith("_dlt_") and c not in drop]
        out[table] = select(loader, table, columns, "ORDER BY ALL")
    return out


# --------------------------------------------------------------------------------------------
# request log and CSV
# --------------------------------------------------------------------------------------------
def scope_of_path(path: str, prefix: str) -> tuple[str, str]:
    """(level, scope key) of an API path, as the extractor names its scopes."""
    parts = path[len(prefix):].strip("/").split("/")
    if parts[0] == "projects" and len(parts) > 2 and parts[2] == "repos":
        return "repository", f"{parts[1]}/{parts[3]}"
    if parts[0] == "projects":
        return "project", parts[1]
    if parts[0] == "users":
        return "user", parts[1]
    return "global", "global"


def csv_value(name: str, text: str) -> Any:
    """A CSV cell typed as the README says (by the normalised column name)."""
    if text == "":
        return None
    if re.search(r"(^|_)date$", name):
        return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
    if name == "merge_commit":
        assert text in ("true", "false"), text
        return text == "true"
    if name.startswith("lines_") or name.endswith("_id") or name.endswith("_s"):
        return int(text)
    return text


def snake(header: str) -> str:
    """`Time to open (s)` -> `time_to_open_s`."""
    return re.sub(r"[^0-9a-z]+", "_", header.lower()).strip("_")


def served_csv(sim: Simulator, entry: Mapping[str, Any], auth: tuple[str, str],
               ) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Fetch the CSV a logged export request got, ourselves: (column names, typed rows)."""
    response = requests.get(sim.base_url + entry["path"], params=entry["params"], auth=auth,
                            timeout=30)
    assert response.status_code == 200 and response.headers["Content-Type"].startswith(
        "text/csv"), response.text[:200]
    reader = csv.reader(io.StringIO(response.content.decode("utf-8"), newline=""))
    names = [snake(h) for h in next(reader)]
    return names, [tuple(csv_value(n, v) for n, v in zip(names, row, strict=True))
                   for row in reader]


def check_exports_equal_served(loader: Loader, sim: Simulator, log: list[dict[str, Any]],
                               auth: tuple[str, str]) -> dict[str, int]:
    """Each export table holds, per level and scope, exactly the rows the CSV endpoints serve
    for the windows the run asked for (a later window's row replaces an earlier one's)."""
    prefix = sim.info()["api_prefix"]
    served: dict[str, dict[tuple, tuple]] = {"commits": {}, "pull-requests": {}}
    names_of: dict[str, list[str]] = {}
    for entry in sorted((e for e in log if ".csv." in e["endpoint"]), key=lambda e: e["n"]):
        kind = entry["endpoint"].split(".")[0]
        level, scope = scope_of_path(entry["path"], prefix)
        names, rows = served_csv(sim, entry, auth)
        names_of[kind] = names
        positions = [names.index(k) for k in CSV_KEYS[kind]]
        for row in rows:
            served[kind][(level, scope, *(row[p] for p in positions))] = (level, scope, *row)
    sizes = {}
    for kind, expected in served.items():
        assert expected, f"no {kind} export was read"
        table = EXPORT_TABLES[kind]
        keyed = {}
        positions = [names_of[kind].index(k) + 2 for k in CSV_KEYS[kind]]
        for row in select(loader, table, ("level", "scope", *names_of[kind])):
            key = (row[0], row[1], *(row[p] for p in positions))
            assert key not in keyed, f"{table}: duplicate key {key}"
            keyed[key] = row
        missing, extra = set(expected) - set(keyed), set(keyed) - set(expected)
        assert not missing and not extra, (
            f"{table}: missing {sorted(missing, key=str)[:3]}, extra {sorted(extra, key=str)[:3]}")
        wrong = [(keyed[k], expected[k]) for k in expected if keyed[k] != expected[k]]
        assert not wrong, f"{table}: {len(wrong)} rows differ from the CSV, e.g. {wrong[:2]}"
        sizes[kind] = len(expected)
    return sizes


def assert_request_parameters(log: list[dict[str, Any]], clock: datetime,
                              auth: str = "basic", grain: str = GRAIN) -> None:
    """Every request: the auth scheme, explicit +00:00 offsets, the run's frozen untilDate on
    lists, the endpoint's parameters, page sizes at the maxima, statistics in whole UTC
    periods of the run's grain, CSV windows of at most 366 days."""
    until = wire(clock)
    for entry in log:
        endpoint, params = entry["endpoint"], entry["params"]
        assert entry["auth"] == auth and entry["status"] == 200, entry
        kind, op, _ = endpoint.split(".")
        since, end = wire_time(params["sinceDate"]), wire_time(params["untilDate"])
        assert since < end <= clock, entry
        if kind == "commits":
            assert params["merges"] == "include", entry
        else:
            assert params["state"] == "all", entry
        if op == "list":
            assert params["untilDate"] == until, entry
            if kind == "commits":
                assert (params["order"], params["limit"]) == ("oldest", "1000"), entry
            else:
                assert (params["dateType"], params["limit"]) == ("updated", "500"), entry
        elif op == "statistics":
            assert "limit" not in params and since == period_floor(since, grain), entry
            assert end == min(period_next(since, grain), clock), entry
            if kind == "pull-requests":
                assert params["dateType"] == "created", entry
        elif op == "csv":
            assert end - since <= MAX_CSV_WINDOW, entry
        else:
            pytest.fail(f"unexpected endpoint {endpoint}")


def single_commit_ids(log: list[dict[str, Any]]) -> list[str]:
    """Commit ids of the single-commit requests in a log, in request order."""
    return [e["path"].rsplit("/", 1)[1] for e in log
            if e["endpoint"] == "commits.single.repository"]


# --------------------------------------------------------------------------------------------
# one tiny host loaded twice at the same clock, shared by the read-only tests
# --------------------------------------------------------------------------------------------
@dataclass
class Loaded:
    sim: Simulator
    loader: Loader
    truth: Truth
    window: Window
    scopes: dict[str, set[str]]
    first: LoadResult
    first_log: list[dict[str, Any]]
    first_tables: dict[str, list[tuple]]
    second: LoadResult
    second_log: list[dict[str, Any]]
    second_tables: dict[str, list[tuple]]
    cursors: dict[tuple[str, str, str], datetime]
    grain: str  # the statistics_period of both runs


def read_cursors(loader: Loader) -> dict[tuple[str, str, str], datetime]:
    """(kind, level, scope) -> the newest cursor value loaded for that list scope."""
    scope_sql = {"global": "'global'", "project": "project_key",
                 "repository": "project_key || '/' || repository_slug", "user": "read_for_user"}
    cursors = {}
    for kind, column in (("commits", "author_timestamp"), ("pull_requests", "updated_at")):
        for level in LEVELS:
            for scope, newest in loader.rows(
                    f'SELECT {scope_sql[level]}, max({column}) FROM '
                    f'"{LEVEL_TABLES[kind][level]}" GROUP BY 1'):
                cursors[(kind.replace("_", "-"), level, scope)] = newest
    return cursors


# Each destination with its default settings; and DuckDB with daily statistics, the explicit
# choice whose look-back and refresh edges fall on days.
LOADS = [pytest.param((destination, GRAIN), id=destination) for destination in DESTINATIONS]
LOADS.append(pytest.param(("duckdb", "day"), id="duckdb-day"))


@pytest.fixture(scope="module", params=LOADS)
def loaded(request: pytest.FixtureRequest, server_sim: Simulator,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loaded]:
    """A tiny self-hosted host, every level and resource, from 2026-03-01 to its clock, then
    loaded again with nothing new, into each destination with its default settings (and into
    DuckDB by day)."""
    destination, grain = request.param
    grained = {} if grain == GRAIN else {"statistics_period": grain}
    sim = server_sim
    loader = Loader(sim, Path(tmp_path_factory.mktemp("server_load")), destination)
    truth = Truth.read(sim)
    window = Window(START, truth.clock)
    first, first_log = run_with_log(sim, loader, **grained)
    first_tables = contents(loader)
    cursors = read_cursors(loader)
    second, second_log = run_with_log(sim, loader, **grained)
    yield Loaded(sim, loader, truth, window, expected_scopes(truth, window), first, first_log,
                 first_tables, second, second_log, contents(loader), cursors, grain)


def test_runs_are_clean(loaded: Loaded) -> None:
    """Both runs: no skip, no note; every table of the edition (no files: opt-in)."""
    for result in (loaded.first, loaded.second):
        assert not result.report.skips and not result.report.notes
    assert set(loaded.first_tables) == ALL_TABLES
    assert loaded.truth.clock == CLOCK


def test_column_types(loaded: Loaded) -> None:
    """Instants are aware (TIMESTAMP WITH TIME ZONE); counts are integers; flags booleans;
    CSV columns typed by name."""
    tz, big = "TIMESTAMP WITH TIME ZONE", "BIGINT"
    for level in LEVELS:
        types = column_types(loaded.loader, LEVEL_TABLES["commits"][level])
        assert (types["author_timestamp"], types["lines_added"], types["lines_deleted"],
                types["parent_count"], types["is_merge"]) == (tz, big, big, "INTEGER",
                                                              "BOOLEAN"), level
        types = column_types(loaded.loader, LEVEL_TABLES["pull_requests"][level])
        assert (types["created_at"], types["updated_at"], types["id"], types["version"],
                types["open"], types["closed"], types["locked"]) == (
            tz, tz, big, big, "BOOLEAN", "BOOLEAN", "BOOLEAN"), level
    for table in ("server_commit_statistics", "server_pull_request_statistics"):
        types = column_types(loaded.loader, table)
        assert types["period_start"] == types["period_end"] == tz, table
    commits = column_types(loaded.loader, "server_commit_exports")
    assert {k: commits[k] for k in ("date", "merge_commit", "lines_added", "lines_deleted",
                                    "commit_hash", "author_email", "window_start",
                                    "row_number")} == {
        "date": tz, "merge_commit": "BOOLEAN", "lines_added": big, "lines_deleted": big,
        "commit_hash": "VARCHAR", "author_email": "VARCHAR", "window_start": tz,
        "row_number": big}
    prs = column_types(loaded.loader, "server_pull_request_exports")
    assert {k: prs[k] for k in ("created_date", "last_updated_date", "pull_request_id",
                                "time_to_open_s", "pickup_time_s", "review_time_s",
                                "time_to_resolve_s", "state", "reviewers")} == {
        "created_date": tz, "last_updated_date": tz, "pull_request_id": big,
        "time_to_open_s": big, "pickup_time_s": big, "review_time_s": big,
        "time_to_resolve_s": big, "state": "VARCHAR", "reviewers": "VARCHAR"}


@pytest.mark.parametrize("level", LEVELS)
def test_commits_equal_truth(loaded: Loaded, level: str) -> None:
    """Each commit table: author, user (NULL for non-users and aliases), UTC time, lines,
    parent count and merge flag of every commit of its scopes."""
    check_list(loaded.loader, loaded.truth, loaded.window, "commits", level, loaded.scopes)
    table = LEVEL_TABLES["commits"][level]
    shapes = loaded.loader.rows(
        f'SELECT count(*) FILTER (is_merge), count(*) FILTER (parent_count = 0), '
        f'count(*) FILTER (user_name IS NULL) FROM "{table}"')[0]
    assert all(shapes), f"{table}: merges, roots, commits without a user: {shapes}"


def test_commit_parents_equal_truth(loaded: Loaded) -> None:
    """Parent ids exactly as served: abbreviated (20 characters here), each a prefix of the
    real parent, in order."""
    check_parents(loaded.loader, loaded.truth, loaded.window)
    full = {c["id"]: c["_sim"]["parents"] for c in loaded.truth.commits}
    rows = select(loaded.loader, "server_commit_parents", ("id", "position", "parent_id"))
    assert rows and {len(p) for _, _, p in rows} == {20}
    assert all(full[i][pos].startswith(p) and len(full[i][pos]) == 40 for i, pos, p in rows)
    assert max(pos for _, pos, _ in rows) >= 1


@pytest.mark.parametrize("level", LEVELS)
def test_pull_requests_equal_truth(loaded: Loaded, level: str) -> None:
    """Each pull-request table: every field, dates from epoch ms as aware UTC, all states."""
    check_list(loaded.loader, loaded.truth, loaded.window, "pull_requests", level,
               loaded.scopes)
    table = LEVEL_TABLES["pull_requests"][level]
    assert {s for (s,) in select(loaded.loader, table, ("state",))} == {
        "OPEN", "MERGED", "DECLINED"}
    millis = loaded.loader.rows(f'SELECT count(*) FROM "{table}" '
                                "WHERE microsecond(created_at) % 1000000 <> 0")[0][0]
    assert millis > 0  # sub-second parts were compared, not only whole seconds


@pytest.mark.parametrize("which", ["reviewers", "participants"])
def test_pull_request_people_equal_truth(loaded: Loaded, which: str) -> None:
    check_people(loaded.loader, loaded.truth, loaded.window, which)
    assert loaded.loader.rows(
        f"SELECT max(position) FROM server_pull_request_{which}")[0][0] >= 1


def test_levels_agree(loaded: Loaded) -> None:
    """Global = union of projects = union of repositories; each user's rows are global rows
    whose truth owner is that user, alias commits (no `user` object) included."""
    loader = loaded.loader
    for kind in KINDS:
        columns = LIST_COLUMNS[kind]
        tables = LEVEL_TABLES[kind]
        top = sorted(select(loader, tables["global"], columns))
        assert sorted(select(loader, tables["project"], columns)) == top, kind
        assert sorted(select(loader, tables["repository"], columns)) == top, kind
        global_rows = set(top)
        owner = {commit_row(i)[:3] if kind == "commits" else pr_row(i)[:3]: user_of(i)
                 for i in loaded.truth.items(kind)}
        user_rows = select(loader, tables["user"], ("read_for_user", *columns))
        assert {row[1:] for row in user_rows} <= global_rows, kind
        assert all(owner[row[1:4]] == row[0] for row in user_rows), kind
    aliases = loader.rows("SELECT count(*) FROM server_commits_user WHERE user_name IS NULL")
    assert aliases[0][0] > 0  # alias commits are counted for their user


def test_users_are_those_seen_in_user_objects(loaded: Loaded) -> None:
    """User scopes are the users of the `user` objects (commits) and PR authors seen in the
    global lists. Here every truth user has such an object, so all are read; a user with only
    alias commits and no pull request in the window would not be (see the README)."""
    scopes = loaded.scopes["user"]
    for kind in KINDS:
        got = {u for (u,) in loaded.loader.rows(
            f'SELECT DISTINCT read_for_user FROM "{LEVEL_TABLES[kind]["user"]}"')}
        assert got <= scopes, kind
    stats = {s for (s,) in loaded.loader.rows(
        "SELECT DISTINCT scope FROM server_commit_statistics WHERE level = 'user'")}
    assert stats == scopes
    assert scopes == {u["name"] for u in loaded.truth.users}


def test_commit_statistics_equal_truth(loaded: Loaded) -> None:
    """One row per level, scope and UTC period (month by default, or day): its commits and
    line totals (merges included), recomputed from the truth commits of the scope."""
    check_statistics(loaded.loader, "server_commit_statistics",
                     expected_commit_statistics(loaded.truth, loaded.window, loaded.scopes,
                                                loaded.grain))


def test_pull_request_statistics_equal_truth(loaded: Loaded) -> None:
    """One row per level, scope and UTC period: PRs created in it by their state."""
    check_statistics(loaded.loader, "server_pull_request_statistics",
                     expected_pr_statistics(loaded.truth, loaded.window, loaded.scopes,
                                            loaded.grain))


def test_no_duplicate_keys(loaded: Loaded) -> None:
    check_primary_keys(loaded.loader)


def test_second_run_changes_nothing(loaded: Loaded) -> None:
    """Identical contents after a second run at the same clock (an export row's window
    columns say which window last delivered it, so they are left out)."""
    assert set(loaded.second_tables) == ALL_TABLES
    for table, rows in loaded.first_tables.items():
        assert loaded.second_tables[table] == rows, table


def test_second_run_reads_only_the_look_back(loaded: Loaded) -> None:
    """A nightly run starts each list scope at its newest loaded cursor minus the look-back;
    the global lists are also read for discovery from the last run's end minus look-back.
    Older pull-request statistics are read one period at a time, and only for the creation
    periods of pull requests the run's lists read again (their counts by state may have
    changed)."""
    checked = refreshed = 0
    grain = loaded.grain
    prefix = loaded.sim.info()["api_prefix"]
    oldest_read = min(c for (kind, _, _), c in loaded.cursors.items()
                      if kind == "pull-requests") - LOOKBACK
    created_periods = {period_floor(from_ms(p["createdDate"]), grain) for p in loaded.truth.prs
                       if from_ms(p["updatedDate"]) >= oldest_read}
    horizon = period_floor(loaded.truth.clock - LOOKBACK, grain)
    for entry in loaded.second_log:
        kind, op, _ = entry["endpoint"].split(".")
        since = wire_time(entry["params"]["sinceDate"])
        if op != "list":  # statistics and exports: their cursor is the last run's end
            if since < horizon:
                assert op == "statistics" and kind == "pull-requests", entry
                assert wire_time(entry["params"]["untilDate"]) == period_next(since, grain), (
                    entry)
                assert since in created_periods, entry
                refreshed += 1
                continue
            assert since >= horizon, entry
            continue
        level, scope = scope_of_path(entry["path"], prefix)
        bound = max(START, loaded.cursors[(kind, level, scope)] - LOOKBACK)
        if level == "global" and since < bound:
            continue  # the discovery read
        assert since == bound.replace(microsecond=0), (entry, bound)
        checked += 1
    assert checked > 10 and refreshed > 0
    assert len(loaded.second_log) < len(loaded.first_log)
    if grain == "day":  # a statistics request per day of the range, against 3 or 4
        assert len(loaded.second_log) < len(loaded.first_log) / 3


def test_requests_carry_expected_parameters(loaded: Loaded) -> None:
    assert_request_parameters(loaded.first_log, loaded.truth.clock, grain=loaded.grain)
    assert_request_parameters(loaded.second_log, loaded.truth.clock, grain=loaded.grain)
    endpoints = {e["endpoint"] for e in loaded.first_log}
    assert endpoints == {f"{kind}.{op}.{level}" for kind in ("commits", "pull-requests")
                         for op in ("list", "statistics", "csv") for level in LEVELS}


def test_csv_exports_equal_what_the_host_serves(loaded: Loaded) -> None:
    """Export tables hold exactly the rows the CSV endpoints serve for the run's windows,
    typed as the README says; the commit hashes are those of the truth."""
    sizes = check_exports_equal_served(loaded.loader, loaded.sim, loaded.first_log,
                                       loaded.sim.basic_auth)
    scopes = loaded.scopes
    expected = sum(1 for c in loaded.truth.commits if loaded.window.holds(c)
                   for level, names in scopes.items() for s in names if in_scope(level, s, c))
    assert sizes["commits"] == expected
    hashes = {h for (h,) in loaded.loader.rows(
        "SELECT DISTINCT commit_hash FROM server_commit_exports")}
    assert hashes == {c["id"] for c in loaded.truth.commits if loaded.window.holds(c)}
    windows = {(wire_time(e["params"]["sinceDate"]), wire_time(e["params"]["untilDate"]))
               for e in loaded.first_log if ".csv." in e["endpoint"]}
    assert windows == {(START, loaded.truth.clock)}


# --------------------------------------------------------------------------------------------
# canonical views
# --------------------------------------------------------------------------------------------
VIEW_COLUMNS = {
    "commits": "edition, project_key, repository_slug, commit_id, author_name, author_email, "
               "author_user, authored_at_utc, authored_at_local, lines_added, lines_deleted, "
               "is_merge, parent_count",
    "pull_requests": "edition, project_key, repository_slug, pull_request_id, title, state, "
                     "created_at, updated_at, closed_at, author_name, author_user, "
                     "target_branch, comment_count, task_count, reviewer_count, resolved_at, "
                     "resolved_at_source",
    "pull_request_statistics": "edition, level, scope, period, period_start, period_end, "
                               "pull_requests, open, merged, declined, superseded",
    "commit_statistics": "edition, level, scope, period, period_start, period_end, commits, "
                         "lines_added, lines_deleted",
    "daily_author_activity": "edition, project_key, repository_slug, author_name, day, "
                             "commits, lines_added, lines_deleted",
}


# The canonical views are DuckDB's (README: Canonical views): their tests take the DuckDB load.
DUCKDB_ONLY = pytest.mark.parametrize("loaded", [("duckdb", GRAIN)], indirect=True,
                                      ids=["duckdb"])


@DUCKDB_ONLY
def test_views_have_the_readme_columns(loaded: Loaded) -> None:
    for view, columns in VIEW_COLUMNS.items():
        got = [name for (name,) in loaded.loader.rows(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = "
            f"'{DATASET}' AND table_name = '{view}' ORDER BY ordinal_position")]
        assert got == [c.strip() for c in columns.split(",")], view
        assert loaded.loader.rows(f'SELECT DISTINCT edition FROM "{view}"') == [("server",)]


@DUCKDB_ONLY
def test_views_equal_the_server_tables(loaded: Loaded) -> None:
    """Each canonical view row is its table's row, mapped as the README says; the
    reviewer count is the truth's."""
    loader = loaded.loader
    view = sorted(loader.rows("SELECT * EXCLUDE (edition) FROM commits"))
    expected: list[tuple[Any, ...]] = sorted(
        (p, s, i, name, email, user, when, None, added, deleted, merge, parents)
        for p, s, i, name, email, user, when, added, deleted, merge, parents in select(
            loader, "server_commits", (
                "project_key", "repository_slug", "id", "author_display_name", "author_email",
                "user_name", "author_timestamp", "lines_added", "lines_deleted", "is_merge",
                "parent_count")))
    assert view == expected and len(view) == count(loader, "server_commits")

    reviewers = {pr_row(p)[:3]: len(p["reviewers"]) for p in loaded.truth.prs}
    # resolved_at and its source are compared with the truth in test_views.py
    view = sorted(loader.rows(
        "SELECT * EXCLUDE (edition, resolved_at, resolved_at_source) FROM pull_requests"))
    expected = sorted(
        (p, s, i, title, state, created, updated, None, name, user, branch, None, None,
         reviewers[(p, s, i)])
        for p, s, i, title, state, created, updated, name, user, branch in select(
            loader, "server_pull_requests", (
                "project_key", "repository_slug", "id", "title", "state", "created_at",
                "updated_at", "author_display_name", "author_user_name", "to_branch")))
    assert view == expected and any(row[-1] > 1 for row in view)

    view = sorted(loader.rows("SELECT * EXCLUDE (edition) FROM pull_request_statistics"))
    expected = sorted((*r, None) for r in select(loader, "server_pull_request_statistics", (
        "level", "scope", "period", "period_start", "period_end", "pull_requests", "open",
        "merged", "declined")))
    assert view == expected and view

    view = sorted(loader.rows("SELECT * EXCLUDE (edition) FROM commit_statistics"))
    expected = sorted(select(loader, "server_commit_statistics", (
        "level", "scope", "period", "period_start", "period_end", "commits", "lines_added",
        "lines_deleted")))
    assert view == expected and view


def expected_daily_activity(truth: Truth, window: Window) -> list[tuple[Any, ...]]:
    """(project, slug, author name, UTC day) -> commits, lines added, lines deleted."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for c in truth.commits:
        if window.holds(c):
            row = commit_row(c)
            key = (row[0], row[1], row[5], at(c).date())
            totals = groups.setdefault(key, [0, 0, 0])
            totals[0] += 1
            totals[1] += row[11]
            totals[2] += row[12]
    return sorted((*k, *v) for k, v in groups.items())


@DUCKDB_ONLY
@pytest.mark.parametrize("session_zone", ["UTC", "Pacific/Kiritimati"])
def test_daily_author_activity_equals_truth(loaded: Loaded, session_zone: str) -> None:
    """Per repository, author and day of the UTC instant, whatever time zone the reading
    session (a BI tool) has set."""
    with duckdb.connect(str(loaded.loader.db_file), read_only=True) as con:
        con.execute(f"SET TimeZone = '{session_zone}'")
        con.execute(f"SET schema '{DATASET}'")
        got = con.execute(
            "SELECT project_key, repository_slug, author_name, day, commits, lines_added, "
            "lines_deleted FROM daily_author_activity ORDER BY ALL").fetchall()
    assert got == expected_daily_activity(loaded.truth, loaded.window)


# --------------------------------------------------------------------------------------------
# authentication and permissions
# --------------------------------------------------------------------------------------------
LIST_TABLES = tuple(LEVEL_TABLES[k][level] for k in KINDS for level in LEVELS) + (
    "server_commit_parents", "server_pull_request_reviewers", "server_pull_request_participants")


def test_bearer_token_loads_the_same_data(loaded: Loaded, tmp_path: Path) -> None:
    """A personal access token (Bearer) instead of basic credentials: the same rows."""
    loader = Loader(loaded.sim, tmp_path)
    result, log = run_with_log(loaded.sim, loader, token=loaded.sim.config.server_token,
                               username=None, password=None, resources=list(KINDS))
    assert not result.report.skips
    assert log and {e["auth"] for e in log} == {"bearer"}
    assert set(data_tables(loader)) == set(LIST_TABLES)
    assert contents(loader) == {t: loaded.first_tables[t] for t in LIST_TABLES}


def test_restricted_user_reads_only_its_project(loaded: Loaded, tmp_path: Path) -> None:
    """The restricted user may read only the first project: every level holds only its rows
    (statistics and exports too), the other project is never asked for and never skipped."""
    sim = loaded.sim
    info = sim.info()
    readable = frozenset(info["credentials"]["restricted"]["projects"])
    assert readable == {info["projects"][0]} and len(info["projects"]) > 1
    loader = Loader(sim, tmp_path)
    result, log = run_with_log(sim, loader, username="restricted", password="restricted-pass",
                               resources=[*KINDS, "commit_statistics", "commit_exports"],
                               start_date=LATE_START.isoformat())
    assert not result.report.skips and not result.report.notes
    assert all(e["status"] == 200 for e in log)
    other = set(info["projects"]) - readable
    assert not [e for e in log if any(f"/projects/{k}/" in e["path"] for k in other)]
    truth = loaded.truth
    window = Window(LATE_START, truth.clock, readable)
    scopes = expected_scopes(truth, window)
    assert scopes["project"] == set(readable)
    assert scopes["repository"] < loaded.scopes["repository"]
    check_lists(loader, truth, window, scopes)
    check_statistics(loader, "server_commit_statistics",
                     expected_commit_statistics(truth, window, scopes))
    for table in LIST_TABLES:
        keys = {k for (k,) in loader.rows(f'SELECT DISTINCT project_key FROM "{table}"')}
        assert keys == set(readable), table
    names = {p["name"] for p in truth.projects if p["key"] in readable}
    assert {p for (p,) in loader.rows("SELECT DISTINCT project FROM server_commit_exports")} == (
        names)
    check_primary_keys(loader)


@pytest.mark.parametrize(("conditions", "overrides", "kind", "says"), [
    ({"licensed": False}, {}, "no_license", ("licence", "402")),
    ({"app_version": "5.1.0"}, {}, "app_missing", ("older than 5.2.0", "404")),
    ({}, {"password": "not-the-password"}, "credentials_refused", ("credentials", "401")),
])
def test_fatal_host_answers(make_sim: Callable[..., Simulator], tmp_path: Path,
                            conditions: dict[str, Any], overrides: dict[str, Any], kind: str,
                            says: tuple[str, ...]) -> None:
    """No licence, an app older than 5.2.0, a wrong password: the run stops with a message
    saying which, writes no table, and never shows the password."""
    sim = make_sim(edition="server")
    sim.set_conditions(**conditions)
    loader = Loader(sim, tmp_path)
    with pytest.raises(Exception) as caught:
        loader.load(**overrides)
    cause = cause_of(caught.value)
    assert isinstance(cause, FatalApiError), repr(cause)
    assert cause.kind == kind
    message = str(cause)
    assert all(word in message for word in says), message
    assert "not-the-password" not in message and sim.config.password not in message
    assert not loader.db_file.exists() or not data_tables(loader)


# --------------------------------------------------------------------------------------------
# a small host: paging across the maxima, CSV windows across 366 days
# --------------------------------------------------------------------------------------------
SMALL_START = CLOCK - timedelta(days=366)
CSV_START = CLOCK - timedelta(days=400)


@dataclass
class Small:
    sim: Simulator
    truth: Truth
    lists: Loader
    lists_log: list[dict[str, Any]]
    exports: Loader
    exports_log: list[dict[str, Any]]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Small]:
    """A small host (a year, ~20k commits, 2k PRs): the global lists from a year back, and the
    global exports from 400 days back (two CSV windows), in two pipelines."""
    with Simulator(SimConfig(edition="server", size="small", now=FIXED_NOW)) as sim:
        truth = Truth.read(sim)
        lists = Loader(sim, Path(tmp_path_factory.mktemp("server_small_lists")))
        result, lists_log = run_with_log(sim, lists, levels=["global"], resources=list(KINDS),
                                         start_date=SMALL_START.isoformat())
        assert not result.report.skips
        exports = Loader(sim, Path(tmp_path_factory.mktemp("server_small_exports")))
        result, exports_log = run_with_log(
            sim, exports, levels=["global"], resources=["commit_exports", "pull_request_exports"],
            start_date=CSV_START.isoformat())
        assert not result.report.skips
        yield Small(sim, truth, lists, lists_log, exports, exports_log)


def test_paging_across_the_maxima(small: Small) -> None:
    """Commits in pages of 1000, PRs in pages of 500, each next start the served
    nextPageStart, until isLastPage; every item of the year equals the truth."""
    window = Window(SMALL_START, small.truth.clock)
    scopes = {"global": {"global"}}
    check_list(small.lists, small.truth, window, "commits", "global", scopes)
    check_list(small.lists, small.truth, window, "pull_requests", "global", scopes)
    for kind, limit in (("commits", 1000), ("pull-requests", 500)):
        entries = [e for e in small.lists_log if e["endpoint"] == f"{kind}.list.global"]
        total = sum(1 for i in small.truth.items(kind.replace("-", "_")) if window.holds(i))
        assert total > 3 * limit
        assert len(entries) == -(-total // limit), kind
        assert {e["params"]["limit"] for e in entries} == {str(limit)}
        assert len({(e["params"]["sinceDate"], e["params"]["untilDate"]) for e in entries}) == 1
        starts = [int(e["params"].get("start", "0")) for e in entries]
        assert starts[0] == 0
        for entry, following in zip(entries, [*starts[1:], None], strict=True):
            body = requests.get(small.sim.base_url + entry["path"], params=entry["params"],
                                auth=small.sim.basic_auth, timeout=30).json()
            assert body["limit"] == limit
            if following is None:
                assert body["isLastPage"] and "nextPageStart" not in body
            else:
                assert not body["isLastPage"] and body["nextPageStart"] == following
    assert count(small.lists, "server_commit_parents") == sum(
        len(c["parents"]) for c in small.truth.commits if window.holds(c))
    check_primary_keys(small.lists)


def test_csv_windows_never_exceed_366_days(small: Small) -> None:
    """400 days are exported in two windows of at most 366 days that tile [start, clock);
    the tables hold exactly what those windows serve, one row per commit and PR."""
    for kind in ("commits", "pull-requests"):
        entries = [e for e in small.exports_log if e["endpoint"] == f"{kind}.csv.global"]
        windows = sorted((wire_time(e["params"]["sinceDate"]),
                          wire_time(e["params"]["untilDate"])) for e in entries)
        assert len(windows) == 2, kind
        assert windows[0][0] == CSV_START and windows[-1][1] == small.truth.clock
        assert all(a[1] == b[0] for a, b in zip(windows, windows[1:], strict=False))
        assert all(end - since <= MAX_CSV_WINDOW for since, end in windows)
    sizes = check_exports_equal_served(small.exports, small.sim, small.exports_log,
                                       small.sim.basic_auth)
    window = Window(CSV_START, small.truth.clock)
    assert sizes["commits"] == sum(1 for c in small.truth.commits if window.holds(c))
    assert count(small.exports, "server_commit_exports") == sizes["commits"]
    assert count(small.exports, "server_pull_request_exports") == sizes["pull-requests"]
    check_primary_keys(small.exports)


# --------------------------------------------------------------------------------------------
# per-file details (with_files)
# --------------------------------------------------------------------------------------------
FILES_ARGS: dict[str, Any] = dict(levels=["repository"], resources=["commits"], with_files=True,
                                  start_date=LATE_START.isoformat())


def check_files(loader: Loader, sim: Simulator) -> int:
    """server_commit_files: for every loaded repository-level commit, the truth's files."""
    truth = {f["id"]: f["files"] for f in sim.truth("files")}
    expected = sorted(
        (p, s, i, f["path"], f["linesOfCode"]["added"], f["linesOfCode"]["deleted"], when)
        for p, s, i, when in select(loader, "server_commits", (
            "project_key", "repository_slug", "id", "author_timestamp"))
        for f in truth[i])
    got = select(loader, "server_commit_files", (
        "project_key", "repository_slug", "id", "path", "lines_added", "lines_deleted",
        "author_timestamp"), "ORDER BY ALL")
    assert got == expected
    return len(got)


def test_with_files_fetches_each_new_commit_once(make_sim: Callable[..., Simulator],
                                                 tmp_path: Path) -> None:
    """Each repository-level commit is fetched once with withFiles=true; a rerun fetches
    none; after a day only the new (and late) commits are fetched; files equal the truth."""
    sim = make_sim(edition="server")
    loader = Loader(sim, tmp_path)
    first, log = run_with_log(sim, loader, **FILES_ARGS)
    assert not first.report.skips
    ids = single_commit_ids(log)
    loaded = {i for (i,) in select(loader, "server_commits", ("id",))}
    assert sorted(ids) == sorted(loaded) and len(ids) == len(set(ids))
    assert all(e["params"] == {"withFiles": "true"} for e in log
               if e["endpoint"] == "commits.single.repository")
    assert check_files(loader, sim) > len(loaded) / 2
    before = contents(loader, ["server_commit_files"])

    second, log = run_with_log(sim, loader, **FILES_ARGS)
    assert not second.report.skips
    assert single_commit_ids(log) == []
    assert contents(loader, ["server_commit_files"]) == before

    answer = sim.advance(days=1)
    third, log = run_with_log(sim, loader, now=datetime.fromtimestamp(sim.info()["now"], UTC),
                              **FILES_ARGS)
    assert not third.report.skips
    new = {i for (i,) in select(loader, "server_commits", ("id",))} - loaded
    assert set(answer["late_commits"]) <= new
    ids = single_commit_ids(log)
    assert sorted(ids) == sorted(new)
    check_files(loader, sim)
    check_primary_keys(loader)


@dataclass
class Unindexed:
    sim: Simulator
    loader: Loader
    key: str  # the unindexed repository, `KEY/slug`
    slug: str
    skipped: set[str]  # its commit ids
    first: LoadResult
    first_log: list[dict[str, Any]]
    again: LoadResult
    again_log: list[dict[str, Any]]
    cursor: datetime  # the repository's newest commit after the first run


@pytest.fixture(scope="module")
def unindexed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Unindexed]:
    """with_files while one repository has unindexed changes (every single-commit request
    answers 409), then once more at the same clock after it was indexed."""
    with Simulator(SimConfig(edition="server", size="tiny", now=FIXED_NOW)) as sim:
        target = sorted(sim.truth("repositories"), key=lambda r: r["slug"])[0]
        slug, key = target["slug"], f"{target['project']['key']}/{target['slug']}"
        sim.set_conditions(unindexed={slug: -1})
        loader = Loader(sim, Path(tmp_path_factory.mktemp("server_unindexed")))
        first, first_log = run_with_log(sim, loader, **FILES_ARGS)
        where = f"WHERE repository_slug = '{slug}'"
        skipped = {i for (i,) in select(loader, "server_commits", ("id",), where)}
        cursor = loader.rows(f"SELECT max(author_timestamp) FROM server_commits {where}")[0][0]
        sim.set_conditions(unindexed={})
        again, again_log = run_with_log(sim, loader, **FILES_ARGS)
        yield Unindexed(sim, loader, key, slug, skipped, first, first_log, again, again_log,
                        cursor)


def test_unindexed_repository_skips_its_commits_files(unindexed: Unindexed) -> None:
    """Single commits of a repository with unindexed changes answer 409: each is retried,
    then reported as skipped; its commits and every other repository's files still load."""
    u = unindexed
    assert u.skipped
    assert {(s.resource, s.kind) for s in u.first.report.skips} == {
        (f"server_commit_files:{u.key}/{i}", "unindexed") for i in u.skipped}
    assert u.first.report.partial
    attempts = Counter(e["path"].rsplit("/", 1)[1] for e in u.first_log
                       if e["endpoint"] == "commits.single.repository" and e["status"] == 409)
    assert attempts == dict.fromkeys(u.skipped, FAST_RETRY["skip_retry_attempts"])
    others = {e["path"].rsplit("/", 1)[1] for e in u.first_log
              if e["endpoint"] == "commits.single.repository" and e["status"] == 200}
    assert others and not others & u.skipped
    truth = {f["id"]: f["files"] for f in u.sim.truth("files")}
    # the second run's fetches are read from the first log's ids only
    first_files = {(i, f["path"]) for i in others for f in truth[i]}
    got = {(i, path) for i, path in select(u.loader, "server_commit_files", ("id", "path"))}
    assert first_files <= got and not {i for i, _ in got - first_files} - u.skipped


def test_unindexed_commits_in_the_look_back_are_fetched_next_run(unindexed: Unindexed) -> None:
    """Once indexed, the next run fetches the skipped commits it re-reads (its look-back),
    and every loaded commit's files then equal the truth except older skipped ones."""
    u = unindexed
    assert not u.again.report.skips
    recent = {i for (i,) in select(
        u.loader, "server_commits", ("id",), f"WHERE repository_slug = '{u.slug}' AND "
        f"author_timestamp >= TIMESTAMPTZ '{(u.cursor - LOOKBACK).isoformat()}'")}
    assert recent
    fetched = set(single_commit_ids(u.again_log))
    assert recent <= fetched <= u.skipped
    truth = {f["id"]: f["files"] for f in u.sim.truth("files")}
    never = u.skipped - fetched
    expected = sorted((i, f["path"], f["linesOfCode"]["added"], f["linesOfCode"]["deleted"])
                      for (i,) in select(u.loader, "server_commits", ("id",))
                      if i not in never for f in truth[i])
    assert select(u.loader, "server_commit_files",
                  ("id", "path", "lines_added", "lines_deleted"), "ORDER BY ALL") == expected


def test_unindexed_commits_are_all_fetched_next_run(unindexed: Unindexed) -> None:
    """Once indexed, the next run fetches every commit skipped before, also those older than
    its look-back (remembered as pending), and every commit's files equal the truth; nothing
    is left pending."""
    u = unindexed
    assert set(single_commit_ids(u.again_log)) == u.skipped
    check_files(u.loader, u.sim)
    resources = u.loader.pipeline().state["sources"]["repo_analytics"]["resources"]
    states = {f"{name}:{key}": scope for name, value in resources.items()
              for key, scope in value.get("scopes", {}).items()}
    assert any("details_fetched" in state for state in states.values())
    assert not [name for name, state in states.items() if state.get("details_pending")]


# --------------------------------------------------------------------------------------------
# incremental: the clock moves, late commits arrive, pull requests change
# --------------------------------------------------------------------------------------------
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
        fewer = next(p for p in prs_before if len(p.participants) >= 2
                     and p not in (emptied, shortened))
        emptied.reviewers = []
        shortened.reviewers = shortened.reviewers[:1]
        fewer.participants = fewer.participants[:1]
        for pr in (emptied, shortened, fewer):
            world.touch_pull_request(pr, int(when.timestamp() * 1000))
    return {name: (pr.repo, pr.id) for name, pr in (
        ("emptied", emptied), ("shortened", shortened), ("fewer", fewer))}


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
    return {which: Counter(select(loader, f"server_pull_request_{which}",
                                  ("repository_slug", "id")))
            for which in ("reviewers", "participants")}


@pytest.fixture(scope="module", params=LOADS)
def advanced(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Advanced]:
    """A tiny host loaded, advanced a day (late commits, state changes, a new user and
    repository) with three PRs' reviewer or participant lists shortened, loaded again, into
    each destination with its default settings (and into DuckDB by day)."""
    destination, grain = request.param
    grained = {} if grain == GRAIN else {"statistics_period": grain}
    with Simulator(SimConfig(edition="server", size="tiny", now=FIXED_NOW)) as sim:
        loader = Loader(sim, Path(tmp_path_factory.mktemp("server_advance")), destination)
        old = Truth.read(sim)
        _, first_log = run_with_log(sim, loader, start_date=LATE_START.isoformat(), **grained)
        before = {i for (i,) in select(loader, "server_commits_global", ("id",))}
        people_before = people_counts(loader)
        answer = sim.advance(days=1)
        clock = datetime.fromtimestamp(sim.info()["now"], UTC)
        changed = change_people(sim, Window(LATE_START, old.clock), clock - timedelta(hours=1))
        truth = Truth.read(sim)
        result, log = run_with_log(sim, loader, now=clock, start_date=LATE_START.isoformat(),
                                   **grained)
        yield Advanced(sim, loader, old, truth, answer, changed, before, people_before,
                       first_log, result, log, grain)


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
    states = {(s, i): st for s, i, st in select(a.loader, "server_pull_requests_global",
                                                ("repository_slug", "id", "state"))}
    assert a.answer["pull_request_changes"]
    for slug, number, state in a.answer["pull_request_changes"]:
        assert states[(slug, number)] == state
    assert a.answer["new_users"] and a.answer["new_repositories"]
    new_repo = a.answer["new_repositories"][0]
    assert count(a.loader, "server_commits", f"WHERE repository_slug = '{new_repo}'") == 3
    assert count(a.loader, "server_commits_user",
                 f"WHERE read_for_user = '{a.answer['new_users'][0]}'") >= 1

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
    check_statistics(a.loader, "server_commit_statistics",
                     expected_commit_statistics(a.truth, window, scopes, grain))
    older = {(level, scope, as_utc(low)) for level, scope, low in select(
        a.loader, "server_pull_request_statistics", ("level", "scope", "period_start"))
        if as_utc(low) < window.start}
    changed = {(slug, number) for slug, number, _ in a.answer["pull_request_changes"]}
    assert {(level, scope, period_floor(from_ms(p["createdDate"]), grain))
            for p in a.truth.prs if (p["toRef"]["repository"]["slug"], p["id"]) in changed
            and from_ms(p["createdDate"]) < window.start
            for level, names in scopes.items() for scope in names
            if in_scope(level, scope, p)} <= older
    check_statistics(a.loader, "server_pull_request_statistics",
                     {**expected_pr_statistics(a.truth, window, scopes, grain),
                      **pr_statistics_rows(a.truth, window, older, grain)})
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
