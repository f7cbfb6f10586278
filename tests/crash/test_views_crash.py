"""Canonical views of both editions, and `repo-analytics load` killed with SIGKILL and rerun.

A) One load of each edition (tiny simulators) into its own DuckDB file, and both editions
into one file and dataset through two pipelines: every view has the README's columns, in
order, and its rows are the base tables mapped as the README's "Canonical views" table says.
The expected rows are built here, in Python, from the base tables (and the simulator's truth
for reviewers), never from the views' SQL.

B) `repo-analytics load` (a subprocess, against a small cloud host) is killed with SIGKILL at
seeded random points on one working folder and DuckDB file: during extract, while files load
into staging, between merge jobs, after the load (views); then it is rerun to the end. Every
natural key is held once after every kill and at the end, and the tables equal a clean run's.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import dlt
import duckdb
import pytest

from pipelines.runs.load import make_pipeline, run_load
from simulator import Simulator
from tests.support.loader import CLOUD_PRIMARY_KEYS, DATASET, FAST_RETRY, Loader

MakeSim = Callable[..., Simulator]
Row = tuple[Any, ...]

# --------------------------------------------------------------------------------------------
# the README's "Canonical views (DuckDB)" table
# --------------------------------------------------------------------------------------------
VIEW_COLUMNS: dict[str, tuple[str, ...]] = {
    "commits": (
        "source",
        "edition",
        "project_key",
        "repository_slug",
        "commit_id",
        "author_name",
        "author_email",
        "author_user",
        "authored_at_utc",
        "authored_at_local",
        "lines_added",
        "lines_deleted",
        "is_merge",
        "parent_count",
    ),
    "pull_requests": (
        "source",
        "edition",
        "project_key",
        "repository_slug",
        "pull_request_id",
        "title",
        "state",
        "created_at",
        "updated_at",
        "closed_at",
        "author_name",
        "author_user",
        "target_branch",
        "comment_count",
        "task_count",
        "reviewer_count",
        "resolved_at",
        "resolved_at_source",
    ),
    "pull_request_statistics": (
        "source",
        "edition",
        "level",
        "scope",
        "period",
        "period_start",
        "period_end",
        "pull_requests",
        "open",
        "merged",
        "declined",
        "superseded",
    ),
    "commit_statistics": (
        "source",
        "edition",
        "level",
        "scope",
        "period",
        "period_start",
        "period_end",
        "commits",
        "lines_added",
        "lines_deleted",
    ),
    "daily_author_activity": (
        "source",
        "edition",
        "project_key",
        "repository_slug",
        "author_name",
        "day",
        "commits",
        "lines_added",
        "lines_deleted",
    ),
    "pull_request_cycle_times": (
        "source",
        "edition",
        "project_key",
        "repository_slug",
        "pull_request_id",
        "state",
        "created_at",
        "resolved_at",
        "hours_to_resolve",
        "resolved_at_source",
    ),
    "pull_request_outcomes_weekly": (
        "source",
        "edition",
        "project_key",
        "repository_slug",
        "week",
        "merged",
        "declined",
        "superseded",
        "resolutions_from_updated_at",
    ),
    "commits_by_level": (
        "source",
        "edition",
        "level",
        "scope",
        "project_key",
        "repository_slug",
        "commit_id",
        "day",
        "day_basis",
        "is_merge",
        "lines_added",
        "lines_deleted",
    ),
    "pull_requests_by_level": (
        "source",
        "edition",
        "level",
        "scope",
        "project_key",
        "repository_slug",
        "pull_request_id",
        "state",
        "created_at",
        "resolved_at",
        "resolved_at_source",
    ),
    "daily_commit_activity": (
        "source",
        "edition",
        "level",
        "scope",
        "day",
        "day_basis",
        "commits",
        "merge_commits",
        "commits_with_lines",
        "lines_added",
        "lines_deleted",
    ),
    "daily_pull_request_activity": (
        "source",
        "edition",
        "level",
        "scope",
        "day",
        "created",
        "created_open",
        "created_merged",
        "created_declined",
        "created_superseded",
        "merged",
        "declined",
        "superseded",
        "resolutions_from_updated_at",
    ),
}
BASE_VIEWS = ("commits", "pull_requests", "pull_request_statistics", "commit_statistics")
EDITIONS = ("cloud", "server")
STATES = ("MERGED", "DECLINED", "SUPERSEDED")  # the weekly view's counts, in its column order
VIEWS_START = "2026-05-01"  # a month of the tiny hosts' history: every kind of row, quickly
# Session time zones a reader may have: the views must not depend on them.
READER_ZONES = ("UTC", "America/Los_Angeles", "Pacific/Kiritimati")


def query(db_file: Path, sql: str, params: list[Any] | None = None, zone: str = "UTC") -> list[Row]:
    """Rows of `sql` in the dataset, read in a session with time zone `zone`."""
    with duckdb.connect(str(db_file), read_only=True) as con:
        con.execute(f"SET TimeZone = '{zone}'")
        con.execute(f"SET schema '{DATASET}'")
        return con.execute(sql, params or []).fetchall()


def load_edition(sim: Simulator, db_file: Path, work: Path, pipeline_name: str) -> None:
    """One load of `sim` into `db_file`'s dataset by the pipeline `pipeline_name`."""
    pipeline = make_pipeline(
        pipeline_name=pipeline_name,
        destination=dlt.destinations.duckdb(str(db_file)),
        dataset_name=DATASET,
        pipelines_dir=str(work / "pipelines"),
        schemas_dir=work / "schemas",
    )
    args = Loader(sim, work).source_args(start_date=VIEWS_START)
    result = run_load(pipeline, **args)
    assert not result.report.partial, result.report.skips


