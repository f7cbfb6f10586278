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
    "commits_by_level": "edition, level, scope, project_key, repository_slug, commit_id, "
                        "day, day_basis, is_merge, lines_added, lines_deleted",
    "pull_requests_by_level": "edition, level, scope, project_key, repository_slug, "
                              "pull_request_id, state, created_at, resolved_at, "
                              "resolved_at_source",
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


# The list tables of every level, in one shape: the statistics endpoints' series are
# aggregates of these lists (issue 11). Scope keys are the statistics tables' own (`slug` or
# `KEY/slug`, user uuid or slug, project key); the top level's is NULL (one per host).
# (level, scope expression over the level's list table `c`)
CLOUD_LEVELS: Final = (("workspace", "NULL::VARCHAR"), ("repository", "c.repository_slug"),
                       ("user", "c.read_for_user_uuid"))
SERVER_LEVELS: Final = (("global", "NULL::VARCHAR"), ("project", "c.project_key"),
                        ("repository", "c.project_key || '/' || c.repository_slug"),
                        ("user", "c.read_for_user"))
CLOUD_COMMIT_TABLES: Final = {"workspace": "cloud_workspace_commits",
                              "repository": "cloud_commits", "user": "cloud_user_commits"}
CLOUD_PR_TABLES: Final = {"workspace": "cloud_workspace_pull_requests",
                          "repository": "cloud_pull_requests",
                          "user": "cloud_user_pull_requests"}
SERVER_SUFFIX: Final = {"global": "_global", "project": "_project", "repository": "",
                        "user": "_user"}


def cloud_commits_at(level: str, scope: str) -> tuple[str, str]:
    """Cloud commits of one level. Only the repository-level list carries lines: the other
    levels take them from it (NULL where it was not read, or indexing is off). The day is the
    author's local calendar day: the API drops the zone."""
    table = CLOUD_COMMIT_TABLES[level]
    lines = "c" if level == "repository" else "l"
    join = ("" if level == "repository" else
            " LEFT JOIN {optional:cloud_commits} l"
            " ON l.repository_slug = c.repository_slug AND l.hash = c.hash")
    return table, f"""
            SELECT 'cloud', '{level}', {scope}, NULL::VARCHAR, c.repository_slug, c.hash,
                   CAST(c.date_local AS DATE), 'author_local', c.is_merge,
                   {lines}.lines_added, {lines}.lines_deleted
            FROM {{d}}.{table} c{join}"""


def server_commits_at(level: str, scope: str) -> tuple[str, str]:
    """Self-hosted commits of one level; the day of the UTC instant, whatever the session's
    TimeZone. The user level holds commits under the user's alias e-mails too."""
    table = f"server_commits{SERVER_SUFFIX[level]}"
    return table, f"""
            SELECT 'server', '{level}', {scope}, c.project_key, c.repository_slug, c.id,
                   CAST(timezone('UTC', c.author_timestamp) AS DATE), 'utc', c.is_merge,
                   c.lines_added, c.lines_deleted
            FROM {{d}}.{table} c"""


def cloud_pull_requests_at(level: str, scope: str) -> tuple[str, str]:
    table = CLOUD_PR_TABLES[level]
    return table, f"""
            SELECT 'cloud', '{level}', {scope}, NULL::VARCHAR, c.repository_slug, c.id,
                   c.state, c.created_at,
                   CASE WHEN c.state <> 'OPEN' THEN coalesce(c.closed_at, c.updated_at) END,
                   CASE WHEN c.state = 'OPEN' THEN NULL
                        WHEN c.closed_at IS NOT NULL THEN 'closed_at' ELSE 'updated_at' END
            FROM {{d}}.{table} c"""


def server_pull_requests_at(level: str, scope: str) -> tuple[str, str]:
    """Resolution times as the `pull_requests` view has them: the CSV export's time to
    resolve (the latest export row of the pull request, of any level), else updated_at."""
    table = f"server_pull_requests{SERVER_SUFFIX[level]}"
    return table, f"""
            SELECT 'server', '{level}', {scope}, c.project_key, c.repository_slug, c.id,
                   c.state, c.created_at,
                   CASE WHEN c.state <> 'OPEN' THEN coalesce(c.csv_resolved_at, c.updated_at) END,
                   CASE WHEN c.state = 'OPEN' THEN NULL
                        WHEN c.csv_resolved_at IS NOT NULL THEN 'csv_time_to_resolve'
                        ELSE 'updated_at' END
            FROM (SELECT j.*, j.created_at + to_seconds(x.seconds) AS csv_resolved_at
                  FROM {{d}}.{table} j
                  LEFT JOIN (SELECT project, repository, pull_request_id,
                                    max_by(time_to_resolve_s, last_updated_date) AS seconds
                             FROM {{optional:server_pull_request_exports}} GROUP BY ALL) x
                    ON x.project = j.project_name AND x.repository = j.repository_name
                   AND x.pull_request_id = j.id) c"""


