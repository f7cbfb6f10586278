"""The self-hosted host's ground truth, the scopes a load discovers in it, and each table
compared with it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from simulator import Simulator
from tests.support import FIXED_NOW
from tests.support.helpers import (
    GRAIN,
    assert_window_rows,
    by_key,
    column_types,
    count,
    data_tables,
    from_ms,
    from_z,
    period_next,
    periods,
    select,
)
from tests.support.loader import Loader

START = datetime(2026, 3, 1, tzinfo=UTC)  # the Loader's default start_date
LATE_START = datetime(2026, 5, 1, tzinfo=UTC)  # a month: for the loads of single features
CLOCK = datetime.fromtimestamp(FIXED_NOW, UTC)
LOOKBACK = timedelta(days=3)  # the default lookback_days
# Discovery reads the global lists from 26 h before the start: the slack of the cloud's
# zone-less commit date, applied to the self-hosted edition too (its dates are aware).
DISCOVERY_SLACK = timedelta(hours=26)
DAY = timedelta(days=1)
LEVELS = ("global", "project", "repository", "user")
KINDS = ("commits", "pull_requests")
LEVEL_TABLES: dict[str, dict[str, str]] = {
    kind: {
        "global": f"server_{kind}_global",
        "project": f"server_{kind}_project",
        "repository": f"server_{kind}",
        "user": f"server_{kind}_user",
    }
    for kind in KINDS
}
PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    **{
        LEVEL_TABLES[kind][level]: (("read_for_user",) if level == "user" else ())
        + ("project_key", "repository_slug", "id")
        for kind in KINDS
        for level in LEVELS
    },
    "server_commit_parents": ("project_key", "repository_slug", "id", "position"),
    "server_pull_request_reviewers": ("project_key", "repository_slug", "id", "position"),
    "server_pull_request_participants": ("project_key", "repository_slug", "id", "position"),
    "server_commit_statistics": ("level", "scope", "period_start", "period", "merges"),
    "server_pull_request_statistics": (
        "level",
        "scope",
        "period_start",
        "period",
        "state_filter",
        "date_type",
    ),
    "server_commit_exports": ("level", "scope", "project", "repository", "commit_hash"),
    "server_pull_request_exports": ("level", "scope", "project", "repository", "pull_request_id"),
    "server_commit_files": ("project_key", "repository_slug", "id", "path"),
}
# each led by `source`, where the rows came from (README: Self-hosted edition)
PRIMARY_KEYS = {table: ("source", *key) for table, key in PRIMARY_KEYS.items()}
ALL_TABLES = frozenset(PRIMARY_KEYS) - {"server_commit_files"}
COMMIT_COLUMNS = (
    "project_key",
    "repository_slug",
    "id",
    "repository_name",
    "project_name",
    "author_display_name",
    "author_email",
    "user_name",
    "user_display_name",
    "user_email",
    "author_timestamp",
    "lines_added",
    "lines_deleted",
    "parent_count",
    "is_merge",
)
PR_COLUMNS = (
    "project_key",
    "repository_slug",
    "id",
    "title",
    "description",
    "state",
    "open",
    "closed",
    "locked",
    "version",
    "created_at",
    "updated_at",
    "author_user_name",
    "author_display_name",
    "author_email",
    "from_branch",
    "from_ref",
    "from_project_key",
    "from_repository_slug",
    "from_latest_commit",
    "to_branch",
    "to_ref",
    "to_latest_commit",
    "repository_name",
    "project_name",
    "link",
)
LIST_COLUMNS = {"commits": COMMIT_COLUMNS, "pull_requests": PR_COLUMNS}
PEOPLE_COLUMNS = (
    "project_key",
    "repository_slug",
    "id",
    "position",
    "user_name",
    "user_display_name",
    "user_email",
    "role",
    "approved",
    "status",
    "updated_at",
)
COMMIT_STAT_COLUMNS = (
    "level",
    "scope",
    "period_start",
    "period",
    "period_end",
    "merges",
    "commits",
    "lines_added",
    "lines_deleted",
)
PR_STAT_COLUMNS = (
    "level",
    "scope",
    "period_start",
    "period",
    "period_end",
    "state_filter",
    "date_type",
    "pull_requests",
    "declined",
    "merged",
    "open",
)
EXPORT_META = ("window_start", "window_end", "row_number")


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
    return (
        repo["project"]["key"],
        repo["slug"],
        c["id"],
        repo["name"],
        repo["project"]["name"],
        c["author"]["displayName"],
        c["author"]["emailAddress"],
        user.get("name"),
        user.get("displayName"),
        user.get("emailAddress"),
        from_z(c["authorTimestamp"]),
        c["linesOfCode"]["added"],
        c["linesOfCode"]["deleted"],
        len(c["_sim"]["parents"]),
        c["_sim"]["is_merge"],
    )


def pr_row(pr: Mapping[str, Any]) -> tuple[Any, ...]:
    """A truth pull request as PR_COLUMNS, dates from epoch milliseconds exactly."""
    to, source, author = pr["toRef"], pr["fromRef"], pr["author"]["user"]
    return (
        to["repository"]["project"]["key"],
        to["repository"]["slug"],
        pr["id"],
        pr["title"],
        pr["description"],
        pr["state"],
        pr["open"],
        pr["closed"],
        pr["locked"],
        pr["version"],
        from_ms(pr["createdDate"]),
        from_ms(pr["updatedDate"]),
        author["name"],
        author["displayName"],
        author["emailAddress"],
        source["displayId"],
        source["id"],
        source["repository"]["project"]["key"],
        source["repository"]["slug"],
        source["latestCommit"],
        to["displayId"],
        to["id"],
        to["latestCommit"],
        to["repository"]["name"],
        to["repository"]["project"]["name"],
        pr["links"]["self"][0]["href"],
    )


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
        return cls(
            datetime.fromtimestamp(sim.info()["now"], UTC),
            sim.truth("commits"),
            sim.truth("pull-requests"),
            sim.truth("users"),
            sim.truth("repositories"),
            sim.truth("projects"),
        )

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
    return {
        "global": {"global"},
        "project": {r.split("/")[0] for r in repos},
        "repository": repos,
        "user": {u for u in users if u},
    }


def in_scope(level: str, scope: str, item: Mapping[str, Any]) -> bool:
    if level == "global":
        return True
    if level == "project":
        return project_of(item) == scope
    if level == "repository":
        return repo_of(item) == scope
    return user_of(item) == scope


def check_list(
    loader: Loader,
    truth: Truth,
    window: Window,
    kind: str,
    level: str,
    scopes: Mapping[str, set[str]],
) -> None:
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
    got = by_key(
        select(
            loader,
            "server_commit_parents",
            ("project_key", "repository_slug", "id", "position", "parent_id", "author_timestamp"),
        ),
        4,
    )
    assert_window_rows(
        got, expected, window.start, window.start, window.clock, "server_commit_parents"
    )


def check_people(
    loader: Loader,
    truth: Truth,
    window: Window,
    which: str,
    leave_out: Iterable[tuple[str, int]] = (),
) -> None:
    """server_pull_request_reviewers / _participants: exactly each PR's list, in order
    (PRs `leave_out`, as (slug, id), are compared elsewhere)."""
    left = set(leave_out)
    expected = {}
    for pr in truth.prs:
        if window.readable(pr) and (pr["toRef"]["repository"]["slug"], pr["id"]) not in left:
            head = pr_row(pr)[:3]
            for position, person in enumerate(pr[which]):
                user = person["user"]
                expected[(*head, position)] = (
                    at(pr),
                    (
                        *head,
                        position,
                        user["name"],
                        user["displayName"],
                        user["emailAddress"],
                        person["role"],
                        person["approved"],
                        person["status"],
                        at(pr),
                    ),
                )
    table = f"server_pull_request_{which}"
    got = by_key((r for r in select(loader, table, PEOPLE_COLUMNS) if (r[1], r[2]) not in left), 4)
    assert_window_rows(got, expected, window.start, window.start, window.clock, table)


def expected_commit_statistics(
    truth: Truth, window: Window, scopes: Mapping[str, set[str]], grain: str = GRAIN
) -> dict[tuple, tuple]:
    """Per level, scope and UTC period (month by default): its commits and line totals."""
    expected = {}
    for level, names in scopes.items():
        for scope in names:
            mine = [c for c in truth.commits if window.readable(c) and in_scope(level, scope, c)]
            for low, high in periods(window.start, window.clock, grain):
                today = [c["linesOfCode"] for c in mine if low <= at(c) < high]
                expected[(level, scope, low)] = (
                    level,
                    scope,
                    low,
                    grain,
                    high,
                    "include",
                    len(today),
                    sum(x["added"] for x in today),
                    sum(x["deleted"] for x in today),
                )
    return expected


def expected_pr_statistics(
    truth: Truth, window: Window, scopes: Mapping[str, set[str]], grain: str = GRAIN
) -> dict[tuple, tuple]:
    """Per level, scope and UTC period: PRs created in it, counted by their current state."""
    return pr_statistics_rows(
        truth,
        window,
        [
            (level, scope, low)
            for level, names in scopes.items()
            for scope in names
            for low, _ in periods(window.start, window.clock, grain)
        ],
        grain,
    )


def pr_statistics_rows(
    truth: Truth, window: Window, keys: Iterable[tuple[str, str, datetime]], grain: str = GRAIN
) -> dict[tuple, tuple]:
    """The truth's row of each (level, scope, UTC period start): PRs created in the period (up
    to the clock) by state."""
    expected = {}
    for level, scope, low in keys:
        high = min(period_next(low, grain), window.clock)
        states = Counter(
            p["state"]
            for p in truth.prs
            if window.readable(p)
            and in_scope(level, scope, p)
            and low <= from_ms(p["createdDate"]) < high
        )
        expected[(level, scope, low)] = (
            level,
            scope,
            low,
            grain,
            high,
            "all",
            "created",
            sum(states.values()),
            states["DECLINED"],
            states["MERGED"],
            states["OPEN"],
        )
    return expected


def check_statistics(
    loader: Loader, table: str, expected: dict[tuple, tuple], from_day: datetime | None = None
) -> None:
    """One row per level, scope and period; values equal on the periods from `from_day`."""
    columns = COMMIT_STAT_COLUMNS if "commit" in table else PR_STAT_COLUMNS
    got = by_key(select(loader, table, columns), 3)  # (level, scope, period_start)
    assert set(got) == set(expected), (
        f"{table}: missing {sorted(set(expected) - set(got))[:3]}, "
        f"extra {sorted(set(got) - set(expected))[:3]}"
    )
    keys = [k for k in expected if from_day is None or k[2] >= from_day]
    wrong = [(got[k], expected[k]) for k in keys if got[k] != expected[k]]
    assert not wrong, f"{table}: {len(wrong)} rows differ from truth, e.g. {wrong[:2]}"
    assert sum(expected[k][7 if "pull" in table else 6] for k in keys) > 0, "nothing compared"


def check_primary_keys(loader: Loader) -> None:
    """Every table's natural key is unique and never NULL; no table is empty."""
    with loader.reading():
        for table in sorted(data_tables(loader)):
            key = ", ".join(f'"{c}"' for c in PRIMARY_KEYS[table])
            nulls = " OR ".join(f'"{c}" IS NULL' for c in PRIMARY_KEYS[table])
            total, distinct, null = loader.rows(
                f'SELECT (SELECT count(*) FROM "{table}"), '
                f'(SELECT count(*) FROM (SELECT DISTINCT {key} FROM "{table}")), '
                f'(SELECT count(*) FROM "{table}" WHERE {nulls})'
            )[0]
            assert total == distinct, f"{table}: {total} rows, {distinct} distinct keys"
            assert null == 0, f"{table}: {null} rows with a NULL key column"
            assert total > 0, f"{table} is empty"
            if "removed" in column_types(loader, table):  # README: marker rows are never stored
                assert count(loader, table, "WHERE removed") == 0, f"{table} stores marker rows"


def check_lists(
    loader: Loader, truth: Truth, window: Window, scopes: Mapping[str, set[str]]
) -> None:
    """Every list table at every level, and the child tables."""
    with loader.reading():
        for kind in KINDS:
            for level in LEVELS:
                check_list(loader, truth, window, kind, level, scopes)
        check_parents(loader, truth, window)
        check_people(loader, truth, window, "reviewers")
        check_people(loader, truth, window, "participants")


def contents(
    loader: Loader, tables: Iterable[str] | None = None, drop: Iterable[str] = EXPORT_META
) -> dict[str, list[tuple[Any, ...]]]:
    """Tables' full contents without dlt's columns (and `drop`: an export row's window),
    sorted."""
    out = {}
    for table in sorted(tables if tables is not None else data_tables(loader)):
        columns = [
            c for c in column_types(loader, table) if not c.startswith("_dlt_") and c not in drop
        ]
        out[table] = select(loader, table, columns, "ORDER BY ALL")
    return out