@dataclass(frozen=True)
class ViewDbs:
    """DuckDB files: one per edition loaded alone, and one with both editions."""

    single: dict[str, Path]
    both: Path

    def of(self, kind: str, edition: str) -> Path:
        return self.both if kind == "both" else self.single[edition]


@pytest.fixture(scope="module")
def view_dbs(
    cloud_sim: Simulator, server_sim: Simulator, tmp_path_factory: pytest.TempPathFactory
) -> ViewDbs:
    """Each edition loaded once on its own; then the server pipeline loads into a copy of the
    cloud file (same dataset, same schemas folder): one file written by two pipelines."""
    root = tmp_path_factory.mktemp("views")
    single: dict[str, Path] = {}
    for edition, sim in {"cloud": cloud_sim, "server": server_sim}.items():
        single[edition] = root / edition / "data.duckdb"
        single[edition].parent.mkdir()
        load_edition(sim, single[edition], root / edition, f"repo_analytics_{edition}")
    both = root / "both" / "data.duckdb"
    both.parent.mkdir()
    shutil.copy(single["cloud"], both)
    shutil.copytree(root / "cloud" / "schemas", root / "both" / "schemas")
    load_edition(server_sim, both, root / "both", "repo_analytics_server")
    return ViewDbs(single, both)


# expected view rows, from the base tables ---------------------------------------------------
def expected_commits(db_file: Path, edition: str) -> list[Row]:
    if edition == "cloud":
        return [
            (
                "cloud",
                None,
                slug,
                sha,
                name,
                None,
                uuid,
                None,
                local,
                added,
                deleted,
                merge,
                parents,
            )
            for slug, sha, name, uuid, local, added, deleted, merge, parents in query(
                db_file,
                "SELECT repository_slug, hash, author_display_name, author_uuid, "
                "date_local, lines_added, lines_deleted, is_merge, parent_count "
                "FROM cloud_commits",
            )
        ]
    return [
        ("server", key, slug, sha, name, email, user, instant, None, added, deleted, merge, parents)
        for key, slug, sha, name, email, user, instant, added, deleted, merge, parents in query(
            db_file,
            "SELECT project_key, repository_slug, id, author_display_name, "
            "author_email, user_name, author_timestamp, lines_added, lines_deleted, "
            "is_merge, parent_count FROM server_commits",
        )
    ]


def reviewer_counts(db_file: Path) -> Counter[tuple[str, str, int]]:
    return Counter(
        query(db_file, "SELECT project_key, repository_slug, id FROM server_pull_request_reviewers")
    )


def resolution(
    state: str, closed: datetime | None, updated: datetime, source: str
) -> tuple[datetime | None, str | None]:
    """(resolved_at, resolved_at_source) as the README says: open ones are not resolved; a
    closing time from `source` when there is one, else the last update."""
    if state == "OPEN":
        return None, None
    return (closed, source) if closed is not None else (updated, "updated_at")


def csv_resolutions(db_file: Path) -> dict[tuple[str, str, int], datetime]:
    """Server closing times: created date + `Time to resolve (s)` of the pull request's latest
    CSV export row (by its last-updated date), by (project name, repository name, id)."""
    latest: dict[tuple[str, str, int], tuple[datetime, int | None]] = {}
    for project, repository, number, updated, seconds in query(
        db_file,
        "SELECT project, repository, pull_request_id, last_updated_date, "
        "time_to_resolve_s FROM server_pull_request_exports",
    ):
        key = (project, repository, number)
        if key not in latest or updated > latest[key][0]:
            latest[key] = (updated, seconds)
    created = {
        (project, repository, number): at
        for project, repository, number, at in query(
            db_file,
            "SELECT project_name, repository_name, id, created_at FROM server_pull_requests",
        )
    }
    return {
        key: created[key] + timedelta(seconds=seconds)
        for key, (_, seconds) in latest.items()
        if seconds is not None and key in created
    }


