"""The self-hosted edition as data: its endpoints, columns, paging, auth and error reading."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

import pyarrow as pa

from ..client.paging import StartLimit
from ..client.rules import ErrorEnvelope, ErrorRule
from ..dates import utc_from_epoch_ms, utc_from_iso
from .spec import (
    UTC_TS,
    ChildTable,
    Column,
    DetailSpec,
    EditionSpec,
    Endpoint,
    ReconcileSpec,
    StatisticsCheck,
    ViewParts,
    column,
    count_of,
    first_href,
    is_merge,
)

STR: Final = pa.string()
INT: Final = pa.int64()
BOOL: Final = pa.bool_()
MAX_COMMITS: Final = 1000
MAX_PULL_REQUESTS: Final = 500
PAGING: Final = StartLimit(
    start_param="start",
    page_size_param="limit",
    last_page_key="isLastPage",
    next_start_key="nextPageStart",
    items_key="values",
)

LEVEL_PATHS: Final = {
    "global": "",
    "project": "/projects/{project}",
    "repository": "/projects/{project}/repos/{repository}",
    "user": "/users/{user}",
}
USER_KEY: Final = column("read_for_user", "@user", STR, nullable=False)


COMMIT_COLUMNS: Final = (
    column("project_key", "repository.project.key", STR, nullable=False),
    column("repository_slug", "repository.slug", STR, nullable=False),
    column("id", "id", STR, nullable=False),
    column("repository_name", "repository.name", STR),
    column("project_name", "repository.project.name", STR),
    column("author_display_name", "author.displayName", STR),
    column("author_email", "author.emailAddress", STR),
    # Present only when the author is a platform user (through the primary e-mail).
    column("user_name", "user.name", STR),
    column("user_display_name", "user.displayName", STR),
    column("user_email", "user.emailAddress", STR),
    column("author_timestamp", "authorTimestamp", UTC_TS, utc_from_iso, nullable=False),
    column("lines_added", "linesOfCode.added", INT),
    column("lines_deleted", "linesOfCode.deleted", INT),
    column("parent_count", "parents", pa.int32(), count_of),
    column("is_merge", "parents", BOOL, is_merge),
)
COMMIT_KEY: Final = ("project_key", "repository_slug", "id")
PARENTS: Final = ChildTable(
    table="server_commit_parents",
    list_path=("parents",),
    parent_key=COMMIT_KEY,
    carry=("author_timestamp",),
    # May be abbreviated (20 characters were seen): never assume a full hash.
    columns=(column("parent_id", "id", STR),),
)

PARTICIPANT_COLUMNS: Final = (
    column("user_name", "user.name", STR),
    column("user_display_name", "user.displayName", STR),
    column("user_email", "user.emailAddress", STR),
    column("role", "role", STR),
    column("approved", "approved", BOOL),
    column("status", "status", STR),
)
PR_KEY: Final = ("project_key", "repository_slug", "id")
PULL_REQUEST_COLUMNS: Final = (
    column("project_key", "toRef.repository.project.key", STR, nullable=False),
    column("repository_slug", "toRef.repository.slug", STR, nullable=False),
    column("id", "id", INT, nullable=False),
    column("title", "title", STR),
    column("description", "description", STR),
    column("state", "state", STR),
    column("open", "open", BOOL),
    column("closed", "closed", BOOL),
    column("locked", "locked", BOOL),
    column("version", "version", INT),
    column("created_at", "createdDate", UTC_TS, utc_from_epoch_ms),
    column("updated_at", "updatedDate", UTC_TS, utc_from_epoch_ms, nullable=False),
    column("author_user_name", "author.user.name", STR),
    column("author_display_name", "author.user.displayName", STR),
    column("author_email", "author.user.emailAddress", STR),
    column("from_branch", "fromRef.displayId", STR),
    column("from_ref", "fromRef.id", STR),
    column("from_project_key", "fromRef.repository.project.key", STR),
    column("from_repository_slug", "fromRef.repository.slug", STR),
    column("from_latest_commit", "fromRef.latestCommit", STR),
    column("to_branch", "toRef.displayId", STR),
    column("to_ref", "toRef.id", STR),
    column("to_latest_commit", "toRef.latestCommit", STR),
    column("repository_name", "toRef.repository.name", STR),
    column("project_name", "toRef.repository.project.name", STR),
    column("link", "links", STR, first_href),
)


def people(table: str, path: str) -> ChildTable:
    return ChildTable(
        table=table,
        list_path=(path,),
        parent_key=PR_KEY,
        carry=("updated_at",),
        columns=PARTICIPANT_COLUMNS,
    )


REVIEWERS: Final = people("server_pull_request_reviewers", "reviewers")
PARTICIPANTS: Final = people("server_pull_request_participants", "participants")

PERIOD_COLUMNS: Final = (
    column("level", "@level", STR, nullable=False),
    column("scope", "@scope", STR, nullable=False),
    column("period_start", "@period_start", UTC_TS, nullable=False),
    column("period", "@period", STR, nullable=False),
    column("period_end", "@period_end", UTC_TS, nullable=False),
)
COMMIT_STATISTICS_COLUMNS: Final = (
    *PERIOD_COLUMNS,
    column("merges", "@merges", STR, nullable=False),
    column("commits", "commits", INT),
    column("lines_added", "linesOfCode.added", INT),
    column("lines_deleted", "linesOfCode.deleted", INT),
)
PR_STATISTICS_COLUMNS: Final = (
    *PERIOD_COLUMNS,
    column("state_filter", "@state", STR, nullable=False),
    column("date_type", "@dateType", STR, nullable=False),
    column("pull_requests", "pullRequests", INT),
    column("declined", "state.declined", INT),
    column("merged", "state.merged", INT),
    column("open", "state.open", INT),
)
STATISTICS_KEY: Final = ("level", "scope", "period_start", "period")

COMMIT_LIST_PARAMS: Final = {"merges": "include", "order": "oldest"}
PR_LIST_PARAMS: Final = {"state": "all", "dateType": "updated"}
PR_STATISTICS_BY_CREATION: Final = ("pull_request_statistics", "created_at")


def level_endpoints(level: str) -> tuple[Endpoint, ...]:
    """Lists and statistics of commits and pull requests at one level."""
    prefix = LEVEL_PATHS[level]
    extra: tuple[Column, ...] = (USER_KEY,) if level == "user" else ()
    user_key: tuple[str, ...] = ("read_for_user",) if level == "user" else ()
    suffix = "" if level == "repository" else f"_{level}"
    return (
        Endpoint(
            "commits",
            level,
            "list",
            f"{prefix}/commits",
            f"server_commits{suffix}",
            (*user_key, *COMMIT_KEY),
            (*extra, *COMMIT_COLUMNS),
            (PARENTS,),
            cursor="author_timestamp",
            params=COMMIT_LIST_PARAMS,
            page_size=MAX_COMMITS,
            paging=PAGING,
            fixed_column="author_timestamp",  # a commit's, part of its hash
        ),
        Endpoint(
            "pull_requests",
            level,
            "list",
            f"{prefix}/pull-requests",
            f"server_pull_requests{suffix}",
            (*user_key, *PR_KEY),
            (*extra, *PULL_REQUEST_COLUMNS),
            (REVIEWERS, PARTICIPANTS),
            cursor="updated_at",
            params=PR_LIST_PARAMS,
            page_size=MAX_PULL_REQUESTS,
            paging=PAGING,
            refreshes=PR_STATISTICS_BY_CREATION,
            fixed_column="created_at",
        ),
        Endpoint(
            "commit_statistics",
            level,
            "statistics",
            f"{prefix}/commits/statistics",
            "server_commit_statistics",
            (*STATISTICS_KEY, "merges"),
            COMMIT_STATISTICS_COLUMNS,
            cursor="period_end",
            params={"merges": "include"},
        ),
        Endpoint(
            "pull_request_statistics",
            level,
            "statistics",
            f"{prefix}/pull-requests/statistics",
            "server_pull_request_statistics",
            (*STATISTICS_KEY, "state_filter", "date_type"),
            PR_STATISTICS_COLUMNS,
            cursor="period_end",
            params={"state": "all", "dateType": "created"},
        ),
        Endpoint(
            "commit_exports",
            level,
            "csv",
            f"{prefix}/commits/export/csv",
            "server_commit_exports",
            (),
            (),
            cursor="window_end",
            params=COMMIT_LIST_PARAMS,
            csv_key=("project", "repository", "commit_hash"),
            fixed_column="date",
        ),
        Endpoint(
            "pull_request_exports",
            level,
            "csv",
            f"{prefix}/pull-requests/export/csv",
            "server_pull_request_exports",
            (),
            (),
            cursor="window_end",
            params=PR_LIST_PARAMS,
            csv_key=("project", "repository", "pull_request_id"),
            fixed_column="created_date",
        ),
    )


FILES: Final = DetailSpec(
    path="/projects/{project}/repos/{repository}/commits/{{id}}",
    params={"withFiles": "true"},
    table="server_commit_files",
    id_column="id",
    parent_key=COMMIT_KEY,
    time_column="author_timestamp",
    list_path=("files",),
    columns=(
        column("path", "path", STR, nullable=False),
        column("lines_added", "linesOfCode.added", INT),
        column("lines_deleted", "linesOfCode.deleted", INT),
    ),
    element_key="path",
)


def with_files(endpoint: Endpoint) -> Endpoint:
    """The repository-level commit list fetches per-file changes when `with_files` is on."""
    if endpoint.resource == "commits" and endpoint.level == "repository":
        return replace(endpoint, details=FILES)
    return endpoint


ENDPOINTS: Final = tuple(with_files(e) for level in LEVEL_PATHS for e in level_endpoints(level))

ERROR_RULES: Final = (
    ErrorRule(
        "credentials_refused",
        "fatal",
        "the host refused the credentials (HTTP "
        "{status}: {message}): check username/password or the access token "
        "(SOURCES__REPO_ANALYTICS__TOKEN, or __USERNAME and __PASSWORD)",
        statuses=(401,),
    ),
    ErrorRule(
        "no_license",
        "fatal",
        "the instance has no commercial or evaluation licence "
        "for the app (HTTP {status}: {message}); ask an administrator to install one",
        statuses=(402,),
    ),
    ErrorRule(
        "app_missing",
        "fatal",
        "{url} answered HTTP 404 with a web page, not an API "
        "error: the app is not installed or older than 5.2.0 (update it), or base_url / "
        "api_prefix is wrong",
        statuses=(404,),
        json_body=False,
    ),
    ErrorRule("not_found", "skip", "not found ({message}) at {url}", statuses=(404,)),
    ErrorRule(
        "forbidden",
        "skip",
        "forbidden ({message}) at {url}: the user may not read it",
        statuses=(403,),
    ),
    ErrorRule(
        "unindexed",
        "retry_then_skip",
        "the repository has unindexed changes ({message}); it is retried on the next run",
        statuses=(409,),
    ),
    ErrorRule(
        "ambiguous_commit",
        "skip",
        "an abbreviated commit id is ambiguous ({message})",
        statuses=(400,),
        contains="ambiguous",
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

# The error body shared by all errors, also when it comes with 200: never data.
ERROR_ENVELOPE: Final = ErrorEnvelope("errors")

# The canonical views (pipelines/destinations/views.py): this edition's SELECT of each view's
# columns.
# The list tables of every level, in one shape: scope keys are the statistics tables' own
# (`KEY/slug`, user slug, project key); the top level's is NULL (one per host).
# (level, scope expression over the level's list table `c`)
LEVELS: Final = (
    ("global", "NULL::VARCHAR"),
    ("project", "c.project_key"),
    ("repository", "c.project_key || '/' || c.repository_slug"),
    ("user", "c.read_for_user"),
)
SUFFIX: Final = {"global": "_global", "project": "_project", "repository": "", "user": "_user"}


def commits_at(level: str, scope: str) -> tuple[str, str]:
    """Self-hosted commits of one level; the day of the UTC instant, whatever the session's
    TimeZone. The user level holds commits under the user's alias e-mails too."""
    table = f"server_commits{SUFFIX[level]}"
    return (
        table,
        f"""
            SELECT c.source, 'server', '{level}', {scope}, c.project_key, c.repository_slug,
                   c.id, CAST(timezone('UTC', c.author_timestamp) AS DATE), 'utc', c.is_merge,
                   c.lines_added, c.lines_deleted
            FROM {{d}}.{table} c""",
    )


