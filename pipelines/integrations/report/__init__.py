"""`repo-analytics report`: an engineering-metrics dashboard of the canonical views as one
self-contained HTML file (docs/report.md shows it).

The page reads only the warehouse: the canonical views and the runs' records
(`_repo_analytics_runs`), so a DuckDB file or a Postgres dataset is all it needs. Its
sections: the sources (tables, rows, newest data, last run and its reconciliation), pull
requests (merged and declined per week, time to resolve, open ones by age, reviewers) and
commits (per week with lines, the most active repositories and authors, activity by weekday
and hour).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipelines.integrations.report import charts, queries
from pipelines.integrations.report.page import Page, Panel, render
from pipelines.integrations.report.queries import ACTIVITY_BASIS, Filters, SourceStatus, Table
from pipelines.integrations.report.reader import Reader

TITLE = "repo-analytics: engineering metrics"


def write_report(reader: Reader, filters: Filters, out: Path) -> Path:
    """The dashboard of `reader`'s dataset written to `out` whole or not at all (a file of
    its own renamed over the last one); its path."""
    text = render(build_page(reader, filters))
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    try:
        partial.write_text(text, encoding="utf-8")
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
    return out


def build_page(reader: Reader, filters: Filters) -> Page:
    found = queries.sources(reader, filters)
    page = Page(
        TITLE,
        [
            f"dataset {reader.dataset} on {reader.destination}; showing {filters.describe()}",
            f"made {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; pull-request days and weeks are "
            "UTC, weeks start on Monday",
        ],
        notes=source_notes(found),
    )
    page.groups.append(("Sources", [sources_panel(found)]))
    page.groups.append(("Pull requests", pull_request_panels(reader, filters)))
    page.groups.append(("Commits", commit_panels(reader, filters)))
    return page


def narrowed(filters: Filters) -> str:
    return "" if filters.describe() == "everything loaded" else f" ({filters.describe()})"


def source_notes(found: list[SourceStatus]) -> list[str]:
    """What the reader must know before the charts: no data, runs without an end, failed
    reconciliations."""
    if not found:
        return ["No source has rows in this dataset for these filters: every chart is empty."]
    notes = []
    for status in found:
        if status.unfinished is not None:
            command, started = status.unfinished
            notes.append(
                f"{status.source}: the {command} started {started:%Y-%m-%d %H:%M} UTC has no "
                "end recorded (stopped, failed or still running): the charts show what "
                "landed so far."
            )
        if status.last_run is not None and status.last_run[5] == "FAILED":
            notes.append(
                f"{status.source}: the last run's reconciliation FAILED: what landed differs "
                "from the API's statistics (see the run report)."
            )
    return notes


def sources_panel(found: list[SourceStatus]) -> Panel:
    rows = []
    for s in found:
        run = s.last_run
        rows.append(
            (
                s.source,
                s.edition,
                s.tables,
                s.rows,
                s.newest_commit,
                s.newest_pull_request,
                f"{run[0]} {run[2]:%Y-%m-%d %H:%M} UTC" if run and run[2] else "none recorded",
                run[3] if run else ("running" if s.unfinished else None),
                run[5] if run else None,
            )
        )
    table = Table(
        (
            "source",
            "edition",
            "tables",
            "rows",
            "newest commit",
            "newest pull-request update",
            "last run (finished)",
            "status",
            "reconciliation",
        ),
        rows,
    )
    return Panel(
        "sources",
        "Sources",
        "Each host or workspace loaded into the dataset: its tables and rows, its newest data "
        "(cloud commit times are the authors' local times), and its last recorded run with "
        "the reconciliation of what landed against the API's own statistics.",
        table,
        note=None if rows else "No source has rows in this dataset.",
        wide=True,
    )


def pull_request_panels(reader: Reader, filters: Filters) -> list[Panel]:
    scope = narrowed(filters)
    outcomes = queries.outcomes_weekly(reader, filters)
    resolution = queries.resolution_weekly(reader, filters)
    ages, as_of = queries.open_by_age(reader, filters)
    reviewers = queries.reviewers(reader, filters)
    stand_ins = sum(resolution.column("resolved at their last update"))
    resolved = sum(resolution.column("resolved"))
    return [
        chart_panel(
            "outcomes",
            "Pull requests merged and declined per week",
            "By the UTC week of their resolution.",
            outcomes,
            charts.outcomes,
            f"No resolved pull requests{scope}.",
        ),
        chart_panel(
            "resolution",
            "Time to resolve per week (hours)",
            "Median and 90th percentile from creation to resolution."
            + (
                f" {stand_ins:,} of {resolved:,} resolution times are the last update, a "
                "stand-in where no closing time was loaded"
                + (" (grey bars)." if stand_ins else ".")
                if resolved
                else ""
            ),
            resolution,
            charts.resolution,
            f"No resolved pull requests{scope}.",
        ),
        chart_panel(
            "open-age",
            "Open pull requests by age",
            (
                f"Age on {as_of:%Y-%m-%d %H:%M} UTC, the newest pull-request update loaded "
                "(all open ones, whatever --since)."
                if as_of is not None
                else "Age on the newest pull-request update loaded."
            ),
            ages,
            lambda table: charts.bars(table, "age", "open pull requests", "open pull requests"),
            f"No open pull requests{scope}." if as_of else f"No pull requests loaded{scope}.",
        ),
        chart_panel(
            "reviewers",
            "Reviewers per pull request (self-hosted)",
            "Self-hosted pull requests by their number of reviewers (by creation day).",
            reviewers,
            lambda table: charts.bars(table, "reviewers", "pull requests", "pull requests"),
            "Reviewers are a self-hosted measure: no pull requests with reviewers" + scope + ".",
        ),
    ]


def commit_panels(reader: Reader, filters: Filters) -> list[Panel]:
    scope = narrowed(filters)
    weekly = queries.commits_weekly(reader, filters)
    panels = [
        chart_panel(
            "commits",
            "Commits and lines added and deleted per week",
            "By the week of the commit's day: UTC for self-hosted, the author's local day for "
            "cloud. Lines deleted are drawn downwards; a commit without lines counts none.",
            weekly,
            charts.commits,
            f"No commits{scope}.",
            wide=True,
        ),
        chart_panel(
            "repositories",
            f"The {queries.TOP} most active repositories",
            "By commits; self-hosted repositories as KEY/slug.",
            queries.top_repositories(reader, filters),
            lambda t: charts.bars(t, "repository", "commits", "commits", horizontal=True),
            f"No commits{scope}.",
        ),
        chart_panel(
            "authors",
            f"The {queries.TOP} most active authors",
            "By commits, by the author's display name.",
            queries.top_authors(reader, filters),
            lambda t: charts.bars(t, "author", "commits", "commits", horizontal=True),
            f"No commits{scope}.",
        ),
    ]
    activity = queries.activity(reader, filters)
    for basis, table in activity.items():
        panels.append(
            chart_panel(
                f"activity-{basis}",
                f"Commit activity by weekday and hour ({ACTIVITY_BASIS[basis]})",
                "Commits per hour of the week"
                + (
                    ": the commit times without a zone, on the author's clock."
                    if basis == "local"
                    else "."
                ),
                table,
                charts.heatmap,
                "",
            )
        )
    if not activity:
        panels.append(
            chart_panel(
                "activity",
                "Commit activity by weekday and hour",
                "Commits per hour of the week.",
                Table(("weekday",), []),
                charts.heatmap,
                f"No commits{scope}.",
            )
        )
    return panels


def chart_panel(
    key: str,
    title: str,
    caption: str,
    table: Table,
    draw: Any,
    empty: str,
    wide: bool = False,
) -> Panel:
    """The chart `draw` makes of `table`, or the note `empty` when it has no rows."""
    if not table.rows:
        return Panel(key, title, caption, table, note=empty, wide=wide)
    return Panel(key, title, caption, table, figure=draw(table), wide=wide)