def expected_pull_requests(db_file: Path, edition: str) -> list[Row]:
    if edition == "cloud":
        return [
            (
                "cloud",
                None,
                slug,
                number,
                title,
                state,
                created,
                updated,
                closed,
                name,
                uuid,
                branch,
                comments,
                tasks,
                None,
                *resolution(state, closed, updated, "closed_at"),
            )
            for (
                slug,
                number,
                title,
                state,
                created,
                updated,
                closed,
                name,
                uuid,
                branch,
                comments,
                tasks,
            ) in query(
                db_file,
                "SELECT repository_slug, id, title, state, created_at, updated_at, "
                "closed_at, author_display_name, author_uuid, destination_branch, "
                "comment_count, task_count FROM cloud_pull_requests",
            )
        ]
    reviewers = reviewer_counts(db_file)
    closing = csv_resolutions(db_file)
    return [
        (
            "server",
            key,
            slug,
            number,
            title,
            state,
            created,
            updated,
            None,
            name,
            user,
            branch,
            None,
            None,
            reviewers[(key, slug, number)],
            *resolution(
                state, closing.get((project, repository, number)), updated, "csv_time_to_resolve"
            ),
        )
        for (
            key,
            slug,
            number,
            title,
            state,
            created,
            updated,
            name,
            user,
            branch,
            project,
            repository,
        ) in query(
            db_file,
            "SELECT project_key, repository_slug, id, title, state, created_at, "
            "updated_at, author_display_name, author_user_name, to_branch, project_name, "
            "repository_name FROM server_pull_requests",
        )
    ]


def expected_pull_request_statistics(db_file: Path, edition: str) -> list[Row]:
    if edition == "cloud":
        return [
            ("cloud", *row)
            for row in query(
                db_file,
                "SELECT level, scope, period, period_start, period_end, pull_requests, "
                "open, merged, declined, superseded FROM cloud_pull_request_statistics",
            )
        ]
    return [
        ("server", *row, None)
        for row in query(
            db_file,
            "SELECT level, scope, period, period_start, period_end, pull_requests, open, "
            "merged, declined FROM server_pull_request_statistics",
        )
    ]


def expected_commit_statistics(db_file: Path, edition: str) -> list[Row]:
    if edition == "cloud":
        return [
            ("cloud", "repository", *row)
            for row in query(
                db_file,
                "SELECT repository_slug, period, period_start, period_end, commits, "
                "lines_added_total, lines_deleted_total FROM cloud_commit_change_statistics",
            )
        ]
    return [
        ("server", *row)
        for row in query(
            db_file,
            "SELECT level, scope, period, period_start, period_end, commits, lines_added, "
            "lines_deleted FROM server_commit_statistics",
        )
    ]


def total(values: list[int | None]) -> int | None:
    """SQL's sum: NULL when every value is NULL."""
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def expected_daily_activity(db_file: Path, edition: str) -> list[Row]:
    """The GROUP BY, done here: the UTC day of the instant (cloud: of the local time)."""
    groups: dict[Row, list[Row]] = {}
    for row in expected_commits(db_file, edition):
        moment: datetime = row[7] if row[7] is not None else row[8]
        day: date = (moment.astimezone(UTC) if moment.tzinfo else moment).date()
        groups.setdefault((row[0], row[1], row[2], row[4], day), []).append(row)
    return [
        (*key, len(rows), total([r[9] for r in rows]), total([r[10] for r in rows]))
        for key, rows in groups.items()
    ]


EXPECTED: dict[str, Callable[[Path, str], list[Row]]] = {
    "commits": expected_commits,
    "pull_requests": expected_pull_requests,
    "pull_request_statistics": expected_pull_request_statistics,
    "commit_statistics": expected_commit_statistics,
    "daily_author_activity": expected_daily_activity,
}


def view_rows(db_file: Path, view: str, edition: str, zone: str = "UTC") -> Counter[Row]:
    """The edition's rows of the view, less `source` (`test_view_source_is_the_base_tables`)."""
    return Counter(
        query(db_file, f"SELECT * EXCLUDE (source) FROM {view} WHERE edition = ?", [edition], zone)
    )


