"""The canonical layer: views with the same columns whichever edition was loaded.

Each view is a UNION ALL of one SELECT per edition, over the tables that exist; an edition
that was not loaded simply contributes nothing. The README lists each column's source.
"""

from __future__ import annotations

from typing import Any, Final

# view -> its columns, in the order every SELECT below produces them
COLUMNS: Final[dict[str, str]] = {
    "commits": "edition, project_key, repository_slug, commit_id, author_name, author_email, "
               "author_user, authored_at_utc, authored_at_local, lines_added, lines_deleted, "
               "is_merge, parent_count",
    "pull_requests": "edition, project_key, repository_slug, pull_request_id, title, state, "
                     "created_at, updated_at, closed_at, author_name, author_user, "
                     "target_branch, comment_count, task_count, reviewer_count",
    "pull_request_statistics": "edition, level, scope, period, period_start, period_end, "
                               "pull_requests, open, merged, declined, superseded",
    "commit_statistics": "edition, level, scope, period, period_start, period_end, commits, "
                         "lines_added, lines_deleted",
}
# view -> [(table that must exist, SELECT producing the canonical columns)]
VIEWS: Final[dict[str, list[tuple[str, str]]]] = {
    "commits": [
        ("cloud_commits", """
            SELECT 'cloud' AS edition, NULL::VARCHAR AS project_key, repository_slug,
                   hash AS commit_id, author_display_name AS author_name,
                   NULL::VARCHAR AS author_email, author_uuid AS author_user,
                   NULL::TIMESTAMPTZ AS authored_at_utc, date_local AS authored_at_local,
                   lines_added, lines_deleted, is_merge, parent_count
            FROM {d}.cloud_commits"""),
        ("server_commits", """
            SELECT 'server', project_key, repository_slug, id, author_display_name,
                   author_email, user_name, author_timestamp, NULL::TIMESTAMP,
                   lines_added, lines_deleted, is_merge, parent_count
            FROM {d}.server_commits"""),
    ],
    "pull_requests": [
        ("cloud_pull_requests", """
            SELECT 'cloud' AS edition, NULL::VARCHAR AS project_key, repository_slug,
                   id AS pull_request_id, title, state, created_at, updated_at, closed_at,
                   author_display_name AS author_name, author_uuid AS author_user,
                   destination_branch AS target_branch, comment_count, task_count,
                   NULL::BIGINT AS reviewer_count
            FROM {d}.cloud_pull_requests"""),
        ("server_pull_requests", """
            SELECT 'server', p.project_key, p.repository_slug, p.id, p.title, p.state,
                   p.created_at, p.updated_at, NULL::TIMESTAMPTZ, p.author_display_name,
                   p.author_user_name, p.to_branch, NULL::BIGINT, NULL::BIGINT,
                   (SELECT count(*) FROM {d}.server_pull_request_reviewers r
                    WHERE r.project_key = p.project_key AND r.repository_slug = p.repository_slug
                      AND r.id = p.id)
            FROM {d}.server_pull_requests p"""),
    ],
    "pull_request_statistics": [
        ("cloud_pull_request_statistics", """
            SELECT 'cloud' AS edition, level, scope, period, period_start, period_end,
                   pull_requests, open, merged, declined, superseded
            FROM {d}.cloud_pull_request_statistics"""),
        ("server_pull_request_statistics", """
            SELECT 'server', level, scope, period, period_start, period_end,
                   pull_requests, open, merged, declined, NULL::BIGINT
            FROM {d}.server_pull_request_statistics"""),
    ],
    "commit_statistics": [
        ("cloud_commit_change_statistics", """
            SELECT 'cloud' AS edition, 'repository' AS level, repository_slug AS scope, period,
                   period_start, period_end, commits, lines_added_total AS lines_added,
                   lines_deleted_total AS lines_deleted
            FROM {d}.cloud_commit_change_statistics"""),
        ("server_commit_statistics", """
            SELECT 'server', level, scope, period, period_start, period_end, commits,
                   lines_added, lines_deleted
            FROM {d}.server_commit_statistics"""),
    ],
}
# BI views over the canonical ones (issue 5 adds more).
DERIVED: Final[dict[str, str]] = {
    "daily_author_activity": """
        SELECT edition, project_key, repository_slug, author_name,
               -- the UTC day whatever the reading session's TimeZone (a TIMESTAMPTZ casts to
               -- the session's local date); cloud rows: the author's local wall time's day
               CAST(coalesce(timezone('UTC', authored_at_utc), authored_at_local) AS DATE)
                   AS day,
               count(*) AS commits, sum(lines_added) AS lines_added,
               sum(lines_deleted) AS lines_deleted
        FROM {d}.commits GROUP BY ALL""",
    "pull_request_cycle_times": """
        SELECT edition, project_key, repository_slug, pull_request_id, state, created_at,
               coalesce(closed_at, updated_at) AS resolved_at,
               date_diff('minute', created_at, coalesce(closed_at, updated_at)) / 60.0
                   AS hours_to_resolve
        FROM {d}.pull_requests WHERE state <> 'OPEN'""",
    "pull_request_outcomes_weekly": """
        SELECT edition, project_key, repository_slug,
               -- the UTC week (Monday 00:00 UTC) whatever the session's TimeZone
               timezone('UTC', date_trunc('week', timezone('UTC', coalesce(closed_at,
                                                                        updated_at)))) AS week,
               count(*) FILTER (WHERE state = 'MERGED') AS merged,
               count(*) FILTER (WHERE state = 'DECLINED') AS declined,
               count(*) FILTER (WHERE state = 'SUPERSEDED') AS superseded
        FROM {d}.pull_requests WHERE state <> 'OPEN' GROUP BY ALL""",
}
# which canonical view each derived view reads
DERIVED_FROM: Final[dict[str, str]] = {
    "daily_author_activity": "commits",
    "pull_request_cycle_times": "pull_requests",
    "pull_request_outcomes_weekly": "pull_requests",
}


def create_views(pipeline: Any) -> list[str]:
    """Create or replace every canonical view whose tables exist; the names created.

    Table names are qualified with the dataset (`{d}` in the SQL above).
    """
    created: list[str] = []
    with pipeline.sql_client() as client:
        dataset = client.fully_qualified_dataset_name()
        existing = {row[0] for row in client.execute_sql(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            pipeline.dataset_name)}
        for view, parts in VIEWS.items():
            selects = [sql for table, sql in parts if table in existing]
            if not selects:
                continue
            union = " UNION ALL ".join(selects).replace("{d}", dataset)
            client.execute_sql(
                f"CREATE OR REPLACE VIEW {dataset}.{view} ({COLUMNS[view]}) AS {union}")
            existing.add(view)
            created.append(view)
        for view, sql in DERIVED.items():
            if DERIVED_FROM[view] in existing:
                client.execute_sql(f"CREATE OR REPLACE VIEW {dataset}.{view} AS "
                                   + sql.replace("{d}", dataset))
                created.append(view)
    return created
