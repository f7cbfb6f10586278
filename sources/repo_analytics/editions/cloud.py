"""The cloud edition as data: its endpoints, columns, paging, auth and error reading."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

import pyarrow as pa

from ..client.paging import NextLink
from ..client.rules import ErrorEnvelope, ErrorRule
from ..dates import naive_local, utc_from_iso
from .spec import (
    UTC_TS,
    ChildTable,
    Column,
    EditionSpec,
    Endpoint,
    ReconcileSpec,
    StatisticsCheck,
    ViewParts,
    column,
    count_of,
    is_merge,
)

LOCAL_TS: Final = pa.timestamp("us")
STR: Final = pa.string()
INT: Final = pa.int64()
MAX_PAGELEN: Final = 500
PAGING: Final = NextLink(page_size_param="pagelen", next_key="next", items_key="values")

W: Final = "/workspace/{workspace}"


COMMIT_KEY: Final = (
    column("repository_slug", "repository.slug", STR, nullable=False),
    column("hash", "hash", STR, nullable=False),
)
COMMIT_COLUMNS: Final = (
    *COMMIT_KEY,
    column("author_display_name", "author.display_name", STR),
    column("author_uuid", "author.uuid", STR),
    # The API drops the author's zone: this is local wall time, never to be read as UTC.
    column("date_local", "date", LOCAL_TS, naive_local, nullable=False),
    column("parent_count", "parents", pa.int32(), count_of),
    column("is_merge", "parents", pa.bool_(), is_merge),
)
LINE_COLUMNS: Final = (
    column("lines_added", "lines.added", INT),
    column("lines_deleted", "lines.deleted", INT),
)
USER_KEY: Final = column("read_for_user_uuid", "@user", STR, nullable=False)
PARENTS: Final = ChildTable(
    table="cloud_commit_parents",
    list_path=("parents",),
    parent_key=("repository_slug", "hash"),
    carry=("date_local",),
    columns=(column("parent_hash", "hash", STR),),
)

PULL_REQUEST_COLUMNS: Final = (
    column("repository_slug", "destination.repository.slug", STR, nullable=False),
    column("id", "id", INT, nullable=False),
    column("title", "title", STR),
    column("state", "state", STR),
    column("closed", "closed", pa.bool_()),
    column("author_display_name", "author.display_name", STR),
    column("author_uuid", "author.uuid", STR),
    column("destination_branch", "destination.branch.name", STR),
    column("created_at", "created_date", UTC_TS, utc_from_iso),
    column("updated_at", "updated_date", UTC_TS, utc_from_iso, nullable=False),
    column("closed_at", "closed_date", UTC_TS, utc_from_iso),
    column("comment_count", "comment_count", INT),
    column("task_count", "task_count", INT),
)

PERIOD_COLUMNS: Final = (
    column("period_start", "@period_start", UTC_TS, nullable=False),
    column("period", "@period", STR, nullable=False),
    column("period_end", "@period_end", UTC_TS, nullable=False),
)
PR_STATISTICS_COLUMNS: Final = (
    column("level", "@level", STR, nullable=False),
    column("scope", "@scope", STR, nullable=False),
    *PERIOD_COLUMNS,
    column("state_filter", "@state", STR, nullable=False),
    column("date_type", "@date_type", STR, nullable=False),
    column("pull_requests", "pull_requests", INT),
    column("declined", "state.declined", INT),
    column("merged", "state.merged", INT),
    column("open", "state.open", INT),
    column("superseded", "state.superseded", INT),
)
PR_STATISTICS_KEY: Final = ("level", "scope", "period_start", "period", "state_filter", "date_type")
PR_STATISTICS_PARAMS: Final = {"state": "all", "date_type": "created"}


def distribution_columns(measure: str) -> tuple[Column, ...]:
    stats = (
        ("average", pa.float64()),
        ("median", pa.float64()),
        ("p75", pa.float64()),
        ("p95", pa.float64()),
        ("p99", pa.float64()),
        ("total", INT),
    )
    return tuple(
        column(f"lines_{measure}_{name}", f"lines_of_code.{measure}.{name}", kind)
        for name, kind in stats
    )


CHANGE_STATISTICS_COLUMNS: Final = (
    column("repository_slug", "@scope", STR, nullable=False),
    *PERIOD_COLUMNS,
    column("merges", "@merges", STR, nullable=False),
    column("commits", "commits", INT),
    *distribution_columns("added"),
    *distribution_columns("changed"),
    *distribution_columns("deleted"),
)

COMMIT_LIST_PARAMS: Final = {"merges": "include", "order": "oldest"}
PR_LIST_PARAMS: Final = {"state": "all", "date_type": "updated"}
PR_STATISTICS_BY_CREATION: Final = ("pull_request_statistics", "created_at")


def pr_list(level: str, path: str, table: str, extra: tuple[Column, ...] = ()) -> Endpoint:
    key = ("read_for_user_uuid",) if extra else ()
    return Endpoint(
        "pull_requests",
        level,
        "list",
        path,
        table,
        (*key, "repository_slug", "id"),
        (*extra, *PULL_REQUEST_COLUMNS),
        cursor="updated_at",
        params=PR_LIST_PARAMS,
        page_size=MAX_PAGELEN,
        paging=PAGING,
        refreshes=PR_STATISTICS_BY_CREATION,
        fixed_column="created_at",
    )


def pr_statistics(level: str, path: str, alt_paths: tuple[str, ...] = ()) -> Endpoint:
    return Endpoint(
        "pull_request_statistics",
        level,
        "statistics",
        path,
        "cloud_pull_request_statistics",
        PR_STATISTICS_KEY,
        PR_STATISTICS_COLUMNS,
        cursor="period_end",
        params=PR_STATISTICS_PARAMS,
        alt_paths=alt_paths,
    )


def commit_list(
    level: str,
    path: str,
    table: str,
    columns: tuple[Column, ...],
    params: Mapping[str, str] = COMMIT_LIST_PARAMS,
) -> Endpoint:
    key = ("read_for_user_uuid",) if columns[0] is USER_KEY else ()
    return Endpoint(
        "commits",
        level,
        "list",
        path,
        table,
        (*key, "repository_slug", "hash"),
        columns,
        (PARENTS,),
        cursor="date_local",
        cursor_naive=True,
        params=params,
        page_size=MAX_PAGELEN,
        paging=PAGING,
        fixed_column="date_local",  # a commit's, part of its hash
    )


ENDPOINTS: Final = (
    pr_list("workspace", f"{W}/pull-requests", "cloud_workspace_pull_requests"),
    pr_statistics("workspace", f"{W}/pull-requests/statistics"),
    pr_list("repository", f"{W}/repos/{{repository}}/pull-requests", "cloud_pull_requests"),
    pr_statistics("repository", f"{W}/repos/{{repository}}/pull-requests/statistics"),
    pr_list("user", f"{W}/users/{{user}}/pull-requests", "cloud_user_pull_requests", (USER_KEY,)),
    # Endpoints 6 and 7: the spec's table writes them without the literal `workspace`
    # segment, its examples with it. The table's form is tried first.
    pr_statistics(
        "user",
        "/{workspace}/users/{user}/pull-requests/statistics",
        (f"{W}/users/{{user}}/pull-requests/statistics",),
    ),
    Endpoint(
        "users",
        "workspace",
        "directory",
        "/{workspace}/users",
        "cloud_users",
        ("uuid",),
        (column("uuid", "uuid", STR, nullable=False), column("display_name", "display_name", STR)),
        alt_paths=(f"{W}/users",),
        dated=False,
    ),
    commit_list("workspace", f"{W}/commits", "cloud_workspace_commits", COMMIT_COLUMNS),
    replace(
        commit_list(
            "repository",
            f"{W}/repos/{{repository}}/commits",
            "cloud_commits",
            (*COMMIT_COLUMNS, *LINE_COLUMNS),
            {**COMMIT_LIST_PARAMS, "with_lines": "true"},
        ),
        degrade_on="loc_disabled",
        degrade_drops=("with_lines",),
    ),
    Endpoint(
        "change_statistics",
        "repository",
        "statistics",
        f"{W}/repos/{{repository}}/changes-statistics",
        "cloud_commit_change_statistics",
        ("repository_slug", "period_start", "period", "merges"),
        CHANGE_STATISTICS_COLUMNS,
        cursor="period_end",
        params={"merges": "include"},
        absent_on=("loc_disabled",),
    ),
    commit_list(
        "user", f"{W}/users/{{user}}/commits", "cloud_user_commits", (USER_KEY, *COMMIT_COLUMNS)
    ),
)

TOKEN_ADVICE: Final = (
    "the access token was refused (HTTP {status}: {message}): it is invalid or past its "
    "one-year validity. Create a new one on the access-token page of the app's section in the "
    "workspace settings, then set SOURCES__REPO_ANALYTICS__TOKEN or `token` in "
    ".dlt/secrets.toml"
)
ERROR_RULES: Final = (
    ErrorRule("token_invalid", "fatal", TOKEN_ADVICE, statuses=(401,)),
    ErrorRule(
        "no_license",
        "fatal",
        "the workspace has no active commercial or trial licence "
        "for the API (HTTP {status}: {message}); see the plan details page in the "
        "workspace settings of the app",
        contains="license",
    ),
    ErrorRule(
        "app_missing",
        "fatal",
        "{url} answered HTTP 404 with a web page, not an API "
        "error: the app is not installed, or base_url / api_prefix is wrong; check them",
        statuses=(404,),
        json_body=False,
    ),
    ErrorRule(
        "loc_disabled",
        "skip",
        "lines of code indexing is disabled for this repository "
        "({message}); enable it in the repository settings to get line counts",
        contains="indexing is disabled",
    ),
    ErrorRule(
        "unindexed",
        "retry_then_skip",
        "the repository has unindexed changes ({message}); it is retried on the next run",
        contains="unindexed changes",
    ),
    ErrorRule(
        "workspace_not_found",
        "fatal",
        "the workspace was not found ({message}) at "
        "{url}: check the `workspace` setting and that the token belongs to it",
        statuses=(404,),
        contains="workspace",
    ),
    ErrorRule("not_found", "skip", "not found ({message}) at {url}", statuses=(404,)),
    ErrorRule(
        "forbidden",
        "skip",
        "forbidden ({message}) at {url}: the token may not read it",
        statuses=(403,),
    ),
    ErrorRule(
        "invalid_request",
        "fatal",
        "the host rejected the request as invalid (HTTP "
        "{status}: {message}); request sent: {url}. This is a bug or an unsupported "
        "setting: please report it with this line",
        statuses=(400,),
    ),
)

# The error body, also when it comes with 200 (a host or proxy wrapping errors): never data.
ERROR_ENVELOPE: Final = ErrorEnvelope("type", "error")

# The canonical views (pipelines/destinations/views.py): this edition's SELECT of each view's
# columns.
# The list tables of every level, in one shape: scope keys are the statistics tables' own
# (`slug`, user uuid); the top level's is NULL (one per workspace).
# (level, scope expression over the level's list table `c`)
LEVELS: Final = (
    ("workspace", "NULL::VARCHAR"),
    ("repository", "c.repository_slug"),
    ("user", "c.read_for_user_uuid"),
)
COMMIT_TABLES: Final = {
    "workspace": "cloud_workspace_commits",
    "repository": "cloud_commits",
    "user": "cloud_user_commits",
}
PR_TABLES: Final = {
    "workspace": "cloud_workspace_pull_requests",
    "repository": "cloud_pull_requests",
    "user": "cloud_user_pull_requests",
}


def commits_at(level: str, scope: str) -> tuple[str, str]:
    """Cloud commits of one level. Only the repository-level list carries lines: the other
    levels take them from it (NULL where it was not read, or indexing is off). The day is the
    author's local calendar day: the API drops the zone."""
    table = COMMIT_TABLES[level]
    lines = "c" if level == "repository" else "l"
    join = (
        ""
        if level == "repository"
        else " LEFT JOIN {optional:cloud_commits} l"
        " ON l.source = c.source AND l.repository_slug = c.repository_slug AND l.hash = c.hash"
    )
    return (
        table,
        f"""
            SELECT c.source, 'cloud', '{level}', {scope}, NULL::VARCHAR, c.repository_slug, c.hash,
                   CAST(c.date_local AS DATE), 'author_local', c.is_merge,
                   {lines}.lines_added, {lines}.lines_deleted
            FROM {{d}}.{table} c{join}""",
    )