# A: tests ------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["single", "both"])
@pytest.mark.parametrize("edition", EDITIONS)
def test_views_have_the_readme_columns(view_dbs: ViewDbs, edition: str, kind: str) -> None:
    """Every view exists, as a view, with exactly the README's columns in its order."""
    db_file = view_dbs.of(kind, edition)
    found: dict[str, str] = dict(
        query(
            db_file,
            f"SELECT table_name, table_type FROM information_schema.tables "
            f"WHERE table_schema = '{DATASET}'",
        )
    )
    for view, columns in VIEW_COLUMNS.items():
        assert found.get(view) == "VIEW", (view, found.get(view))
        names = tuple(
            c
            for (c,) in query(
                db_file,
                "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                f"'{DATASET}' AND table_name = '{view}' ORDER BY ordinal_position",
            )
        )
        assert names == columns, view


def test_view_column_types_do_not_depend_on_the_edition(view_dbs: ViewDbs) -> None:
    """A view's column types are the same whichever edition (or both) was loaded."""

    def types(db_file: Path) -> list[Row]:
        return query(
            db_file,
            "SELECT table_name, column_name, data_type FROM "
            f"information_schema.columns WHERE table_schema = '{DATASET}' AND "
            f"table_name IN {tuple(VIEW_COLUMNS)} ORDER BY ALL",
        )

    cloud = types(view_dbs.single["cloud"])
    assert len(cloud) == sum(len(c) for c in VIEW_COLUMNS.values())
    assert types(view_dbs.single["server"]) == cloud
    assert types(view_dbs.both) == cloud
    typed = {(view, column): kind for view, column, kind in cloud}
    assert typed["commits", "authored_at_utc"] == "TIMESTAMP WITH TIME ZONE"
    assert typed["commits", "authored_at_local"] == "TIMESTAMP"  # zone-less: never labelled UTC
    assert typed["daily_author_activity", "day"] == "DATE"
    assert typed["daily_commit_activity", "day"] == "DATE"
    assert typed["daily_pull_request_activity", "day"] == "DATE"
    assert typed["daily_commit_activity", "lines_added"] == "BIGINT"


@pytest.mark.parametrize("kind", ["single", "both"])
@pytest.mark.parametrize("view", BASE_VIEWS)
@pytest.mark.parametrize("edition", EDITIONS)
def test_view_rows_are_the_base_table_mapped(
    view_dbs: ViewDbs, edition: str, view: str, kind: str
) -> None:
    """The edition's rows of the view are its base table's, column by column as the README maps."""
    db_file = view_dbs.of(kind, edition)
    expected = Counter(EXPECTED[view](db_file, edition))
    assert expected, f"no {edition} rows for {view}: the test would be vacuous"
    assert view_rows(db_file, view, edition) == expected
    editions = {e for (e,) in query(db_file, f"SELECT DISTINCT edition FROM {view}")}
    assert editions == ({edition} if kind == "single" else set(EDITIONS))


# each base view's table per edition, as the README's "Canonical views" table names them
BASE_TABLES = {
    "cloud": {
        "commits": "cloud_commits",
        "pull_requests": "cloud_pull_requests",
        "pull_request_statistics": "cloud_pull_request_statistics",
        "commit_statistics": "cloud_commit_change_statistics",
    },
    "server": {
        "commits": "server_commits",
        "pull_requests": "server_pull_requests",
        "pull_request_statistics": "server_pull_request_statistics",
        "commit_statistics": "server_commit_statistics",
    },
}


@pytest.mark.parametrize("view", BASE_VIEWS)
def test_view_source_is_the_base_tables(
    view_dbs: ViewDbs, cloud_sim: Simulator, server_sim: Simulator, view: str
) -> None:
    """Every view row's `source` is its base row's: the host (and cloud workspace) it came
    from, one per edition here."""
    hosts = {"cloud": cloud_sim, "server": server_sim}
    for edition, sim in hosts.items():
        host = sim.base_url.split("//", 1)[1]
        expected = f"{host}/{sim.info()['workspace']}" if edition == "cloud" else host
        table = BASE_TABLES[edition][view]
        assert query(view_dbs.both, f"SELECT DISTINCT source FROM {table}") == [(expected,)]
        shown = query(
            view_dbs.both,
            f"SELECT source, count(*) FROM {view} WHERE edition = ? GROUP BY ALL",
            [edition],
        )
        assert shown == [(expected, sum(view_rows(view_dbs.both, view, edition).values()))]


