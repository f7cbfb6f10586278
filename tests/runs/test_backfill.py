"""Backfill, resume (also after kill -9), nightly cursors, reconciliation, exit codes, the demo.

Real simulators over HTTP, real DuckDB files under tmp_path, the real `repo-analytics` command
in subprocesses. Every expected value comes from the simulator's ground truth (`sim.truth`),
its request log (`sim.requests`) or the documented contract (README: Commands, exit codes,
Self-reconciliation), never from extractor code.
"""

from __future__ import annotations

import json
import os
import queue
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from pipelines.reconcile.check import Reconciliation, reconcile
from pipelines.runs.backfill import BackfillResult, run_backfill
from pipelines.runs.progress import Progress
from simulator import SimConfig, Simulator
from tests.cloud.truth import PR_COLUMNS as CLOUD_PR_COLUMNS
from tests.cloud.truth import pr_row as cloud_pr
from tests.selfhosted.truth import COMMIT_COLUMNS as SERVER_COMMIT_COLUMNS
from tests.selfhosted.truth import PR_COLUMNS as SERVER_PR_COLUMNS
from tests.selfhosted.truth import pr_row as server_pr
from tests.support import FIXED_NOW
from tests.support.helpers import from_z
from tests.support.loader import DATASET, Loader

CLOCK = datetime.fromtimestamp(FIXED_NOW, UTC)  # 2026-06-01T00:00Z, a Monday
SINCE = datetime(2026, 3, 1, tzinfo=UTC)  # before the tiny history (90 days) begins
WINDOW_DAYS = 30
WINDOW = timedelta(days=WINDOW_DAYS)
SLACK = timedelta(hours=26)  # the cloud commit date has no zone: commits are read 26 h wider
EDGE = timedelta(hours=14)  # the widest author offset (README: Self-reconciliation)
WEEK = timedelta(days=7)
DAY = timedelta(days=1)
TOP_LEVEL = {"cloud": "workspace", "server": "global"}
CLI = Path(sys.executable).with_name("repo-analytics")
WINDOW_LINE = re.compile(r"^window (\d+)/(\d+) \[(\S+) \.\. (\S+)\): (.*)$")


# --------------------------------------------------------------------------------------------
# ground truth, per edition: the repository-level commit and pull-request tables
# --------------------------------------------------------------------------------------------
def cloud_commit(c: Mapping[str, Any]) -> tuple[Any, ...]:
    return (
        c["repository"]["slug"],
        c["hash"],
        c["author"]["display_name"],
        c["author"]["uuid"],
        datetime.fromisoformat(c["date"]),
        len(c["parents"]),
        len(c["parents"]) > 1,
        c["lines"]["added"],
        c["lines"]["deleted"],
    )


def server_commit(c: Mapping[str, Any]) -> tuple[Any, ...]:
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
        len(c["parents"]),
        len(c["_sim"]["parents"]) > 1,
    )


@dataclass(frozen=True)
class EditionTables:
    """The repository-level tables of one edition, their keys, columns and truth rows."""

    commits: str
    commit_columns: tuple[str, ...]
    commit_row: Callable[[Mapping[str, Any]], tuple[Any, ...]]
    prs: str
    pr_columns: tuple[str, ...]
    pr_row: Callable[[Mapping[str, Any]], tuple[Any, ...]]
    key_width: int  # the natural key is the first columns
    commit_time: Callable[[Mapping[str, Any]], datetime]  # the real (UTC) instant
    parents: str
    parent_key: tuple[str, ...]


EDITIONS: dict[str, EditionTables] = {
    "cloud": EditionTables(
        "cloud_commits",
        (
            "repository_slug",
            "hash",
            "author_display_name",
            "author_uuid",
            "date_local",
            "parent_count",
            "is_merge",
            "lines_added",
            "lines_deleted",
        ),
        cloud_commit,
        "cloud_pull_requests",
        CLOUD_PR_COLUMNS,
        cloud_pr,
        2,
        lambda c: from_z(c["_sim"]["instant"]),
        "cloud_commit_parents",
        ("repository_slug", "hash", "position"),
    ),
    "server": EditionTables(
        "server_commits",
        SERVER_COMMIT_COLUMNS,
        server_commit,
        "server_pull_requests",
        SERVER_PR_COLUMNS,
        server_pr,
        3,
        lambda c: from_z(c["authorTimestamp"]),
        "server_commit_parents",
        ("project_key", "repository_slug", "id", "position"),
    ),
}


def keyed(rows: list[tuple[Any, ...]], width: int) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """Rows by their first `width` values; a repeated key fails."""
    out: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for row in rows:
        key = tuple(row[:width])
        assert key not in out, f"duplicate key {key}"
        out[key] = tuple(row)
    return out


def rows_of(db_file: Path, table: str, columns: tuple[str, ...], where: str = "") -> list[tuple]:
    names = ", ".join(f'"{c}"' for c in columns)
    with duckdb.connect(str(db_file), read_only=True) as con:
        return con.execute(f'SELECT {names} FROM "{DATASET}"."{table}" {where}').fetchall()


def query(db_file: Path, sql: str, params: list[Any] | None = None) -> list[tuple]:
    with duckdb.connect(str(db_file), read_only=True) as con:
        con.execute(f"SET schema '{DATASET}'")
        return con.execute(sql, params or []).fetchall()


def assert_tables_equal_truth(
    db_file: Path,
    sim: Simulator,
    edition: str,
    required: tuple[datetime, datetime] | None = None,
    allowed: tuple[datetime, datetime] | None = None,
    prs: bool = True,
) -> None:
    """The repository-level commit (and pull-request) tables of a DuckDB file equal the truth
    by key and value (`assert_rows_equal_truth`)."""
    assert_rows_equal_truth(
        lambda table, columns: rows_of(db_file, table, columns),
        sim,
        edition,
        required,
        allowed,
        prs,
    )


RowReader = Callable[[str, tuple[str, ...]], list[tuple[Any, ...]]]