def pull_requests_at(level: str, scope: str) -> tuple[str, str]:
    table = PR_TABLES[level]
    return (
        table,
        f"""
            SELECT c.source, 'cloud', '{level}', {scope}, NULL::VARCHAR, c.repository_slug, c.id,
                   c.state, c.created_at,
                   CASE WHEN c.state <> 'OPEN' THEN coalesce(c.closed_at, c.updated_at) END,
                   CASE WHEN c.state = 'OPEN' THEN NULL
                        WHEN c.closed_at IS NOT NULL THEN 'closed_at' ELSE 'updated_at' END
            FROM {{d}}.{table} c""",
    )


VIEWS: Final[dict[str, ViewParts]] = {
    "commits": (
        (
            "cloud_commits",
            """
            SELECT source, 'cloud' AS edition, NULL::VARCHAR AS project_key, repository_slug,
                   hash AS commit_id, author_display_name AS author_name,
                   NULL::VARCHAR AS author_email, author_uuid AS author_user,
                   NULL::TIMESTAMPTZ AS authored_at_utc, date_local AS authored_at_local,
                   lines_added, lines_deleted, is_merge, parent_count
            FROM {d}.cloud_commits""",
        ),
    ),
    "pull_requests": (
        (
            "cloud_pull_requests",
            """
            SELECT source, 'cloud' AS edition, NULL::VARCHAR AS project_key, repository_slug,
                   id AS pull_request_id, title, state, created_at, updated_at, closed_at,
                   author_display_name AS author_name, author_uuid AS author_user,
                   destination_branch AS target_branch, comment_count, task_count,
                   NULL::BIGINT AS reviewer_count,
                   CASE WHEN state <> 'OPEN' THEN coalesce(closed_at, updated_at) END
                       AS resolved_at,
                   CASE WHEN state = 'OPEN' THEN NULL
                        WHEN closed_at IS NOT NULL THEN 'closed_at' ELSE 'updated_at' END
                       AS resolved_at_source
            FROM {d}.cloud_pull_requests""",
        ),
    ),
    "pull_request_statistics": (
        (
            "cloud_pull_request_statistics",
            """
            SELECT source, 'cloud' AS edition, level, scope, period, period_start, period_end,
                   pull_requests, open, merged, declined, superseded
            FROM {d}.cloud_pull_request_statistics""",
        ),
    ),
    "commit_statistics": (
        (
            "cloud_commit_change_statistics",
            """
            SELECT source, 'cloud' AS edition, 'repository' AS level, repository_slug AS scope,
                   period, period_start, period_end, commits, lines_added_total AS lines_added,
                   lines_deleted_total AS lines_deleted
            FROM {d}.cloud_commit_change_statistics""",
        ),
    ),
    "commits_by_level": tuple(commits_at(level, scope) for level, scope in LEVELS),
    "pull_requests_by_level": tuple(pull_requests_at(level, scope) for level, scope in LEVELS),
}
# lines of the other levels; no lines when the repository level was not read
OPTIONAL_TABLES: Final = {
    "cloud_commits": {
        "source": "VARCHAR",
        "repository_slug": "VARCHAR",
        "hash": "VARCHAR",
        "lines_added": "BIGINT",
        "lines_deleted": "BIGINT",
    }
}

