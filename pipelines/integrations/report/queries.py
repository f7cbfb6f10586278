"""The report's numbers: one query over the canonical views per chart, in DuckDB SQL (run
on other destinations transpiled, `pipelines/destinations/views_sql.py`), with the user's filters.

Days and weeks are UTC (self-hosted commits, every pull-request time) or the cloud author's
local calendar (cloud commits: the API gives no zone), as the views define them; weeks
start on Monday. Each query's result is the table printed beside its chart.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Final

from pipelines.integrations.report.reader import Reader, Row
from pipelines.runs.records import RUNS_TABLE

# (label, lowest age in days) of the open pull requests' age buckets, youngest first
AGE_BUCKETS: Final = (
    ("under 1 day", 0),
    ("1-7 days", 1),
    ("7-30 days", 7),
    ("30-90 days", 30),
    ("90 days or more", 90),
)
MOST_REVIEWERS: Final = 5  # reviewer counts from here on are one bar ("5 or more")
TOP: Final = 10  # repositories and authors shown
WEEKDAYS: Final = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
# the clock of a commit's time in the `commits` view: UTC (an instant: self-hosted), else
# the author's local wall time (cloud: the API gives no zone); the instants' first
ACTIVITY_BASIS: Final = {
    "utc": "UTC",
    "local": "the author's local time",
}


@dataclass(frozen=True)
class Filters:
    """What the user narrowed the report to (None: everything)."""

    since: date | None = None
    source: str | None = None
    repository: str | None = None  # a slug, or KEY/slug (self-hosted)

    def where(self, time: str | None = None, repository: bool = True) -> str:
        """The SQL condition over a view with `source` (and, with `repository`, project_key
        and repository_slug); `time` an expression of the row's UTC (or local) day."""
        parts = ["TRUE"]
        if self.source is not None:
            parts.append(f"source = {literal(self.source)}")
        if repository and self.repository is not None:
            key, _, slug = self.repository.rpartition("/")
            parts.append(f"repository_slug = {literal(slug)}")
            if key:
                parts.append(f"project_key = {literal(key)}")
        if time is not None and self.since is not None:
            parts.append(f"{time} >= DATE '{self.since.isoformat()}'")
        return " AND ".join(parts)

    def describe(self) -> str:
        shown = [
            f"{name} {value}"
            for name, value in (
                ("since", self.since),
                ("source", self.source),
                ("repository", self.repository),
            )
            if value is not None
        ]
        return ", ".join(shown) if shown else "everything loaded"


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class Table:
    """A chart's numbers: column headings and rows of values."""

    columns: tuple[str, ...]
    rows: list[Row]

    def column(self, name: str) -> list[Any]:
        index = self.columns.index(name)
        return [row[index] for row in self.rows]


def rows_of(reader: Reader, view: str, sql: str) -> list[Row]:
    """`sql`'s rows; none when the dataset lacks `view` (no data of its kind loaded)."""
    return reader.rows(sql) if view in reader.relations() else []


def outcomes_weekly(reader: Reader, filters: Filters) -> Table:
    """Pull requests merged, declined and superseded per UTC week of their resolution."""
    week = "CAST(timezone('UTC', week) AS DATE)"
    return Table(
        ("week", "merged", "declined", "superseded", "resolved at their last update"),
        rows_of(
            reader,
            "pull_request_outcomes_weekly",
            f"""
            SELECT {week} AS week, CAST(sum(merged) AS BIGINT), CAST(sum(declined) AS BIGINT),
                   CAST(sum(coalesce(superseded, 0)) AS BIGINT),
                   CAST(sum(resolutions_from_updated_at) AS BIGINT)
            FROM {{d}}.pull_request_outcomes_weekly WHERE {filters.where(week)}
            GROUP BY 1 ORDER BY 1""",
        ),
    )


def resolution_weekly(reader: Reader, filters: Filters) -> Table:
    """Hours from creation to resolution per UTC week of resolution: median and 90th
    percentile, and how many resolution times are only the last update (a stand-in)."""
    week = "CAST(date_trunc('week', timezone('UTC', resolved_at)) AS DATE)"
    return Table(
        ("week", "resolved", "median hours", "p90 hours", "resolved at their last update"),
        rows_of(
            reader,
            "pull_request_cycle_times",
            f"""
            SELECT {week} AS week, count(*), quantile_cont(hours_to_resolve, 0.5),
                   quantile_cont(hours_to_resolve, 0.9),
                   count(*) FILTER (WHERE resolved_at_source = 'updated_at')
            FROM {{d}}.pull_request_cycle_times WHERE {filters.where(week)}
            GROUP BY 1 ORDER BY 1""",
        ),
    )


