"""The canonical views over the self-hosted tables, on each SQL destination they are made on
(DuckDB and Postgres)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.selfhosted.conftest import Loaded
from tests.selfhosted.truth import Truth, Window, at, commit_row, pr_row
from tests.support.helpers import GRAIN, count, select

VIEW_COLUMNS = {
    "commits": "source, edition, project_key, repository_slug, commit_id, author_name, "
    "author_email, author_user, authored_at_utc, authored_at_local, lines_added, lines_deleted, "
    "is_merge, parent_count",
    "pull_requests": "source, edition, project_key, repository_slug, pull_request_id, title, "
    "state, created_at, updated_at, closed_at, author_name, author_user, "
    "target_branch, comment_count, task_count, reviewer_count, resolved_at, "
    "resolved_at_source",
    "pull_request_statistics": "source, edition, level, scope, period, period_start, period_end, "
    "pull_requests, open, merged, declined, superseded",
    "commit_statistics": "source, edition, level, scope, period, period_start, period_end, "
    "commits, lines_added, lines_deleted",
    "daily_author_activity": "source, edition, project_key, repository_slug, author_name, day, "
    "commits, lines_added, lines_deleted",
}


# The canonical views' tests take the loads into the SQL destinations they are made on.
VIEWS_ON = pytest.mark.parametrize(
    "loaded", [("duckdb", GRAIN), ("postgres", GRAIN)], indirect=True, ids=["duckdb", "postgres"]
)


def but(view: str, *left_out: str) -> str:
    """The view's columns, in order, without `left_out`."""
    return ", ".join(c for c in VIEW_COLUMNS[view].split(", ") if c not in left_out)


@VIEWS_ON
def test_views_have_the_readme_columns(loaded: Loaded) -> None:
    for view, columns in VIEW_COLUMNS.items():
        got = [
            name
            for (name,) in loaded.loader.rows(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                f"'{loaded.loader.dataset}' AND table_name = '{view}' ORDER BY ordinal_position"
            )
        ]
        assert got == [c.strip() for c in columns.split(",")], view
        assert loaded.loader.rows(f'SELECT DISTINCT edition FROM "{view}"') == [("server",)]


@VIEWS_ON
def test_views_equal_the_server_tables(loaded: Loaded) -> None:
    """Each canonical view row is its table's row, mapped as the README says; the
    reviewer count is the truth's."""
    loader = loaded.loader
    view = sorted(loader.rows(f"SELECT {but('commits', 'edition')} FROM commits"))
    expected: list[tuple[Any, ...]] = sorted(
        (src, p, s, i, name, email, user, when, None, added, deleted, merge, parents)
        for src, p, s, i, name, email, user, when, added, deleted, merge, parents in select(
            loader,
            "server_commits",
            (
                "source",
                "project_key",
                "repository_slug",
                "id",
                "author_display_name",
                "author_email",
                "user_name",
                "author_timestamp",
                "lines_added",
                "lines_deleted",
                "is_merge",
                "parent_count",
            ),
        )
    )
    assert view == expected and len(view) == count(loader, "server_commits")

    reviewers = {pr_row(p)[:3]: len(p["reviewers"]) for p in loaded.truth.prs}
    # resolved_at and its source are compared with the truth in test_views.py
    view = sorted(
        loader.rows(
            f"SELECT {but('pull_requests', 'edition', 'resolved_at', 'resolved_at_source')} "
            "FROM pull_requests"
        )
    )
    expected = sorted(
        (
            src,
            p,
            s,
            i,
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
            reviewers[(p, s, i)],
        )
        for src, p, s, i, title, state, created, updated, name, user, branch in select(
            loader,
            "server_pull_requests",
            (
                "source",
                "project_key",
                "repository_slug",
                "id",
                "title",
                "state",
                "created_at",
                "updated_at",
                "author_display_name",
                "author_user_name",
                "to_branch",
            ),
        )
    )
    assert view == expected and any(row[-1] > 1 for row in view)

    view = sorted(
        loader.rows(
            f"SELECT {but('pull_request_statistics', 'edition')} FROM pull_request_statistics"
        )
    )
    expected = sorted(
        (*r, None)
        for r in select(
            loader,
            "server_pull_request_statistics",
            (
                "source",
                "level",
                "scope",
                "period",
                "period_start",
                "period_end",
                "pull_requests",
                "open",
                "merged",
                "declined",
            ),
        )
    )
    assert view == expected and view

    view = sorted(
        loader.rows(f"SELECT {but('commit_statistics', 'edition')} FROM commit_statistics")
    )
    expected = sorted(
        select(
            loader,
            "server_commit_statistics",
            (
                "source",
                "level",
                "scope",
                "period",
                "period_start",
                "period_end",
                "commits",
                "lines_added",
                "lines_deleted",
            ),
        )
    )
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


@VIEWS_ON
@pytest.mark.parametrize("session_zone", ["UTC", "Pacific/Kiritimati"])
def test_daily_author_activity_equals_truth(loaded: Loaded, session_zone: str) -> None:
    """Per repository, author and day of the UTC instant, whatever time zone the reading
    session (a BI tool) has set."""
    got = loaded.loader.rows(
        f"SET TimeZone = '{session_zone}'; SELECT project_key, repository_slug, author_name, "
        "day, commits, lines_added, lines_deleted FROM daily_author_activity ORDER BY ALL"
    )
    assert got == expected_daily_activity(loaded.truth, loaded.window)