def assert_rows_equal_truth(
    read: RowReader,
    sim: Simulator,
    edition: str,
    required: tuple[datetime, datetime] | None = None,
    allowed: tuple[datetime, datetime] | None = None,
    prs: bool = True,
) -> None:
    """The repository-level commit (and pull-request) tables equal the truth by key and value,
    each key once (parents too); `read(table, columns)` gives a table's rows, from whichever
    destination.

    Without bounds every truth item must be there. With bounds, commits whose instant lies in
    `required` must be there and none outside `allowed` may be; pull requests are exactly those
    updated within `required` (their dates are exact UTC).
    """
    spec = EDITIONS[edition]
    truth_commits = sim.truth("commits")
    got = keyed(read(spec.commits, spec.commit_columns), spec.key_width)
    expected = {}
    must: set[tuple[Any, ...]] = set()
    for c in truth_commits:
        row = spec.commit_row(c)
        at = spec.commit_time(c)
        if allowed is None or allowed[0] <= at < allowed[1]:
            expected[row[: spec.key_width]] = row
        if required is None or required[0] <= at < required[1]:
            must.add(row[: spec.key_width])
    missing, extra = must - set(got), set(got) - set(expected)
    assert not missing, f"{len(missing)} truth commits not loaded, e.g. {sorted(missing)[:3]}"
    assert not extra, f"{len(extra)} loaded commits outside the range, e.g. {sorted(extra)[:3]}"
    wrong = [(got[k], expected[k]) for k in got if got[k] != expected[k]]
    assert not wrong, f"{len(wrong)} commits differ from truth, e.g. {wrong[:2]}"
    assert len(got) >= len(must) > 0
    keyed(read(spec.parents, spec.parent_key), len(spec.parent_key))  # each key once
    if prs:
        got_prs = keyed(read(spec.prs, spec.pr_columns), spec.key_width)
        updated = spec.pr_columns.index("updated_at")
        truth_prs = keyed(
            [
                row
                for row in map(spec.pr_row, sim.truth("pull-requests"))
                if required is None or required[0] <= row[updated] < required[1]
            ],
            spec.key_width,
        )
        assert set(got_prs) == set(truth_prs)
        wrong = [(got_prs[k], truth_prs[k]) for k in got_prs if got_prs[k] != truth_prs[k]]
        assert not wrong, f"{len(wrong)} pull requests differ from truth, e.g. {wrong[:2]}"