def open_by_age(reader: Reader, filters: Filters) -> tuple[Table, datetime | None]:
    """Open pull requests by age, on the newest pull-request update loaded (the data's own
    clock: a report of an old dataset does not age its pull requests); and that moment."""
    where = filters.where()
    if "pull_requests" not in reader.relations():
        return Table(("age", "open pull requests"), []), None
    ((as_of,),) = reader.rows(
        f"SELECT max(greatest(created_at, updated_at)) FROM {{d}}.pull_requests WHERE {where}"
    )
    if as_of is None:
        return Table(("age", "open pull requests"), []), None
    stamp = as_of.isoformat()
    buckets = " ".join(
        f"WHEN age >= {low} THEN {index}"
        for index, (_, low) in reversed(list(enumerate(AGE_BUCKETS)))
    )
    counted: dict[int, int] = dict(
        reader.rows(
            f"""
            SELECT CASE {buckets} ELSE 0 END AS bucket, count(*)
            FROM (SELECT CAST(extract(epoch FROM TIMESTAMPTZ '{stamp}' - created_at) AS DOUBLE)
                             / 86400 AS age
                  FROM {{d}}.pull_requests WHERE state = 'OPEN' AND {where}) o
            GROUP BY 1"""
        )
    )
    rows = [(label, int(counted.get(index, 0))) for index, (label, _) in enumerate(AGE_BUCKETS)]
    return Table(("age", "open pull requests"), rows if counted else []), as_of


def reviewers(reader: Reader, filters: Filters) -> Table:
    """Pull requests with a reviewer count (self-hosted: the cloud API gives none), created
    since `since`, by their number of reviewers."""
    day = "CAST(timezone('UTC', created_at) AS DATE)"
    counted: dict[int, int] = dict(
        rows_of(
            reader,
            "pull_requests",
            f"""
            SELECT least(reviewer_count, {MOST_REVIEWERS}), count(*)
            FROM {{d}}.pull_requests
            WHERE reviewer_count IS NOT NULL AND {filters.where(day)}
            GROUP BY 1""",
        )
    )
    rows = [
        (f"{n} or more" if n == MOST_REVIEWERS else str(n), int(counted.get(n, 0)))
        for n in range(MOST_REVIEWERS + 1)
    ]
    return Table(("reviewers", "pull requests"), rows if counted else [])


def commits_weekly(reader: Reader, filters: Filters) -> Table:
    """Commits and lines per week of their day (UTC, or the cloud author's local day)."""
    week = "CAST(date_trunc('week', day) AS DATE)"
    return Table(
        ("week", "commits", "lines added", "lines deleted"),
        rows_of(
            reader,
            "daily_author_activity",
            f"""
            SELECT {week} AS week, CAST(sum(commits) AS BIGINT),
                   CAST(sum(lines_added) AS BIGINT), CAST(sum(lines_deleted) AS BIGINT)
            FROM {{d}}.daily_author_activity WHERE {filters.where("day")}
            GROUP BY 1 ORDER BY 1""",
        ),
    )


def top_repositories(reader: Reader, filters: Filters) -> Table:
    """The repositories with the most commits (`KEY/slug` for self-hosted)."""
    name = "coalesce(project_key || '/', '') || repository_slug"
    return Table(
        ("repository", "commits", "lines added", "lines deleted", "authors"),
        rows_of(
            reader,
            "daily_author_activity",
            f"""
            SELECT {name} AS repository, CAST(sum(commits) AS BIGINT),
                   CAST(sum(lines_added) AS BIGINT), CAST(sum(lines_deleted) AS BIGINT),
                   count(DISTINCT author_name)
            FROM {{d}}.daily_author_activity WHERE {filters.where("day")}
            GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT {TOP}""",
        ),
    )


def top_authors(reader: Reader, filters: Filters) -> Table:
    """The authors (by display name) with the most commits."""
    return Table(
        ("author", "commits", "lines added", "lines deleted", "repositories"),
        rows_of(
            reader,
            "daily_author_activity",
            f"""
            SELECT coalesce(author_name, '(no name)') AS author, CAST(sum(commits) AS BIGINT),
                   CAST(sum(lines_added) AS BIGINT), CAST(sum(lines_deleted) AS BIGINT),
                   count(DISTINCT coalesce(project_key || '/', '') || repository_slug)
            FROM {{d}}.daily_author_activity WHERE {filters.where("day")}
            GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT {TOP}""",
        ),
    )


def activity(reader: Reader, filters: Filters) -> dict[str, Table]:
    """Per clock (`ACTIVITY_BASIS`): commits by weekday (rows, Monday first) and hour (columns
    0-23): UTC where the commit time is an instant, else the author's local time."""
    counts: dict[str, dict[tuple[int, int], int]] = {}
    for basis, weekday, hour, commits in rows_of(
        reader,
        "commits",
        f"""
        SELECT basis, CAST(extract(isodow FROM t) AS BIGINT),
               CAST(extract(hour FROM t) AS BIGINT), count(*)
        FROM (SELECT CASE WHEN authored_at_utc IS NULL THEN 'local' ELSE 'utc' END AS basis,
                     coalesce(timezone('UTC', authored_at_utc), authored_at_local) AS t
              FROM {{d}}.commits WHERE {filters.where()}) c
        WHERE t IS NOT NULL AND {filters.where("CAST(t AS DATE)", repository=False)}
        GROUP BY 1, 2, 3""",
    ):
        counts.setdefault(basis, {})[(int(weekday), int(hour))] = int(commits)
    columns = ("weekday", *(f"{hour:02d}" for hour in range(24)))
    return {
        basis: Table(
            columns,
            [
                (WEEKDAYS[day - 1], *(found.get((day, hour), 0) for hour in range(24)))
                for day in range(1, 8)
            ],
        )
        for basis, found in sorted(counts.items(), key=lambda item: item[0] != "utc")
    }