def test_cloud_commit_times_are_local_and_server_times_utc(view_dbs: ViewDbs) -> None:
    """Cloud: authored_at_local is `date_local`, authored_at_utc NULL; server: the reverse."""
    counts = {
        edition: (rows, utc, local)
        for edition, rows, utc, local in query(
            view_dbs.both,
            "SELECT edition, count(*), count(authored_at_utc), "
            "count(authored_at_local) FROM commits GROUP BY 1",
        )
    }
    cloud, server = counts["cloud"][0], counts["server"][0]
    assert counts == {"cloud": (cloud, 0, cloud), "server": (server, server, 0)}
    mismatched = query(
        view_dbs.both,
        """
        SELECT count(*) FROM commits v JOIN cloud_commits c
          ON v.edition = 'cloud' AND v.repository_slug = c.repository_slug AND v.commit_id = c.hash
        WHERE v.authored_at_local IS DISTINCT FROM c.date_local""",
    )
    assert mismatched == [(0,)]
    mismatched = query(
        view_dbs.both,
        """
        SELECT count(*) FROM commits v JOIN server_commits s
          ON v.edition = 'server' AND v.project_key = s.project_key
         AND v.repository_slug = s.repository_slug AND v.commit_id = s.id
        WHERE v.authored_at_utc IS DISTINCT FROM s.author_timestamp""",
    )
    assert mismatched == [(0,)]


def test_reviewer_count_is_the_reviewer_rows_and_the_truth(
    view_dbs: ViewDbs, server_sim: Simulator
) -> None:
    """reviewer_count = rows in server_pull_request_reviewers = reviewers the host serves."""
    db_file = view_dbs.single["server"]
    loaded = {
        (key, slug, number): count
        for key, slug, number, count in query(
            db_file,
            "SELECT project_key, repository_slug, pull_request_id, reviewer_count "
            "FROM pull_requests",
        )
    }
    in_table = reviewer_counts(db_file)
    assert loaded == {key: in_table[key] for key in loaded}
    truth = {
        (
            pr["toRef"]["repository"]["project"]["key"],
            pr["toRef"]["repository"]["slug"],
            pr["id"],
        ): len(pr.get("reviewers") or ())
        for pr in server_sim.truth("pull-requests")
    }
    assert loaded == {key: truth[key] for key in loaded}
    assert 0 in loaded.values() and max(loaded.values()) > 0  # not vacuous


@pytest.mark.parametrize("zone", READER_ZONES)
@pytest.mark.parametrize("kind", ["single", "both"])
@pytest.mark.parametrize("edition", EDITIONS)
def test_daily_author_activity_is_the_group_by(
    view_dbs: ViewDbs, edition: str, kind: str, zone: str
) -> None:
    """Sums per (author, repository, day) equal the GROUP BY of the base table, in any zone."""
    db_file = view_dbs.of(kind, edition)
    expected = Counter(expected_daily_activity(db_file, edition))
    assert sum(row[5] for row in expected) == len(expected_commits(db_file, edition))
    assert view_rows(db_file, "daily_author_activity", edition, zone) == expected


def resolved(view_dbs: ViewDbs) -> list[Row]:
    """Closed pull requests of both editions with their resolution (time, source), built from
    the base tables as the README says (cloud closed_at, server the CSV's time to resolve)."""
    return [
        (*row[:4], row[5], row[6], *row[15:17])
        for edition in EDITIONS
        for row in expected_pull_requests(view_dbs.both, edition)
        if row[5] != "OPEN"
    ]


def test_pull_request_cycle_times(view_dbs: ViewDbs) -> None:
    """Closed pull requests only; resolved_at per edition; the exact hours between the two
    instants (docs/decisions/canonical-views-sqlglot.md)."""
    expected = resolved(view_dbs)
    found = query(view_dbs.both, "SELECT * EXCLUDE (source) FROM pull_request_cycle_times")
    assert Counter((*row[:7], row[8]) for row in found) == Counter(expected)
    assert {row[0] for row in found} == set(EDITIONS)
    sources = {(row[0], row[8]) for row in found}
    assert sources == {("cloud", "closed_at"), ("server", "csv_time_to_resolve")}
    for *_, created, done, hours, _ in found:
        exact = (done - created).total_seconds() / 3600
        assert abs(hours - exact) < 1e-9, (hours, exact)
    assert any(round(hours * 60) != hours * 60 for *_, hours, _ in found)  # not to the minute


def week_of(value: date | datetime) -> date:
    """A `week` value as the Monday it starts: a date, or an instant at that UTC midnight."""
    if isinstance(value, datetime):
        moment = value.astimezone(UTC)
        assert moment.time() == datetime.min.time(), f"{value} is not a UTC midnight"
        return moment.date()
    return value