RECONCILE: Final = ReconcileSpec(
    commit_statistics="change_statistics",
    commit_measures=("commits", "lines_added_total"),
    pr_states=("open", "merged", "declined", "superseded"),
    statistics=(
        StatisticsCheck(
            "pull_request_statistics",
            "scope",
            ("pull_requests", "open", "merged", "declined", "superseded"),
        ),
        StatisticsCheck(
            "change_statistics",
            "repository_slug",
            ("commits", "lines_added_total", "lines_deleted_total"),
            None,
        ),
    ),
)


def error_message(body: Any) -> str:
    error = body.get("error") or {}
    message = str(error.get("message") or "")
    detail = error.get("detail")
    return f"{message}: {detail}" if detail else message


def auth_headers(credentials: Mapping[str, Any]) -> dict[str, str]:
    """The raw token as the header value, no scheme (the cloud edition's rule)."""
    return {"Authorization": str(credentials["token"])}


CLOUD: Final = EditionSpec(
    name="cloud",
    default_prefix="/rest/latest",
    since_param="since_date",
    until_param="until_date",
    error_message=error_message,
    error_rules=ERROR_RULES,
    error_envelope=ERROR_ENVELOPE,
    endpoints=ENDPOINTS,
    auth_headers=auth_headers,
    top_level="workspace",
    repository_key=("repository_slug",),
    repository_path=("repository",),
    user_key="uuid",
    credential_forms=(("token",),),
    credentials_expected=(
        "the workspace access token, in .dlt/secrets.toml or SOURCES__REPO_ANALYTICS__TOKEN"
    ),
    needs_workspace=True,
    reconcile=RECONCILE,
    views=VIEWS,
    optional_tables=OPTIONAL_TABLES,
    demo_levels=("workspace", "repository"),
    demo_credentials=("token",),
)