@dataclass(frozen=True)
class SourceStatus:
    """One source of the dataset: what it holds and its last recorded run."""

    source: str
    edition: str
    tables: int
    rows: int
    newest_commit: Any
    newest_pull_request: Any
    last_run: Row | None  # (command, started, finished, status, rows read, verdict, summary)
    unfinished: Row | None  # a later run with no end: (command, started)


def sources(reader: Reader, filters: Filters) -> list[SourceStatus]:
    """Every source of the dataset (or the one of `--source`)."""
    relations = reader.relations()
    editions: dict[str, str] = {}
    for view in ("commits", "pull_requests", "pull_request_statistics", "commit_statistics"):
        if view in relations:
            editions.update(
                reader.rows(
                    f"SELECT DISTINCT source, edition FROM {{d}}.{view} "
                    f"WHERE {filters.where(repository=False)}"
                )
            )
    tables: dict[str, list[int]] = {}
    for (table,) in reader.rows(
        "SELECT DISTINCT c.table_name FROM information_schema.columns c "
        "JOIN information_schema.tables t ON t.table_schema = c.table_schema "
        "AND t.table_name = c.table_name "
        f"WHERE c.table_schema = {literal(reader.dataset)} AND c.column_name = 'source' "
        "AND t.table_type = 'BASE TABLE' ORDER BY 1"
    ):
        if table.startswith("_"):
            continue
        for source, count in reader.rows(
            f"SELECT source, count(*) FROM {{d}}.{table} "
            f"WHERE {filters.where(repository=False)} GROUP BY 1"
        ):
            held = tables.setdefault(source, [0, 0])
            held[0] += 1
            held[1] += int(count)
    newest_commit = newest(reader, relations, filters, "commits", "authored_at_utc")
    newest_local = newest(reader, relations, filters, "commits", "authored_at_local")
    newest_pr = newest(reader, relations, filters, "pull_requests", "updated_at")
    runs = recorded_runs(reader, relations, filters)
    found = []
    for source in sorted(set(editions) | set(tables)):
        finished = [run for run in runs.get(source, []) if run[3] != "running"]
        last = finished[-1] if finished else None
        later = [
            r for r in runs.get(source, []) if r[3] == "running" and (not last or r[1] > last[1])
        ]
        table_count, row_count = tables.get(source, [0, 0])
        found.append(
            SourceStatus(
                source,
                editions.get(source, "?"),
                table_count,
                row_count,
                newest_commit.get(source) or newest_local.get(source),
                newest_pr.get(source),
                last,
                (later[-1][0], later[-1][1]) if later else None,
            )
        )
    return found


def newest(
    reader: Reader, relations: set[str], filters: Filters, view: str, column: str
) -> dict[str, Any]:
    if view not in relations:
        return {}
    return dict(
        reader.rows(
            f"SELECT source, max({column}) FROM {{d}}.{view} "
            f"WHERE {filters.where(repository=False)} GROUP BY 1"
        )
    )


def recorded_runs(reader: Reader, relations: set[str], filters: Filters) -> dict[str, list[Row]]:
    """Each source's recorded runs, oldest first: (command, started, finished, status, rows
    read, reconciliation, its summary line)."""
    if RUNS_TABLE not in relations:
        return {}
    runs: dict[str, list[Row]] = {}
    for source, *run in reader.rows(
        "SELECT source, command, started_at, finished_at, status, rows_read, reconciliation, "
        f"reconciliation_summary FROM {{d}}.{RUNS_TABLE} "
        f"WHERE source IS NOT NULL AND {filters.where(repository=False)} ORDER BY started_at"
    ):
        runs.setdefault(source, []).append(tuple(run))
    return runs


def known_values(reader: Reader, column: str) -> list[str]:
    """The values of `source` or of the repository (`KEY/slug` or slug) in the views."""
    relations = reader.relations()
    expressions = (
        ("source",)
        if column == "source"
        else ("coalesce(project_key || '/', '') || repository_slug", "repository_slug")
    )
    found: set[str] = set()
    for view in ("commits", "pull_requests"):
        for expression in expressions if view in relations else ():
            sql = f"SELECT DISTINCT {expression} FROM {{d}}.{view}"
            found.update(value for (value,) in reader.rows(sql) if value)
    return sorted(found)