@pytest.mark.parametrize("zone", READER_ZONES)
def test_pull_request_outcomes_weekly(view_dbs: ViewDbs, zone: str) -> None:
    """Counts by state per UTC week (Monday) of resolution, the same in any session zone."""
    counts: Counter[Row] = Counter()
    for edition, key, slug, _, state, _, done, source in resolved(view_dbs):
        day = done.astimezone(UTC).date()
        week = (edition, key, slug, day - timedelta(days=day.weekday()))
        counts[(*week, state)] += 1
        counts[(*week, "from updated_at")] += source == "updated_at"
    expected = Counter(
        {
            (*group[:4], *(counts[(*group[:4], s)] for s in (*STATES, "from updated_at"))): 1
            for group in counts
        }
    )
    found = Counter(
        (edition, key, slug, week_of(week), merged, declined, superseded, updated)
        for edition, key, slug, week, merged, declined, superseded, updated in query(
            view_dbs.both, "SELECT * EXCLUDE (source) FROM pull_request_outcomes_weekly", zone=zone
        )
    )
    assert found == expected


@pytest.mark.parametrize("view", list(VIEW_COLUMNS))
def test_both_editions_in_one_dataset_is_the_union(view_dbs: ViewDbs, view: str) -> None:
    """Two pipelines, one file and dataset: each view holds exactly both editions' rows."""
    pipelines = query(view_dbs.both, "SELECT DISTINCT pipeline_name FROM _dlt_pipeline_state")
    assert sorted(pipelines) == [("repo_analytics_cloud",), ("repo_analytics_server",)]
    everything = Counter(query(view_dbs.both, f"SELECT * FROM {view}"))
    alone = Counter(query(view_dbs.single["cloud"], f"SELECT * FROM {view}"))
    alone.update(query(view_dbs.single["server"], f"SELECT * FROM {view}"))
    assert {row[1] for row in everything} == set(EDITIONS)
    assert len({row[0] for row in everything}) == 2  # each edition's host is a source
    assert everything == alone


# --------------------------------------------------------------------------------------------
# B: crash safety
# --------------------------------------------------------------------------------------------
CLI = str(Path(sys.executable).with_name("repo-analytics"))
# Where the kills land comes from this seed (set the variable to explore other points).
SEED = int(os.environ.get("REPO_ANALYTICS_CRASH_SEED", "20260601"))
RUN_LIMIT_SECONDS = 120
# A tiny host, two weeks: the load step (21 jobs, ~0.4 s) is as long as a small host's, whose
# longer extract made the part take 40-90 s on two busy cores; kills are placed by watching
# the package's jobs, not by the clock, and the test asserts one landed inside the load step.
CRASH_SIZE = os.environ.get("REPO_ANALYTICS_CRASH_SIZE", "tiny")
CRASH_WINDOW = ("--start-date", "2026-05-17", "--end-date", "2026-05-31")
DLT_COLUMNS = ("_dlt_load_id", "_dlt_id")
CLOUD_KEYS = CLOUD_PRIMARY_KEYS
LOAD_ID = re.compile(r"\d+\.\d+")
PHASES = ("extracted", "normalized", "loaded")  # package folders: normalize/extracted, load/...


def listing(folder: Path) -> list[str]:
    """Names in a folder that may vanish while we look."""
    try:
        return os.listdir(folder)
    except FileNotFoundError:
        return []


def load_ids(folder: Path) -> set[str]:
    """Package folders (named by load id; dlt also leaves temporary folders about)."""
    return {name for name in listing(folder) if LOAD_ID.fullmatch(name)}


def packages(pipelines: Path) -> dict[str, set[str]]:
    """Load ids by phase, over every pipeline in the working folder."""
    found: dict[str, set[str]] = {phase: set() for phase in PHASES}
    for name in listing(pipelines):
        found["extracted"].update(load_ids(pipelines / name / "normalize" / "extracted"))
        found["normalized"].update(load_ids(pipelines / name / "load" / "normalized"))
        found["loaded"].update(load_ids(pipelines / name / "load" / "loaded"))
    return found


def completed_jobs(pipelines: Path, load_id: str) -> list[str]:
    return [
        job
        for name in listing(pipelines)
        for job in listing(pipelines / name / "load" / "normalized" / load_id / "completed_jobs")
    ]


@dataclass
class Watch:
    """What the poller saw of one run: when each phase of its own package began."""

    started: float
    before: set[str]  # load ids that existed before the run
    marks: dict[str, float] = field(default_factory=dict)
    package: str | None = None

    def phase(self) -> str:
        for phase in reversed(PHASES):
            if phase in self.marks:
                return phase
        return "extracting"


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    watch: Watch
    killed_in: str | None = None  # the phase the poller saw when it sent SIGKILL
    jobs_done: list[str] = field(default_factory=list)  # completed jobs of a killed package


Trigger = Callable[[Watch, float, Path], bool]