# --------------------------------------------------------------------------------------------
# helpers: request logs, pipeline state, table snapshots, the command line
# --------------------------------------------------------------------------------------------
def wire_time(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def dated(entry: Mapping[str, Any]) -> tuple[datetime, datetime] | None:
    """A request's [since, until), whichever edition's parameter names."""
    params = entry["params"]
    since = params.get("since_date") or params.get("sinceDate")
    until = params.get("until_date") or params.get("untilDate")
    if since is None or until is None:
        return None
    return wire_time(since), wire_time(until)


def log_since(sim: Simulator, serial: int) -> list[dict[str, Any]]:
    return list(sim.requests(since=serial)["log"])


def snapshot(db_file: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every data table's contents without dlt's columns, sorted."""
    tables = [
        t
        for (t,) in query(
            db_file,
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND "
            # not dlt's tables nor the runs' records (`_repo_analytics_runs`): the data's
            "table_type = 'BASE TABLE' AND NOT starts_with(table_name, '_')",
            [DATASET],
        )
    ]
    out = {}
    for table in sorted(tables):
        columns = [
            c for (c, *_) in query(db_file, f'DESCRIBE "{table}"') if not c.startswith("_dlt")
        ]
        out[table] = rows_of(db_file, table, tuple(columns), "ORDER BY ALL")
    return out


def data_tables(db_file: Path) -> list[str]:
    """The dataset's data tables (none when the file was never written)."""
    if not db_file.exists():
        return []
    with duckdb.connect(str(db_file), read_only=True) as con:
        return [
            t
            for (t,) in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND "
                "NOT starts_with(table_name, '_')",
                [DATASET],
            ).fetchall()
        ]


def cursors(loader: Loader) -> dict[str, Any]:
    """Each resource's stored cursor per scope (the nightly cursors), as `resource:scope`."""
    resources = loader.pipeline().state["sources"]["repo_analytics"]["resources"]
    return {
        f"{name}:{key}": json.loads(json.dumps(scope["last_value"], default=str))
        for name, value in resources.items()
        for key, scope in value.get("scopes", {}).items()
        if "last_value" in scope
    }


def source_args(loader: Loader, **overrides: Any) -> dict[str, Any]:
    """The Loader's arguments without start_date and now (the backfill takes since and now)."""
    args = loader.source_args(**overrides)
    args.pop("start_date", None)
    args.pop("now", None)
    return args


def backfill(
    loader: Loader,
    since: datetime | str,
    until: datetime | str | None,
    window_days: int = WINDOW_DAYS,
    **overrides: Any,
) -> tuple[BackfillResult, list]:
    """One in-process backfill at the simulator's clock, and the requests it made."""
    before = loader.sim.requests()["total"]
    clock = datetime.fromtimestamp(loader.sim.info()["now"], UTC)
    result = run_backfill(
        loader.pipeline(), since, until, window_days, now=clock, **source_args(loader, **overrides)
    )
    return result, log_since(loader.sim, before)


def cli_env(sim: Simulator, **extra: str) -> dict[str, str]:
    """The environment of a `repo-analytics` subprocess pointed at `sim` (no other config)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOURCES__")}
    env.update(
        {
            "SOURCES__REPO_ANALYTICS__EDITION": sim.config.edition,
            "SOURCES__REPO_ANALYTICS__BASE_URL": sim.base_url,
        }
    )
    if sim.config.edition == "cloud":
        env.update(
            {
                "SOURCES__REPO_ANALYTICS__WORKSPACE": sim.info()["workspace"],
                "SOURCES__REPO_ANALYTICS__TOKEN": sim.config.token,
            }
        )
    else:
        env.update(
            {
                "SOURCES__REPO_ANALYTICS__USERNAME": sim.config.username,
                "SOURCES__REPO_ANALYTICS__PASSWORD": sim.config.password,
            }
        )
    env.update(extra)
    return env


def cli_args(folder: Path, *command: str) -> list[str]:
    return [
        str(CLI),
        "--duckdb",
        str(folder / "data.duckdb"),
        "--pipelines-dir",
        str(folder / "pipelines"),
        "--schemas-dir",
        str(folder / "schemas"),
        *command,
    ]


def run_cli(
    folder: Path, env: Mapping[str, str], *command: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    folder.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        cli_args(folder, *command),
        env=dict(env),
        cwd=folder,
        text=True,
        capture_output=True,
        timeout=timeout,
        check=False,
    )


def window_lines(stdout: str) -> dict[int, tuple[str, str, str]]:
    """`window i/n [start .. end): what` lines by window number."""
    out = {}
    for line in stdout.splitlines():
        match = WINDOW_LINE.match(line.strip())
        if match:
            out[int(match[1])] = (match[3], match[4], match[5])
    return out


# --------------------------------------------------------------------------------------------
# one tiny host per edition backfilled, resumed, and backfilled again with other scopes
# --------------------------------------------------------------------------------------------
@dataclass
class Backfilled:
    edition: str
    sim: Simulator
    loader: Loader
    first: BackfillResult
    first_log: list[dict[str, Any]]
    tables: dict[str, list[tuple[Any, ...]]]
    again: BackfillResult
    again_log: list[dict[str, Any]]
    again_tables: dict[str, list[tuple[Any, ...]]]
    slug: str  # the repository of the narrowed backfill
    narrowed: BackfillResult  # repositories=[slug]
    narrowed_log: list[dict[str, Any]]
    relevelled: BackfillResult  # repositories=[slug], and the top level too
    relevelled_log: list[dict[str, Any]]

    @property
    def windows(self) -> list[tuple[datetime, datetime]]:
        return [(w.start, w.end) for w in self.first.windows]


BASE = {"levels": ["repository"], "statistics_period": "week"}
RESOURCES = {
    "cloud": ["commits", "pull_requests", "change_statistics"],
    "server": ["commits", "pull_requests", "commit_statistics", "commit_exports"],
}


@pytest.fixture(scope="module", params=["cloud", "server"])
def backfilled(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Backfilled]:
    """The whole tiny history backfilled in 30-day windows at the repository level (commits,
    pull requests, commit statistics by week; server: commit exports too), then the same
    backfill again; then its first window with one repository, then with one repository and
    the top level too."""
    edition = request.param
    with Simulator(SimConfig(edition=edition, size="tiny", now=FIXED_NOW)) as sim:
        loader = Loader(sim, tmp_path_factory.mktemp(f"backfill_{edition}"))
        base = {**BASE, "resources": RESOURCES[edition]}
        first, first_log = backfill(loader, SINCE.date().isoformat(), None, **base)
        tables = snapshot(loader.db_file)
        again, again_log = backfill(loader, SINCE.date().isoformat(), None, **base)
        again_tables = snapshot(loader.db_file)
        slug = min(
            r["slug"] if edition == "cloud" else f"{r['project']['key']}/{r['slug']}"
            for r in sim.truth("repositories")
        )
        # the first window again, with other scopes
        until = (SINCE + WINDOW).isoformat()
        narrowed, narrowed_log = backfill(
            loader, SINCE.date().isoformat(), until, repositories=[slug], **base
        )
        relevelled, relevelled_log = backfill(
            loader,
            SINCE.date().isoformat(),
            until,
            repositories=[slug],
            **{**BASE, "levels": ["repository", TOP_LEVEL[edition]], "resources": ["commits"]},
        )
        yield Backfilled(
            edition,
            sim,
            loader,
            first,
            first_log,
            tables,
            again,
            again_log,
            again_tables,
            slug,
            narrowed,
            narrowed_log,
            relevelled,
            relevelled_log,
        )


def test_backfill_windows_are_planned_and_clean(backfilled: Backfilled) -> None:
    """Four half-open 30-day windows from 2026-03-01 to the clock (the last one two days long),
    each loaded, none partial."""
    b = backfilled
    assert b.windows == [
        (SINCE + k * WINDOW, min(SINCE + (k + 1) * WINDOW, CLOCK)) for k in range(4)
    ]
    assert b.windows[-1] == (datetime(2026, 5, 30, tzinfo=UTC), CLOCK)
    assert [w.resumed for w in b.first.windows] == [False] * 4
    assert not b.first.partial
    for w in b.first.windows:
        assert w.result is not None and not w.result.report.skips
        assert w.result.report.totals().requests > 0


def test_backfill_equals_truth(backfilled: Backfilled) -> None:
    """The repository-level commit and pull-request tables equal the whole tiny history, by key
    and value, with unique keys (parents too)."""
    assert_tables_equal_truth(backfilled.loader.db_file, backfilled.sim, backfilled.edition)


def repository_scope(repo: Mapping[str, Any], edition: str) -> str:
    """A repository's statistics scope: the slug (cloud) or KEY/slug (server)."""
    return repo["slug"] if edition == "cloud" else f"{repo['project']['key']}/{repo['slug']}"


def assert_complete_weeks(
    db_file: Path, sim: Simulator, edition: str, first_week: datetime
) -> None:
    """Weekly repository commit statistics: one complete row per repository and week from
    `first_week` to the (Monday) clock, each with the truth's commit count (by instant)."""
    spec = EDITIONS[edition]
    weeks = [first_week + k * WEEK for k in range((CLOCK - first_week) // WEEK)]
    expected = {
        (repository_scope(r, edition), week): 0 for r in sim.truth("repositories") for week in weeks
    }
    for c in sim.truth("commits"):
        at = spec.commit_time(c)
        if at >= first_week:
            expected[
                (
                    repository_scope(c["repository"], edition),
                    first_week + ((at - first_week) // WEEK) * WEEK,
                )
            ] += 1
    got = keyed(
        query(
            db_file,
            "SELECT scope, period_start, period_end, commits FROM "
            "commit_statistics WHERE level = 'repository' AND period = 'week'",
        ),
        2,
    )
    assert set(got) == set(expected), "a week is missing (or extra)"
    wrong = {key: row[2:] for key, row in got.items() if row[2:] != (key[1] + WEEK, expected[key])}
    assert not wrong, f"weeks differ from truth (period_end, commits): {wrong}"
    assert sum(expected.values()) > 0


def test_backfill_statistics_cover_every_period(backfilled: Backfilled) -> None:
    """Weekly commit statistics: one complete row per repository and week from the week of
    2026-03-01 to the clock (none lost at a window edge), each with the truth's count."""
    b = backfilled
    truth = b.sim.truth("commits")
    # the Monday of the week of 2026-03-01; the tiny history begins after it
    assert_complete_weeks(b.loader.db_file, b.sim, b.edition, datetime(2026, 2, 23, tzinfo=UTC))
    if b.edition == "server":  # one CSV export window: the API answers 366 days at once
        exported = keyed(
            query(
                b.loader.db_file,
                "SELECT project, repository, commit_hash, window_end FROM server_commit_exports",
            ),
            3,
        )
        assert set(exported) == {
            (c["repository"]["project"]["name"], c["repository"]["slug"], c["id"]) for c in truth
        }  # the CSV names the project
        assert [(w.start, w.end) for w in b.first.exports] == [(SINCE, CLOCK)]
        # the whole backfill's; a repository read again by the narrowed backfill, its window's
        ends = {row[3] for row in exported.values()}
        assert CLOCK in ends and ends <= {CLOCK, *(w.end for w in b.narrowed.exports)}


def test_windows_read_only_their_range(backfilled: Backfilled) -> None:
    """Every dated list request of a window reads within that window (commits of the cloud,
    whose date has no zone, from 26 h before it); statistics in whole weeks; the CSV exports
    (self-hosted) read the whole backfill at once, their window's discovery (and the users of
    the whole range) are the windows' discoveries, not read again: no request is made twice."""
    b = backfilled
    ends = {end: start for start, end in b.windows}
    seen: Counter[datetime] = Counter()
    parts: dict[str, set[tuple[datetime, datetime]]] = {}  # discovery's, by endpoint
    asked = Counter((e["path"], tuple(sorted(e["params"].items()))) for e in b.first_log)
    assert [r for r, times in asked.items() if times > 1] == []
    whole = (SINCE - SLACK, CLOCK)  # the range, which the windows' slices cover
    assert [e for e in b.first_log if ".list." in e["endpoint"] and dated(e) == whole] == []
    for entry in b.first_log:
        span = dated(entry)
        if span is None:
            continue
        endpoint = entry["endpoint"]
        if ".list." in endpoint:
            if endpoint.endswith(".repository"):  # exactly the window (cloud commits: wider)
                assert span[1] in ends, entry
                start = ends[span[1]]
                wider = b.edition == "cloud" and endpoint.startswith("commits")
                assert span[0] == (start - SLACK if wider else start), entry
                seen[span[1]] += 1
            else:  # discovery: the window 26 h wider, in parts read at once (below)
                parts.setdefault(endpoint, set()).add(span)
        elif ".csv." in endpoint:  # exports: exactly their window, the whole backfill
            assert span == (SINCE, CLOCK), entry
        else:  # statistics: whole weeks, the week of the window's start first
            assert span[0].weekday() == 0 and span[0].time() == datetime.min.time(), entry
            assert span[1] - span[0] == WEEK, entry
    assert set(seen) == set(ends)
    # each window's discovery: consecutive parts from its start less 26 h to its end, and
    # no other discovery request
    assert parts
    for endpoint, spans in parts.items():
        for end, start in ends.items():
            reached = start - SLACK
            while reached != end:
                (span,) = [s for s in spans if s[0] == reached]
                spans.remove(span)
                reached = span[1]
                assert reached <= end, (endpoint, span)
        assert spans == set(), endpoint


def test_a_backfill_asks_the_user_list_once(tmp_path: Path) -> None:
    """The cloud's user list (one unpaged answer, no dates) is the backfill's: asked once for
    its four windows, and each window reads the commits of every user in it."""
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        loader = Loader(sim, tmp_path)
        result, log = backfill(
            loader, SINCE.date().isoformat(), None, levels=["user"], resources=["commits"]
        )
        uuids = {u["uuid"] for u in sim.truth("users")}
    assert len(result.windows) == 4 and not result.partial
    assert [e["endpoint"] for e in log if e["endpoint"].startswith("users.")] == [
        "users.list.short"
    ]
    read: dict[str, set[str]] = {}  # the users whose commits each window read, by its end
    for entry in log:
        if entry["endpoint"] == "commits.list.user":
            user = entry["path"].split("/users/", 1)[1].split("/", 1)[0]
            read.setdefault(entry["params"]["until_date"], set()).add(user)
    assert len(read) == 4
    assert all(users == uuids for users in read.values()), read


def only_discovery(log: list[dict[str, Any]], edition: str) -> bool:
    """Whether every request of `log` is of the top-level lists: the discovery a rerun makes
    of its range, to find scopes that appeared since its windows finished (README: Backfill
    windows), and no list or statistics of a scope."""
    top = TOP_LEVEL[edition]
    return all(e["endpoint"] in (f"commits.list.{top}", f"pull-requests.list.{top}") for e in log)


def test_resume_requests_nothing(backfilled: Backfilled) -> None:
    """The same backfill again: every window resumed, no list of a scope asked (only the top-
    level lists of the range, for scopes that appeared since), tables unchanged."""
    b = backfilled
    assert [(w.start, w.end) for w in b.again.windows] == b.windows
    assert [w.resumed for w in b.again.windows] == [True] * 4
    assert all(w.result is None for w in b.again.windows)
    assert b.again_log and only_discovery(b.again_log, b.edition), b.again_log[:3]
    assert not b.again.appeared.windows
    assert b.again_tables == b.tables


def test_other_scope_signature_is_not_finished(backfilled: Backfilled) -> None:
    """repositories=[slug] after an all-repositories backfill is not finished: its windows are
    read again, for that repository only; then a change of levels is not finished either."""
    b = backfilled
    assert [(w.start, w.end) for w in b.narrowed.windows] == b.windows[:1]
    assert [w.resumed for w in b.narrowed.windows] == [False]
    repo_requests = [e for e in b.narrowed_log if e["endpoint"].endswith(".repository")]
    assert repo_requests
    slug = b.slug.split("/")[-1]
    for entry in repo_requests:
        assert f"/repos/{slug}/" in entry["path"] or entry["path"].endswith(f"/repos/{slug}"), entry
    assert {dated(e)[1] for e in repo_requests if ".list." in e["endpoint"]} == {b.windows[0][1]}
    assert [w.resumed for w in b.relevelled.windows] == [False]
    top = TOP_LEVEL[b.edition]
    assert {e["endpoint"] for e in b.relevelled_log} >= {
        f"commits.list.{top}",
        "commits.list.repository",
    }


# --------------------------------------------------------------------------------------------
# reconciliation
# --------------------------------------------------------------------------------------------
def reconcile_args(b: Backfilled) -> dict[str, Any]:
    return source_args(b.loader, **BASE)


def test_reconcile_clean_backfill(backfilled: Backfilled) -> None:
    """What landed equals the API's statistics in every repository and window; the server's
    times are UTC, so there it is exact: no difference at all. The commit statistics table
    is checked too: each stored weekly repository row (all overlap the windows) against the
    API's answer for its week, in commits, lines added and lines deleted."""
    b = backfilled
    check = reconcile(str(b.loader.db_file), DATASET, b.windows, reconcile_args(b))
    repositories = len(b.sim.truth("repositories"))
    states = 4 if b.edition == "cloud" else 3
    weeks = query(
        b.loader.db_file,
        "SELECT count(*) FROM commit_statistics WHERE level = 'repository' AND period = 'week'",
    )[0][0]
    assert weeks >= repositories * 13
    assert check.checked == repositories * len(b.windows) * (2 + states) + weeks * 3
    assert check.ok, check.as_dict()
    assert not [d for d in check.differences if d.verdict == "mismatch"]
    if b.edition == "server":
        assert check.differences == []


def window_label(start: datetime, end: datetime) -> str:
    return f"{start.date()}..{end.date()}"


def mismatches(check: Reconciliation) -> dict[tuple[str, str, str], tuple[int, int]]:
    return {
        (d.repository, d.window, d.measure): (d.api, d.landed)
        for d in check.differences
        if d.verdict == "mismatch"
    }


def deltas(check: Reconciliation) -> dict[tuple[str, str, str], int]:
    """api - landed per (repository, window, measure) that differs, whatever the verdict."""
    return {(d.repository, d.window, d.measure): d.api - d.landed for d in check.differences}


def assert_mismatches(
    found: dict[tuple[str, str, str], tuple[int, int]], expected: dict[tuple[str, str, str], int]
) -> None:
    """Exactly the expected mismatches, each with api = landed + the expected amount."""
    assert set(found) == set(expected), found
    for key, amount in expected.items():
        assert found[key][0] == found[key][1] + amount, (key, found[key])


def test_reconcile_finds_a_dropped_row(backfilled: Backfilled, tmp_path: Path) -> None:
    """One commit row and one pull-request row deleted from a copy of the file: reconcile names
    the repository, window and measure, with api = landed + 1 (lines: + the commit's lines)."""
    b = backfilled
    spec = EDITIONS[b.edition]
    args = reconcile_args(b)
    clean = deltas(reconcile(str(b.loader.db_file), DATASET, b.windows, args))
    # a commit well inside a window, by its instant and (cloud) its local time alike
    inside = [
        (c, w)
        for c in b.sim.truth("commits")
        for w in b.windows
        if w[0] + 2 * DAY <= spec.commit_time(c) < w[1] - 2 * DAY
        and (c["lines"] if b.edition == "cloud" else c["linesOfCode"])["added"] > 0
    ]
    commit, commit_window = inside[len(inside) // 2]
    commit_key = spec.commit_row(commit)[: spec.key_width]
    pr_row = spec.pr_row(b.sim.truth("pull-requests")[5])
    # pull requests are reconciled by their last update, the date the lists are read by
    updated = pr_row[spec.pr_columns.index("updated_at")]
    pr_window = next(w for w in b.windows if w[0] <= updated < w[1])
    db_file = tmp_path / "dropped.duckdb"
    shutil.copy(b.loader.db_file, db_file)
    with duckdb.connect(str(db_file)) as con:
        con.execute(f"SET schema '{DATASET}'")
        for table, columns, key in (
            (spec.commits, spec.commit_columns, commit_key),
            (spec.prs, spec.pr_columns, pr_row[: spec.key_width]),
        ):
            where = " AND ".join(f'"{c}" = ?' for c in columns[: spec.key_width])
            assert con.execute(
                f"DELETE FROM {table} WHERE {where} RETURNING 1", list(key)
            ).fetchall() == [(1,)]
    repo = "/".join(commit_key[:-1])
    pr_repo = "/".join(str(v) for v in pr_row[: spec.key_width - 1])
    state = f"pull_requests_{pr_row[spec.pr_columns.index('state')].lower()}"
    added = (commit["lines"] if b.edition == "cloud" else commit["linesOfCode"])["added"]
    expected_change = {
        (repo, window_label(*commit_window), "commits"): 1,
        (repo, window_label(*commit_window), "lines_added"): added,
        (pr_repo, window_label(*pr_window), state): 1,
    }

    check = reconcile(str(db_file), DATASET, b.windows, args)
    assert not check.ok
    after = deltas(check)
    changed = {k: after.get(k, 0) - clean.get(k, 0) for k in set(after) | set(clean)}
    assert {k: v for k, v in changed.items() if v} == expected_change
    found = mismatches(check)
    pr_key = (pr_repo, window_label(*pr_window), state)
    assert found[pr_key][0] == found[pr_key][1] + 1
    if b.edition == "server":
        assert_mismatches(found, expected_change)
        assert len(check.differences) == 3
    else:
        # A zone-less commit date: near a window edge, a missing commit cannot be told from an
        # edge shift (`within_edge_tolerance`). One window whose edges are far from every
        # commit has no tolerance: the dropped commit is a mismatch there.
        wide = [(SINCE - 2 * DAY, CLOCK + 2 * DAY)]
        check = reconcile(str(db_file), DATASET, wide, args)
        label = window_label(*wide[0])
        assert_mismatches(
            mismatches(check),
            {
                (repo, label, "commits"): 1,
                (repo, label, "lines_added"): added,
                (pr_repo, label, state): 1,
            },
        )
        assert len(check.differences) == 3


# --------------------------------------------------------------------------------------------
# the nightly cursors
# --------------------------------------------------------------------------------------------
def test_backfill_never_moves_the_nightly_cursor(tmp_path: Path) -> None:
    """A nightly load stores cursors; a backfill of older windows leaves them exactly as they
    were, and the next nightly sends the same requests as a twin pipeline that never
    backfilled. Weekly statistics: every week complete, also the one the nightly began in the
    middle of and the backfill ended in the middle of (a partial row must not replace it)."""
    nightly_start, backfill_start = (
        datetime(2026, 5, 20, tzinfo=UTC),
        datetime(2026, 4, 20, tzinfo=UTC),
    )
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        args: dict[str, Any] = {
            "levels": ["repository"],
            "statistics_period": "week",
            "resources": ["commits", "pull_requests", "change_statistics"],
        }
        loader, twin = Loader(sim, tmp_path / "main"), Loader(sim, tmp_path / "twin")
        for one in (loader, twin):
            one.load(start_date=nightly_start.isoformat(), **args)
        stored = cursors(loader)
        assert stored and stored == cursors(twin)
        assert {n.split(":")[0] for n in stored} == {
            "commits.repository",
            "pull_requests.repository",
            "change_statistics.repository",
        }

        result, log = backfill(loader, backfill_start, nightly_start, 15, **args)
        assert [w.resumed for w in result.windows] == [False] * 2 and not result.partial
        assert log and max(dated(e)[1] for e in log if dated(e)) == nightly_start
        assert cursors(loader) == stored

        nightly = []
        for one in (loader, twin):
            before = sim.requests()["total"]
            one.load(start_date=nightly_start.isoformat(), **args)
            nightly.append(
                sorted(
                    json.dumps([e["endpoint"], e["path"], e["params"]], sort_keys=True)
                    for e in log_since(sim, before)
                )
            )
        assert nightly[0] and nightly[0] == nightly[1]
        assert cursors(loader) == cursors(twin)
        # windows end on Tuesday 05-05 and Wednesday 05-20, where the nightly began
        assert_complete_weeks(loader.db_file, sim, "cloud", backfill_start)  # a Monday
        assert_tables_equal_truth(
            loader.db_file,
            sim,
            "cloud",
            required=(backfill_start, CLOCK),
            allowed=(backfill_start - SLACK, CLOCK),
        )


@pytest.mark.parametrize("destination", ["duckdb", "parquet"])
def test_a_lost_working_folder_resumes_from_the_destination(
    tmp_path: Path, destination: str
) -> None:
    """The pipelines' working folder is deleted after a backfill (a new machine, a wiped
    container): the same backfill again finds every window finished in the destination's
    state of the window pipelines, with the scopes each read, and reads no window again."""
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        args: dict[str, Any] = {"levels": ["repository"], "resources": ["commits"]}
        loader = Loader(sim, tmp_path, destination)
        first, log = backfill(loader, SINCE, CLOCK, **args)
        assert log and len(first.windows) > 1 and not any(w.resumed for w in first.windows)
        shutil.rmtree(tmp_path / "pipelines")
        again, log = backfill(loader, SINCE, CLOCK, **args)
        assert [w.resumed for w in again.windows] == [True] * len(first.windows)
        assert only_discovery(log, "cloud")  # what each window read: in the destination too
        assert not again.appeared.windows


@pytest.mark.parametrize(
    ("edition", "days_before_clock"),
    [("cloud", None), ("server", None), ("server", 2), ("cloud", 10)],
    ids=["cloud-no-until", "server-no-until", "server-until-2-days-ago", "cloud-until-10-days-ago"],
)
def test_a_backfill_to_the_clock_leaves_the_nightly_cursors_at_its_end(
    tmp_path: Path, edition: str, days_before_clock: int | None
) -> None:
    """A backfill that reaches the clock (no `until`, or one within the 3-day look-back of
    now) sets every scope's nightly cursor to its end, so the first nightly run reads only its
    look-back (3 days, plus the slack of zone-less dates), not the months since `start_date`,
    at most one request per scope and list; the tables still equal the truth. One ending
    further back (10 days) leaves no cursor: the nightly's look-back would not reach it."""
    until = None if days_before_clock is None else CLOCK - timedelta(days=days_before_clock)
    end = until or CLOCK
    with Simulator(SimConfig(edition=edition, size="tiny", now=FIXED_NOW)) as sim:
        args: dict[str, Any] = {"levels": ["repository"], "resources": ["commits", "pull_requests"]}
        loader = Loader(sim, tmp_path)
        result, _ = backfill(loader, SINCE, until, **args)
        assert not result.partial
        stored = cursors(loader)
        if days_before_clock is not None and days_before_clock > 3:
            assert stored == {}
            return
        repositories = {repository_scope(r, edition) for r in sim.truth("repositories")}
        assert {name.split(":", 1)[1] for name in stored} == repositories
        assert set(stored.values()) == {str(end)}

        before = sim.requests()["total"]
        loader.load(**args)  # the Loader's start_date is 2026-03-01: three months back
        nightly = [e for e in log_since(sim, before) if dated(e)]
        earliest = end - timedelta(days=3) - SLACK
        assert nightly and all(dated(e)[0] >= earliest for e in nightly), min(
            dated(e)[0] for e in nightly
        )
        lists = [e for e in nightly if ".list.repository" in e["endpoint"]]
        assert len(lists) <= 2 * len(repositories)
        assert_tables_equal_truth(
            loader.db_file, sim, edition, required=(SINCE, CLOCK), allowed=(SINCE - SLACK, CLOCK)
        )


class ForbidAfterWindows(Progress):
    """Forbids a repository once `windows` windows have ended: a window ends when its load
    lands, after the window after it was read, so the second window after it is the first
    to meet the refusal."""

    def __init__(self, sim: Simulator, windows: int, slug: str) -> None:
        self.sim, self.windows, self.slug = sim, windows, slug

    def window_ended(self, outcome: Any, ended: int, total: int) -> None:
        if ended == self.windows:
            self.sim.set_conditions(forbidden=[self.slug])


def test_a_skip_in_the_last_window_moves_no_nightly_cursor(make_sim: Any, tmp_path: Path) -> None:
    """A backfill to the clock moves the nightly cursors in its last window's load, unless a
    scope is skipped: a repository forbidden only in the last window (the windows before it
    read it) leaves that window unfinished and every cursor as a nightly run stored it before
    -- none moved up to the end, none dropped. Once the repository is readable again, the
    rerun reads that window alone and moves the cursors of its scopes to the end."""
    sim = make_sim(edition="cloud")
    args: dict[str, Any] = {"levels": ["repository"], "resources": ["commits"]}
    loader = Loader(sim, tmp_path)
    loader.load(**args)
    nightly = cursors(loader)
    # cursors the backfill's end would move (never back: a zone-less date may be past it)
    assert any(datetime.fromisoformat(value) < CLOCK for value in nightly.values()), nightly
    slug = sorted(r["slug"] for r in sim.truth("repositories"))[1]
    total = -(-(CLOCK - SINCE).days // WINDOW_DAYS)
    result = run_backfill(
        loader.pipeline(),
        SINCE,
        None,
        WINDOW_DAYS,
        progress=ForbidAfterWindows(sim, total - 2, slug),
        now=CLOCK,
        **source_args(loader, **args),
    )
    reports = [w.result.report for w in result.windows if w.result]
    assert len(reports) == total and [r.partial for r in reports] == [False] * (total - 1) + [True]
    assert [s.resource for s in reports[-1].skips] == [f"commits.repository:{slug}"]
    assert cursors(loader) == nightly

    sim.set_conditions(forbidden=[])
    rerun = run_backfill(
        loader.pipeline(), SINCE, None, WINDOW_DAYS, now=CLOCK, **source_args(loader, **args)
    )
    assert [w.resumed for w in rerun.windows] == [True] * (total - 1) + [False]
    last = rerun.windows[-1].result
    assert last is not None and not last.report.partial
    read = last.report.planned["commits.repository"]
    assert slug in read
    moved = cursors(loader)
    assert {key: moved[key] for key in nightly if key.split(":", 1)[1] in read} == {
        key: str(max(datetime.fromisoformat(value), CLOCK))
        for key, value in nightly.items()
        if key.split(":", 1)[1] in read
    }


# --------------------------------------------------------------------------------------------
# kill -9 in the middle of a backfill, then resume
# --------------------------------------------------------------------------------------------
KILL_SINCE, KILL_UNTIL = datetime(2026, 2, 1, tzinfo=UTC), datetime(2026, 5, 31, tzinfo=UTC)
KILL_WINDOWS = 6  # 20-day windows, the last one 19 days


@dataclass
class Killed:
    """What one killed run printed before it was killed."""

    finished: set[int]  # windows it printed as loaded
    skipped: set[int]  # windows it printed as finished earlier
    log: list[dict[str, Any]]


def window_read(entry: Mapping[str, Any], ends: list[datetime]) -> int | None:
    """The window (from 1) whose repository list `entry` asked for; None for another request
    (the range's discovery asks every window's slice at the start)."""
    span = dated(entry)
    if span is None or ".list.repository" not in entry["endpoint"] or span[1] not in ends:
        return None
    return ends.index(span[1]) + 1


def run_and_kill(
    args: list[str],
    env: Mapping[str, str],
    cwd: Path,
    sim: Simulator,
    moment: float,
    deadline: float,
    ends: list[datetime],
    ahead: int,
) -> Killed:
    """Start a backfill; after its first newly loaded window (i), as soon as the window
    `ahead` of it (i + ahead) asks its first page, SIGKILL it `moment` (a fraction of the
    time from window i's line to that page) later. The windows' own durations do not place
    the kill: the first window's includes the range's discovery, and a window's load
    overlaps the next one's reading, so a kill placed by them could land windows later."""
    before = sim.requests()["total"]
    proc = subprocess.Popen(
        args,
        env=dict(env),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    printed: list[str] = []
    try:
        while True:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line is not None, "the backfill ended before it could be killed:\n" + "".join(
                printed
            )
            printed.append(line)
            numbered = window_lines(line)
            if numbered and "skipped" not in next(iter(numbered.values()))[2]:
                target = next(iter(numbered)) + ahead
                break
        seen = time.monotonic()
        while not any(window_read(e, ends) == target for e in log_since(sim, before)):
            assert proc.poll() is None and time.monotonic() < deadline, (
                f"the backfill ended before window {target} was read:\n" + "".join(printed)
            )
            time.sleep(0.02)
        time.sleep(moment * (time.monotonic() - seen))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    reader.join(timeout=10)
    while True:
        try:
            line = lines.get_nowait()
        except queue.Empty:
            break
        if line is not None:
            printed.append(line)
    assert proc.returncode == -signal.SIGKILL
    numbered = window_lines("".join(printed))
    return Killed(
        {i for i, v in numbered.items() if "skipped" not in v[2]},
        {i for i, v in numbered.items() if "skipped" in v[2]},
        log_since(sim, before),
    )


def test_kill_9_and_resume(tmp_path: Path) -> None:
    """`repo-analytics backfill` killed with SIGKILL twice at seeded random moments (each after
    a window finished), then run to completion: finished windows are skipped and their lists
    requested from nobody, the tables equal the truth with unique keys, and the final run
    exits 0.

    Each kill is placed by the simulator's request log (a window's first page asked), not by
    a window's duration, so that the kills leave windows for the rerun on a busy machine too
    (placed by durations, 1 run in ~36 killed the last window's run). Kills placed by dlt's
    package folders, on every edition and destination: test_crash_stress.py."""
    rng = random.Random(20260601)
    with Simulator(SimConfig(edition="cloud", size="small", now=FIXED_NOW)) as sim:
        env = cli_env(sim)
        args = cli_args(
            tmp_path,
            "backfill",
            "--since",
            KILL_SINCE.date().isoformat(),
            "--until",
            KILL_UNTIL.date().isoformat(),
            "--window-days",
            "20",
            "--parallel-windows",
            "1",
            "--levels",
            "repository",
            "--resources",
            "commits",
        )
        ends = [
            min(KILL_SINCE + k * timedelta(days=20), KILL_UNTIL) for k in range(1, KILL_WINDOWS + 1)
        ]
        finished: set[int] = set()
        for _ in range(2):
            # the first kill after the next window's extract, once the one after it reads
            # (the next window normalising or loading: its state is written locally, its data
            # not yet), the second as the next window reads
            moment, ahead = (rng.uniform(0.05, 0.95), 2 if not finished else 1)
            killed = run_and_kill(
                args, env, tmp_path, sim, moment, time.monotonic() + 90, ends, ahead
            )
            assert killed.finished, "each run is killed after a window finished"
            assert killed.skipped >= finished, "a window seen finished was not skipped"
            # a finished window's lists are never asked again (its slice of the top-level
            # lists is, to find scopes that appeared since)
            assert not {window_read(e, ends) for e in killed.log} & killed.skipped, (
                "a finished window was requested again"
            )
            finished |= killed.finished | killed.skipped
        assert len(finished) < KILL_WINDOWS, "the kills left no work for the rerun"

        before = sim.requests()["total"]
        done = subprocess.run(
            args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180, check=False
        )  # a bound, not a timing: CI is shared
        assert done.returncode == 0, done.stdout + done.stderr
        numbered = window_lines(done.stdout)
        assert sorted(numbered) == list(range(1, KILL_WINDOWS + 1))
        skipped = {i for i, v in numbered.items() if "skipped" in v[2]}
        assert skipped >= finished
        assert f"{KILL_WINDOWS} windows, {len(skipped)} already finished before" in done.stdout
        rerun = log_since(sim, before)
        unfinished = {i for i in range(1, KILL_WINDOWS + 1) if i not in skipped}
        assert {window_read(e, ends) for e in rerun} - {None} == unfinished

        db_file = tmp_path / "data.duckdb"
        assert_tables_equal_truth(
            db_file,
            sim,
            "cloud",
            required=(KILL_SINCE, KILL_UNTIL),
            allowed=(KILL_SINCE - SLACK, KILL_UNTIL),
            prs=False,
        )


# --------------------------------------------------------------------------------------------
# the command line: nightly twice, exit codes
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cli_sim() -> Iterator[Simulator]:
    """A tiny cloud host for command-line runs."""
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        yield sim


def test_nightly_twice_changes_nothing(cli_sim: Simulator, tmp_path: Path) -> None:
    """Two `repo-analytics load` runs with the same --end-date: both exit 0, the second changes
    no table."""
    env = cli_env(cli_sim)
    command = ("load", "--start-date", "2026-05-25", "--end-date", "2026-05-30T12:00:00+00:00")
    first = run_cli(tmp_path, env, *command)
    assert first.returncode == 0, first.stderr
    tables = snapshot(tmp_path / "data.duckdb")
    assert len(tables) >= 8 and all(tables.values())
    before = cli_sim.requests()["total"]
    second = run_cli(tmp_path, env, *command)
    assert second.returncode == 0, second.stderr
    assert log_since(cli_sim, before), "the second run re-reads its look-back"
    assert snapshot(tmp_path / "data.duckdb") == tables
    assert "load ok" in second.stdout


def test_exit_codes(cli_sim: Simulator, tmp_path: Path) -> None:
    """Exit 2 naming the bad value (no request sent); 1 with one line on stderr for an expired
    token, nothing written; 0 for a clean backfill."""
    env = cli_env(cli_sim)
    before = cli_sim.requests()["total"]
    for command, named in (
        (("--days", "0"), "`days` has invalid value `0`"),
        (("--days", "-2"), "`days` has invalid value `-2`"),
        (
            ("--since", "2026-05-10", "--until", "2026-05-01"),
            "`since` has invalid value `2026-05-10`",
        ),
        (("--since", "2026-05-01", "--window-days", "0"), "`window_days` has invalid value `0`"),
    ):
        done = run_cli(tmp_path / "bad", env, "backfill", *command)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert done.stderr.startswith("repo-analytics: config error:") and named in done.stderr
    assert cli_sim.requests()["total"] == before, "a config error sends no request"

    expired = run_cli(
        tmp_path / "expired",
        {**env, "SOURCES__REPO_ANALYTICS__TOKEN": "sim-expired-token"},
        "backfill",
        "--since",
        "2026-05-01",
        "--until",
        "2026-05-11",
    )
    assert expired.returncode == 1, expired.stdout + expired.stderr
    assert len(expired.stderr.strip().splitlines()) == 1, expired.stderr
    assert expired.stderr.startswith("repo-analytics: failed: the access token was refused")
    assert data_tables(tmp_path / "expired" / "data.duckdb") == []

    clean = run_cli(
        tmp_path / "clean",
        env,
        "backfill",
        "--since",
        "2026-05-01",
        "--until",
        "2026-05-11",
        "--window-days",
        "5",
        "--levels",
        "repository",
        "--resources",
        "commits",
    )
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert sorted(window_lines(clean.stdout)) == [1, 2]


def test_skipped_scope_exits_3_and_its_window_is_not_finished(
    make_sim: Any, tmp_path: Path
) -> None:
    """A forbidden repository is skipped: exit 3, the skip listed. Its windows are not
    finished: once the repository is readable again, a rerun reads them and loads its commits
    (a finished window would otherwise hide the lost data for good)."""
    sim = make_sim(edition="cloud")
    slugs = sorted(r["slug"] for r in sim.truth("repositories"))
    slug = slugs[1]
    sim.set_conditions(forbidden=[slug])
    env = cli_env(sim)
    # listed: a repository the token may not read is left out of the workspace lists
    command = (
        "backfill",
        "--since",
        "2026-05-01",
        "--until",
        "2026-05-21",
        "--window-days",
        "10",
        "--levels",
        "repository",
        "--resources",
        "commits",
        "--repositories",
        ",".join(slugs),
    )
    partial = run_cli(tmp_path, env, *command)
    assert partial.returncode == 3, partial.stdout + partial.stderr
    assert partial.stdout.count(f"  skipped commits.repository:{slug}: forbidden") == 2
    # the verdict names what it could not check (README: Self-reconciliation)
    verdict = next(
        line
        for line in partial.stdout.splitlines()
        if line.startswith("reconciliation with the API's statistics:")
    )
    assert verdict.endswith("; 1 skipped scopes not checked)"), verdict
    assert (
        f"  not checked, skipped by the run: commits.repository:{slug} (forbidden)"
        in partial.stdout.splitlines()
    )
    report = json.loads((tmp_path / "data.report.json").read_text())
    assert report["reconciliation"]["unchecked"] == [f"commits.repository:{slug} (forbidden)"]
    assert not rows_of(
        tmp_path / "data.duckdb", "cloud_commits", ("hash",), f"WHERE repository_slug = '{slug}'"
    )

    sim.set_conditions(forbidden=[])
    before = sim.requests()["total"]
    rerun = run_cli(tmp_path, env, *command)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    lines = window_lines(rerun.stdout)
    assert sorted(lines) == [1, 2] and all("skipped" not in v[2] for v in lines.values())
    assert {dated(e)[1] for e in log_since(sim, before) if f"/repos/{slug}/" in e["path"]} == {
        datetime(2026, 5, 11, tzinfo=UTC),
        datetime(2026, 5, 21, tzinfo=UTC),
    }
    start, end = datetime(2026, 5, 1, tzinfo=UTC), datetime(2026, 5, 21, tzinfo=UTC)
    assert_tables_equal_truth(
        tmp_path / "data.duckdb",
        sim,
        "cloud",
        required=(start, end),
        allowed=(start - SLACK, end),
        prs=False,
    )


# --------------------------------------------------------------------------------------------
# the demo
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("edition", ["cloud", "server"])
def test_demo(edition: str, tmp_path: Path) -> None:
    """`repo-analytics demo --size tiny` in an empty folder: exit 0, reconciliation PASSED, a
    report with backfill, nightly and reconciliation, and a `commits` view with rows; the run
    recorded in the dataset; the dashboard written beside the file, its path printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOURCES__")}
    done = subprocess.run(
        [str(CLI), "demo", "--edition", edition, "--size", "tiny"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reconciliation with the API's statistics: PASSED" in done.stdout
    report = json.loads((tmp_path / "demo.report.json").read_text())
    assert {"backfill", "nightly", "reconciliation"} <= set(report)
    assert report["backfill"] and report["reconciliation"]["ok"] is True
    assert report["reconciliation"]["checked"] > 0
    if edition == "server":
        assert report["reconciliation"]["differences"] == []
    with duckdb.connect(str(tmp_path / "demo.duckdb"), read_only=True) as con:
        commits, editions = con.execute(
            f"SELECT count(*), list(DISTINCT edition) FROM {DATASET}.commits"
        ).fetchone()
        runs = con.execute(
            f"SELECT command, status, reconciliation FROM {DATASET}._repo_analytics_runs"
        ).fetchall()
    assert commits > 500 and editions == [edition]
    assert runs == [("demo", "ok", "PASSED")]
    dashboard = tmp_path / "demo-report.html"
    assert f"open it in a browser (one file, no network needed): {dashboard.as_uri()}" in (
        done.stdout.splitlines()
    )
    assert 'data-table="commits"' in dashboard.read_text(encoding="utf-8")


def test_a_backfill_to_the_clock_leaves_the_exports_nightly_cursors_at_its_end(
    tmp_path: Path,
) -> None:
    """The CSV exports, read in windows of their own after the others, get their nightly
    cursors too: the first nightly run asks each export for its look-back (dated), not the
    30 days an export answers without dates (ten times the look-back's rows), and the export
    tables still hold each truth commit of the range once."""
    with Simulator(SimConfig(edition="server", size="tiny", now=FIXED_NOW)) as sim:
        args: dict[str, Any] = {
            "levels": ["repository"],
            "resources": ["commits", "commit_exports", "pull_request_exports"],
        }
        loader = Loader(sim, tmp_path)
        result, _ = backfill(loader, SINCE, None, **args)
        assert not result.partial and result.exports
        stored = cursors(loader)
        repositories = {repository_scope(r, "server") for r in sim.truth("repositories")}
        for family in ("commits", "commit_exports", "pull_request_exports"):
            assert {
                name.split(":", 1)[1] for name in stored if name.startswith(f"{family}.")
            } == repositories, family
        assert set(stored.values()) == {str(CLOCK)}

        before = sim.requests()["total"]
        loader.load(**args)
        exports = [e for e in log_since(sim, before) if ".csv." in e["endpoint"]]
        assert len(exports) == 2 * len(repositories)
        earliest = CLOCK - timedelta(days=3) - SLACK
        assert all(dated(e) and dated(e)[0] >= earliest for e in exports), [  # type: ignore[index]
            e["params"] for e in exports
        ][:3]
        with duckdb.connect(str(loader.db_file), read_only=True) as con:
            hashes = con.execute(
                "SELECT commit_hash FROM repo_analytics.server_commit_exports"
            ).fetchall()
        truth = [c["id"] for c in sim.truth("commits") if SINCE <= from_z(c["authorTimestamp"])]
        assert sorted(h for (h,) in hashes) == sorted(truth)
