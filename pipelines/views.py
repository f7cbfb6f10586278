"""The canonical layer: views with the same columns whichever edition was loaded.

Each view is a UNION ALL of one SELECT per edition, over the tables that exist; an edition
that was not loaded simply contributes nothing. A SELECT may also read an optional table
(`{optional:name}`): the table when it was loaded with the columns the SELECT needs, else an
empty stand-in with those columns. The README lists each column's source.
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
                     "target_branch, comment_count, task_count, reviewer_count, resolved_at, "
                     "resolved_at_source",
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
                   NULL::BIGINT AS reviewer_count,
                   CASE WHEN state <> 'OPEN' THEN coalesce(closed_at, updated_at) END
                       AS resolved_at,
                   CASE WHEN state = 'OPEN' THEN NULL
                        WHEN closed_at IS NOT NULL THEN 'closed_at' ELSE 'updated_at' END
                       AS resolved_at_source
            FROM {d}.cloud_pull_requests"""),
        # No closed date in the JSON, and updatedDate moves on after closing: the CSV
        # export's `Time to resolve (s)` (latest export row of the pull request) when loaded.
        ("server_pull_requests", """
            SELECT 'server', p.project_key, p.repository_slug, p.id, p.title, p.state,
                   p.created_at, p.updated_at, NULL::TIMESTAMPTZ, p.author_display_name,
                   p.author_user_name, p.to_branch, NULL::BIGINT, NULL::BIGINT,
                   (SELECT count(*) FROM {d}.server_pull_request_reviewers r
                    WHERE r.project_key = p.project_key AND r.repository_slug = p.repository_slug
                      AND r.id = p.id),
                   CASE WHEN p.state <> 'OPEN' THEN coalesce(p.csv_resolved_at, p.updated_at) END,
                   CASE WHEN p.state = 'OPEN' THEN NULL
                        WHEN p.csv_resolved_at IS NOT NULL THEN 'csv_time_to_resolve'
                        ELSE 'updated_at' END
            FROM (SELECT j.*, j.created_at + to_seconds(x.seconds) AS csv_resolved_at
                  FROM {d}.server_pull_requests j
                  LEFT JOIN (SELECT project, repository, pull_request_id,
                                    max_by(time_to_resolve_s, last_updated_date) AS seconds
                             FROM {optional:server_pull_request_exports} GROUP BY ALL) x
                    ON x.project = j.project_name AND x.repository = j.repository_name
                   AND x.pull_request_id = j.id) p"""),
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
# optional table -> the columns the SELECTs above read from it, with their types
OPTIONAL: Final[dict[str, dict[str, str]]] = {
    # the CSV export's header is not published: used only when it had these columns
    "server_pull_request_exports": {
        "project": "VARCHAR", "repository": "VARCHAR", "pull_request_id": "BIGINT",
        "last_updated_date": "TIMESTAMPTZ", "time_to_resolve_s": "BIGINT"},
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
               resolved_at, date_diff('minute', created_at, resolved_at) / 60.0
                   AS hours_to_resolve,
               resolved_at_source
        FROM {d}.pull_requests WHERE state <> 'OPEN'""",
    "pull_request_outcomes_weekly": """
        SELECT edition, project_key, repository_slug,
               -- the UTC week (Monday 00:00 UTC) whatever the session's TimeZone
               timezone('UTC', date_trunc('week', timezone('UTC', resolved_at))) AS week,
               count(*) FILTER (WHERE state = 'MERGED') AS merged,
               count(*) FILTER (WHERE state = 'DECLINED') AS declined,
               count(*) FILTER (WHERE state = 'SUPERSEDED') AS superseded,
               -- resolved at their last update (no closing time loaded): maybe a later week
               count(*) FILTER (WHERE resolved_at_source = 'updated_at')
                   AS resolutions_from_updated_at
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
        columns: dict[str, set[str]] = {}
        for table, column in client.execute_sql(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = %s", pipeline.dataset_name):
            columns.setdefault(table, set()).add(column)
        optional = {f"{{optional:{table}}}": optional_relation(dataset, table, needed,
                                                              columns.get(table, set()))
                    for table, needed in OPTIONAL.items()}
        for view, parts in VIEWS.items():
            selects = [sql for table, sql in parts if table in existing]
            if not selects:
                continue
            union = " UNION ALL ".join(selects).replace("{d}", dataset)
            for placeholder, relation in optional.items():
                union = union.replace(placeholder, relation)
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


def optional_relation(dataset: str, table: str, needed: dict[str, str],
                      present: set[str]) -> str:
    """The table when it has the needed columns; else no rows with those columns and types."""
    if set(needed) <= present:
        return f"{dataset}.{table}"
    stand_in = ", ".join(f"NULL::{kind} AS {name}" for name, kind in needed.items())
    return f"(SELECT {stand_in} WHERE false)"