def cli_env(sim: Simulator) -> dict[str, str]:
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SOURCES__", "EXTRACT__", "NORMALIZE__", "LOAD__"))
    }
    environment.update(
        {
            "SOURCES__REPO_ANALYTICS__EDITION": "cloud",
            "SOURCES__REPO_ANALYTICS__BASE_URL": sim.base_url,
            "SOURCES__REPO_ANALYTICS__WORKSPACE": sim.config.workspace,
            "SOURCES__REPO_ANALYTICS__TOKEN": sim.config.token,
            "SOURCES__REPO_ANALYTICS__RETRY": json.dumps(FAST_RETRY),
        }
    )
    return environment


def run_cli(sim: Simulator, path: Path, kill_when: Trigger | None = None) -> Run:
    """`repo-analytics load` on `path`'s DuckDB file and working folder; SIGKILL when told."""
    pipelines = path / "pipelines"
    path.mkdir(parents=True, exist_ok=True)
    command = [
        CLI,
        "--duckdb",
        str(path / "data.duckdb"),
        "--pipelines-dir",
        str(pipelines),
        "--schemas-dir",
        str(path / "schemas"),
        "load",
        *CRASH_WINDOW,
    ]
    seen = packages(pipelines)
    watch = Watch(time.monotonic(), set().union(*seen.values()))
    process = subprocess.Popen(
        command,
        env=cli_env(sim),
        cwd=path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    killed_in: str | None = None
    jobs: list[str] = []
    while process.poll() is None:
        elapsed = time.monotonic() - watch.started
        for phase, ids in packages(pipelines).items():
            new = ids - watch.before
            if new and phase not in watch.marks:
                watch.marks[phase] = elapsed
                watch.package = sorted(new)[-1]
        if kill_when is not None and kill_when(watch, elapsed, pipelines):
            killed_in = watch.phase()
            os.killpg(process.pid, signal.SIGKILL)
            break
        if elapsed > RUN_LIMIT_SECONDS:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            pytest.fail(f"`repo-analytics load` still running after {RUN_LIMIT_SECONDS} s")
        time.sleep(0.003)
    stdout, stderr = process.communicate(timeout=120)
    if killed_in is not None and watch.package is not None:
        jobs = completed_jobs(pipelines, watch.package)
    return Run(
        process.returncode, stdout, stderr, time.monotonic() - watch.started, watch, killed_in, jobs
    )


def after(seconds: float) -> Trigger:
    """Kill `seconds` after the start."""
    return lambda watch, elapsed, pipelines: elapsed >= seconds


def jobs_done(count: int, merge: bool) -> Trigger:
    """Kill once `count` file (or merge SQL) jobs of the run's package have completed."""

    def trigger(watch: Watch, elapsed: float, pipelines: Path) -> bool:
        if "normalized" not in watch.marks or watch.package is None:
            return False
        jobs = completed_jobs(pipelines, watch.package)
        return sum(job.endswith(".sql") == merge for job in jobs) >= count

    return trigger


def after_load(seconds: float) -> Trigger:
    """Kill `seconds` after the run's package was loaded (views, exit)."""
    return lambda watch, elapsed, pipelines: (
        "loaded" in watch.marks and elapsed >= watch.marks["loaded"] + seconds
    )


def snapshot(db_file: Path, into: Path) -> Path:
    """A copy of a DuckDB file and its WAL (a killed writer leaves one), to read safely."""
    into.mkdir(parents=True, exist_ok=True)
    copy = into / db_file.name
    for suffix in ("", ".wal"):
        source = Path(str(db_file) + suffix)
        if source.exists():
            shutil.copy(source, Path(str(copy) + suffix))
    return copy


def data_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [
        t
        for (t,) in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND "
            # not dlt's tables nor the runs' records (`_repo_analytics_runs`)
            "table_type = 'BASE TABLE' AND NOT starts_with(table_name, '_') ORDER BY 1",
            [DATASET],
        ).fetchall()
    ]


def duplicate_keys(db_file: Path) -> dict[str, int]:
    """Table -> rows beyond one per natural key (empty when every key is unique)."""
    extra: dict[str, int] = {}
    if not db_file.exists():
        return extra
    with duckdb.connect(str(db_file)) as con:
        for table in data_tables(con):
            key = ", ".join(CLOUD_KEYS[table])
            rows, keys = con.execute(
                f"SELECT count(*), count(DISTINCT ({key})) FROM {DATASET}.{table}"
            ).fetchone() or (0, 0)
            if rows != keys:
                extra[table] = rows - keys
    return extra