def pull_requests_at(level: str, scope: str) -> tuple[str, str]:
    """Resolution times as the `pull_requests` view has them: the CSV export's time to
    resolve (the latest export row of the pull request, of any level), else updated_at."""
    table = f"server_pull_requests{SUFFIX[level]}"
    return (
        table,
        f"""
            SELECT c.source, 'server', '{level}', {scope}, c.project_key, c.repository_slug,
                   c.id, c.state, c.created_at,
                   CASE WHEN c.state <> 'OPEN' THEN coalesce(c.csv_resolved_at, c.updated_at) END,
                   CASE WHEN c.state = 'OPEN' THEN NULL
                        WHEN c.csv_resolved_at IS NOT NULL THEN 'csv_time_to_resolve'
                        ELSE 'updated_at' END
            FROM (SELECT j.*, j.created_at + to_seconds(x.seconds) AS csv_resolved_at
                  FROM {{d}}.{table} j
                  LEFT JOIN (SELECT source, project, repository, pull_request_id,
                                    max_by(time_to_resolve_s, last_updated_date) AS seconds
                             FROM {{optional:server_pull_request_exports}} GROUP BY ALL) x
                    ON x.source = j.source AND x.project = j.project_name
                   AND x.repository = j.repository_name
                   AND x.pull_request_id = j.id) c""",
    )