VIEWS["commits_by_level"] = [
    *(cloud_commits_at(level, scope) for level, scope in CLOUD_LEVELS),
    *(server_commits_at(level, scope) for level, scope in SERVER_LEVELS)]
VIEWS["pull_requests_by_level"] = [
    *(cloud_pull_requests_at(level, scope) for level, scope in CLOUD_LEVELS),
    *(server_pull_requests_at(level, scope) for level, scope in SERVER_LEVELS)]

# optional table -> the columns the SELECTs above read from it, with their types
OPTIONAL: Final[dict[str, dict[str, str]]] = {
    # the CSV export's header is not published: used only when it had these columns
    "server_pull_request_exports": {
        "project": "VARCHAR", "repository": "VARCHAR", "pull_request_id": "BIGINT",
        "last_updated_date": "TIMESTAMPTZ", "time_to_resolve_s": "BIGINT"},
    # lines of the cloud's other levels; no lines when the repository level was not read
    "cloud_commits": {"repository_slug": "VARCHAR", "hash": "VARCHAR",
                      "lines_added": "BIGINT", "lines_deleted": "BIGINT"},
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
    # The statistics endpoints' daily series, from the lists (README: Statistics grain and
    # derived daily series). Sums are BIGINT, as the statistics tables' columns.
    "daily_commit_activity": """
        SELECT edition, level, scope, day, day_basis, count(*) AS commits,
               count(*) FILTER (WHERE is_merge) AS merge_commits,
               count(lines_added) AS commits_with_lines,
               sum(lines_added)::BIGINT AS lines_added,
               sum(lines_deleted)::BIGINT AS lines_deleted
        FROM {d}.commits_by_level GROUP BY edition, level, scope, day, day_basis""",
    "daily_pull_request_activity": """
        SELECT edition, level, scope, day,
               -- by creation day and current state: the statistics endpoints' measures
               count(*) FILTER (WHERE event = 'created') AS created,
               count(*) FILTER (WHERE event = 'created' AND state = 'OPEN') AS created_open,
               count(*) FILTER (WHERE event = 'created' AND state = 'MERGED')
                   AS created_merged,
               count(*) FILTER (WHERE event = 'created' AND state = 'DECLINED')
                   AS created_declined,
               count(*) FILTER (WHERE event = 'created' AND state = 'SUPERSEDED')
                   AS created_superseded,
               -- by resolution day: what the statistics cannot give
               count(*) FILTER (WHERE event = 'resolved' AND state = 'MERGED') AS merged,
               count(*) FILTER (WHERE event = 'resolved' AND state = 'DECLINED') AS declined,
               count(*) FILTER (WHERE event = 'resolved' AND state = 'SUPERSEDED')
                   AS superseded,
               count(*) FILTER (WHERE event = 'resolved'
                                AND resolved_at_source = 'updated_at')
                   AS resolutions_from_updated_at
        FROM (SELECT edition, level, scope, 'created' AS event, state, resolved_at_source,
                     -- the UTC day whatever the reading session's TimeZone
                     CAST(timezone('UTC', created_at) AS DATE) AS day
              FROM {d}.pull_requests_by_level WHERE created_at IS NOT NULL
              UNION ALL
              SELECT edition, level, scope, 'resolved', state, resolved_at_source,
                     CAST(timezone('UTC', resolved_at) AS DATE)
              FROM {d}.pull_requests_by_level WHERE resolved_at IS NOT NULL) events
        GROUP BY edition, level, scope, day""",
}
# which canonical view each derived view reads
DERIVED_FROM: Final[dict[str, str]] = {
    "daily_author_activity": "commits",
    "pull_request_cycle_times": "pull_requests",
    "pull_request_outcomes_weekly": "pull_requests",
    "daily_commit_activity": "commits_by_level",
    "daily_pull_request_activity": "pull_requests_by_level",
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