def contents(db_file: Path) -> dict[str, Counter[Row]]:
    """Every data table's rows without dlt's columns, as a multiset."""
    found: dict[str, Counter[Row]] = {}
    with duckdb.connect(str(db_file), read_only=True) as con:
        for table in data_tables(con):
            columns = [
                c
                for (c,) in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = ? "
                    "AND table_name = ? ORDER BY column_name",
                    [DATASET, table],
                ).fetchall()
                if c not in DLT_COLUMNS
            ]
            found[table] = Counter(
                con.execute(f"SELECT {', '.join(columns)} FROM {DATASET}.{table}").fetchall()
            )
    return found


@pytest.fixture
def crash_host(make_sim: MakeSim) -> Iterator[Simulator]:
    """A cloud host for the crash test (tiny unless REPO_ANALYTICS_CRASH_SIZE says otherwise)."""
    yield make_sim(edition="cloud", size=CRASH_SIZE)


def test_killed_loads_rerun_to_the_clean_result(crash_host: Simulator, tmp_path: Path) -> None:
    """SIGKILL during extract, while files load into staging, between merge jobs and after the
    load; then a rerun: exit 0, each natural key once after every kill, a clean run's tables."""
    rng = random.Random(SEED)
    clean = run_cli(crash_host, tmp_path / "clean")
    assert clean.returncode == 0, clean.stderr
    clean_db = tmp_path / "clean" / "data.duckdb"
    assert sorted(contents(clean_db)) == sorted(CLOUD_KEYS)
    assert duplicate_keys(clean_db) == {}
    marks = clean.watch.marks
    assert set(marks) == set(PHASES), marks
    assert clean.watch.package is not None
    jobs = listing(
        tmp_path
        / "clean"
        / "pipelines"
        / "repo_analytics"
        / "load"
        / "loaded"
        / clean.watch.package
        / "completed_jobs"
    )
    merge_jobs = sum(job.endswith(".sql") for job in jobs)
    file_jobs = len(jobs) - merge_jobs
    assert merge_jobs >= 4 and file_jobs >= 4, jobs
    # Kill points: a random moment of the extract, a random number of files loaded into
    # staging, a random number of tables merged, a random moment after the load (views).
    plan: list[tuple[str, Trigger]] = [
        ("extract", after(rng.uniform(0.3, 0.9) * marks["extracted"])),
        ("staging jobs", jobs_done(rng.randint(1, file_jobs - 1), merge=False)),
        ("merge jobs", jobs_done(rng.randint(1, merge_jobs - 2), merge=True)),
        ("after load", after_load(rng.uniform(0.0, 0.8) * (clean.seconds - marks["loaded"]))),
    ]

    path = tmp_path / "crashed"
    log: list[str] = [f"clean: {clean.seconds:.2f} s, phases {marks}"]
    duplicates: dict[str, dict[str, int]] = {}
    pending_after_kill: list[str] = []
    for number, (name, trigger) in enumerate(plan):
        run = run_cli(crash_host, path, trigger)
        merged = sum(job.endswith(".sql") for job in run.jobs_done)
        log.append(
            f"{name}: killed in {run.killed_in} after {run.seconds:.2f} s (rc "
            f"{run.returncode}), jobs done: {len(run.jobs_done) - merged}/{file_jobs} "
            f"files, {merged}/{merge_jobs} merges"
        )
        # Recovering from the previous kill is silent: no warning, no traceback.
        assert "Warning" not in run.stderr and "Traceback" not in run.stderr, run.stderr
        if run.killed_in is None:  # finished before the trigger fired
            assert run.returncode == 0, (log, run.stderr)
            continue
        assert run.returncode == -signal.SIGKILL, (log, run.stderr)
        pending = packages(path / "pipelines")["normalized"]
        if run.watch.package in pending and run.jobs_done:
            pending_after_kill.append(name)
        found = duplicate_keys(snapshot(path / "data.duckdb", tmp_path / f"after-{number}"))
        if found:
            duplicates[name] = found
    # Not vacuous: a kill landed in the load step and left a partly loaded package behind.
    assert pending_after_kill, log

    final = run_cli(crash_host, path)
    log.append(f"final: rc {final.returncode} after {final.seconds:.2f} s")
    assert final.returncode == 0, (log, final.stderr)
    assert final.stdout.startswith("load ok: "), final.stdout
    assert final.stderr == "", final.stderr
    assert packages(path / "pipelines")["normalized"] == set(), "a package is still pending"
    db_file = path / "data.duckdb"
    found = duplicate_keys(db_file)
    if found:
        duplicates["final"] = found
    print("\n".join(log))
    assert duplicates == {}, (duplicates, log)
    crashed, expected = contents(db_file), contents(clean_db)
    assert sorted(crashed) == sorted(expected)
    for table in expected:
        assert crashed[table] == expected[table], (table, log)
    assert query(db_file, "SELECT count(*) FROM commits") == query(
        db_file, "SELECT count(*) FROM cloud_commits"
    )