VIEWS: Final[dict[str, ViewParts]] = {
    "commits": (
        (
            "server_commits",
            """
            SELECT source, 'server', project_key, repository_slug, id, author_display_name,
                   author_email, user_name, author_timestamp, NULL::TIMESTAMP,
                   lines_added, lines_deleted, is_merge, parent_count
            FROM {d}.server_commits""",
        ),
    ),
    "pull_requests": (
        # No closed date in the JSON, and updatedDate moves on after closing: the CSV
        # export's `Time to resolve (s)` (latest export row of the pull request) when loaded.
        (
            "server_pull_requests",
            """
            SELECT p.source, 'server', p.project_key, p.repository_slug, p.id, p.title, p.state,
                   p.created_at, p.updated_at, NULL::TIMESTAMPTZ, p.author_display_name,
                   p.author_user_name, p.to_branch, NULL::BIGINT, NULL::BIGINT,
                   (SELECT count(*) FROM {d}.server_pull_request_reviewers r
                    WHERE r.source = p.source AND r.project_key = p.project_key
                      AND r.repository_slug = p.repository_slug AND r.id = p.id),
                   CASE WHEN p.state <> 'OPEN' THEN coalesce(p.csv_resolved_at, p.updated_at) END,
                   CASE WHEN p.state = 'OPEN' THEN NULL
                        WHEN p.csv_resolved_at IS NOT NULL THEN 'csv_time_to_resolve'
                        ELSE 'updated_at' END
            FROM (SELECT j.*, j.created_at + to_seconds(x.seconds) AS csv_resolved_at
                  FROM {d}.server_pull_requests j
                  LEFT JOIN (SELECT source, project, repository, pull_request_id,
                                    max_by(time_to_resolve_s, last_updated_date) AS seconds
                             FROM {optional:server_pull_request_exports} GROUP BY ALL) x
                    ON x.source = j.source AND x.project = j.project_name
                   AND x.repository = j.repository_name
                   AND x.pull_request_id = j.id) p""",
        ),
    ),
    "pull_request_statistics": (
        (
            "server_pull_request_statistics",
            """
            SELECT source, 'server', level, scope, period, period_start, period_end,
                   pull_requests, open, merged, declined, NULL::BIGINT
            FROM {d}.server_pull_request_statistics""",
        ),
    ),
    "commit_statistics": (
        (
            "server_commit_statistics",
            """
            SELECT source, 'server', level, scope, period, period_start, period_end, commits,
                   lines_added, lines_deleted
            FROM {d}.server_commit_statistics""",
        ),
    ),
    "commits_by_level": tuple(commits_at(level, scope) for level, scope in LEVELS),
    "pull_requests_by_level": tuple(pull_requests_at(level, scope) for level, scope in LEVELS),
}
# the CSV export's header is not published: used only when it had these columns
OPTIONAL_TABLES: Final = {
    "server_pull_request_exports": {
        "source": "VARCHAR",
        "project": "VARCHAR",
        "repository": "VARCHAR",
        "pull_request_id": "BIGINT",
        "last_updated_date": "TIMESTAMPTZ",
        "time_to_resolve_s": "BIGINT",
    }
}

RECONCILE: Final = ReconcileSpec(
    commit_statistics="commit_statistics",
    commit_measures=("commits", "lines_added"),
    pr_states=("open", "merged", "declined"),
    statistics=(
        StatisticsCheck(
            "pull_request_statistics", "scope", ("pull_requests", "open", "merged", "declined")
        ),
        StatisticsCheck("commit_statistics", "scope", ("commits", "lines_added", "lines_deleted")),
    ),
)


def error_message(body: Any) -> str:
    errors = body.get("errors") or [{}]
    return str(errors[0].get("message") or "")


def auth_headers(credentials: Mapping[str, Any]) -> dict[str, str]:
    """A personal access token as `Bearer`, or HTTP basic credentials."""
    if credentials.get("token"):
        return {"Authorization": f"Bearer {credentials['token']}"}
    pair = f"{credentials['username']}:{credentials['password']}".encode()
    return {"Authorization": "Basic " + base64.b64encode(pair).decode("ascii")}


SELFHOSTED: Final = EditionSpec(
    name="server",
    default_prefix="/rest/analytics-api/latest",
    since_param="sinceDate",
    until_param="untilDate",
    error_message=error_message,
    error_rules=ERROR_RULES,
    error_envelope=ERROR_ENVELOPE,
    endpoints=ENDPOINTS,
    auth_headers=auth_headers,
    top_level="global",
    repository_key=("project_key", "repository_slug"),
    repository_path=("project", "repository"),
    user_key="user_name",
    user_columns=("user_name", "author_user_name"),
    credential_forms=(("token",), ("username", "password")),
    credentials_expected=(
        "a token, or a username and password, in .dlt/secrets.toml or "
        "SOURCES__REPO_ANALYTICS__TOKEN / __USERNAME / __PASSWORD"
    ),
    reconcile=RECONCILE,
    views=VIEWS,
    optional_tables=OPTIONAL_TABLES,
    demo_levels=("global", "repository"),
    demo_credentials=("username", "password"),
)
