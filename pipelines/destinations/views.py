"""The canonical layer: views with the same columns whichever edition was loaded.

Each view is a UNION ALL of the SELECTs the editions' tables give it (`EditionSpec.views`),
over the tables that exist; an edition that was not loaded simply contributes nothing. A
SELECT may also read an optional table (`{optional:name}`, `EditionSpec.optional_tables`):
the table when it was loaded with the columns the SELECT needs, else an empty stand-in with
those columns. docs/views.md lists each column's source.

The SQL is DuckDB's; other SQL destinations (Postgres) get it transpiled
(`pipelines/destinations/views_sql.py`): the same names, columns and values on each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from dlt.common import logger
from dlt.destinations.exceptions import DatabaseException

from pipelines.destinations.views_sql import SOURCE_DIALECT, dialect_of, in_dialect
from pipelines.destinations.warehouse import WarehouseError, exclusive_load, first_line
from sources.repo_analytics import EDITION_SPECS

# view -> its columns, in the order every edition's SELECT produces them
COLUMNS: Final[dict[str, str]] = {
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
    "commits_by_level": "source, edition, level, scope, project_key, repository_slug, commit_id, "
    "day, day_basis, is_merge, lines_added, lines_deleted",
    "pull_requests_by_level": "source, edition, level, scope, project_key, repository_slug, "
    "pull_request_id, state, created_at, resolved_at, "
    "resolved_at_source",
}
# BI views over the canonical ones (issue 5 adds more).
DERIVED: Final[dict[str, str]] = {
    "daily_author_activity": """
        SELECT source, edition, project_key, repository_slug, author_name,
               -- the UTC day whatever the reading session's TimeZone (a TIMESTAMPTZ casts to
               -- the session's local date); cloud rows: the author's local wall time's day
               CAST(coalesce(timezone('UTC', authored_at_utc), authored_at_local) AS DATE)
                   AS day,
               count(*) AS commits, sum(lines_added)::BIGINT AS lines_added,
               sum(lines_deleted)::BIGINT AS lines_deleted
        FROM {d}.commits GROUP BY ALL""",
    "pull_request_cycle_times": """
        SELECT source, edition, project_key, repository_slug, pull_request_id, state,
               created_at, resolved_at,
               -- the hours between the two instants, to the microsecond
               CAST(extract(epoch FROM resolved_at - created_at) AS DOUBLE) / 3600
                   AS hours_to_resolve,
               resolved_at_source
        FROM {d}.pull_requests WHERE state <> 'OPEN'""",
    "pull_request_outcomes_weekly": """
        SELECT source, edition, project_key, repository_slug,
               -- the UTC week (Monday 00:00 UTC) whatever the session's TimeZone
               timezone('UTC', date_trunc('week', timezone('UTC', resolved_at))) AS week,
               count(*) FILTER (WHERE state = 'MERGED') AS merged,
               count(*) FILTER (WHERE state = 'DECLINED') AS declined,
               count(*) FILTER (WHERE state = 'SUPERSEDED') AS superseded,
               -- resolved at their last update (no closing time loaded): maybe a later week
               count(*) FILTER (WHERE resolved_at_source = 'updated_at')
                   AS resolutions_from_updated_at
        FROM {d}.pull_requests WHERE state <> 'OPEN' GROUP BY ALL""",
    # The statistics endpoints' daily series, from the lists (docs/views.md: Statistics grain and
    # derived daily series). Sums are BIGINT, as the statistics tables' columns.
    "daily_commit_activity": """
        SELECT source, edition, level, scope, day, day_basis, count(*) AS commits,
               count(*) FILTER (WHERE is_merge) AS merge_commits,
               count(lines_added) AS commits_with_lines,
               sum(lines_added)::BIGINT AS lines_added,
               sum(lines_deleted)::BIGINT AS lines_deleted
        FROM {d}.commits_by_level GROUP BY source, edition, level, scope, day, day_basis""",
    "daily_pull_request_activity": """
        SELECT source, edition, level, scope, day,
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
        FROM (SELECT source, edition, level, scope, 'created' AS event, state, resolved_at_source,
                     -- the UTC day whatever the reading session's TimeZone
                     CAST(timezone('UTC', created_at) AS DATE) AS day
              FROM {d}.pull_requests_by_level WHERE created_at IS NOT NULL
              UNION ALL
              SELECT source, edition, level, scope, 'resolved', state, resolved_at_source,
                     CAST(timezone('UTC', resolved_at) AS DATE)
              FROM {d}.pull_requests_by_level WHERE resolved_at IS NOT NULL) events
        GROUP BY source, edition, level, scope, day""",
}
# the dialects whose views the tests compare row by row; others are sqlglot's translation
TESTED_DIALECTS: Final = ("duckdb", "postgres")
# which canonical view each derived view reads
DERIVED_FROM: Final[dict[str, str]] = {
    "daily_author_activity": "commits",
    "pull_request_cycle_times": "pull_requests",
    "pull_request_outcomes_weekly": "pull_requests",
    "daily_commit_activity": "commits_by_level",
    "daily_pull_request_activity": "pull_requests_by_level",
}


def edition_views() -> dict[str, list[tuple[str, str]]]:
    """view -> [(table that must exist, SELECT producing the view's columns)], from every
    edition's table, in the registry's order."""
    views: dict[str, list[tuple[str, str]]] = {view: [] for view in COLUMNS}
    for spec in EDITION_SPECS.values():
        for view, parts in spec.views.items():
            views[view].extend(parts)
    return views


def optional_tables() -> dict[str, Mapping[str, str]]:
    """optional table -> the columns the editions' SELECTs read from it, with their types."""
    return {
        table: needed
        for spec in EDITION_SPECS.values()
        for table, needed in spec.optional_tables.items()
    }


def has_views(pipeline: Any) -> bool:
    """Whether the canonical views are made on `pipeline`'s destination: a SQL destination
    that keeps views (DuckDB, Postgres, any dlt SQL destination with a sqlglot dialect); not
    the Delta tables of `parquet`, whose SQL client is an in-memory DuckDB of the run."""
    name = pipeline.destination.destination_name
    return name != "filesystem" and pipeline.destination.capabilities().sqlglot_dialect is not None


def create_views(pipeline: Any) -> list[str]:
    """Create or replace every canonical view whose tables exist; the names created.

    Table names are qualified with the dataset (`{d}` in the SQL above); the SQL is DuckDB's,
    transpiled for other destinations (`pipelines/destinations/views_sql.py`). On a warehouse
    several
    processes may load at once: the views are made under the dataset's load lock.
    """
    dialect = dialect_of(pipeline)
    try:
        with exclusive_load(pipeline), pipeline.sql_client() as client:
            definitions = view_definitions(client, pipeline.dataset_name, dialect)
            if dialect == SOURCE_DIALECT:
                for _, sql in definitions:
                    client.execute_sql(f"CREATE OR REPLACE {sql}")
            else:
                remake_views(client, definitions)
    except Exception as error:
        if dialect in TESTED_DIALECTS:
            raise
        # sqlglot's translation, untested here: the load stands, the views are a note
        logger.warning(
            f"the canonical views were not made on the {dialect} destination "
            f"({first_line(error)}): query the tables, and please report this line"
        )
        return []
    return [view for view, _ in definitions]


def view_definitions(client: Any, dataset_name: str, dialect: str) -> list[tuple[str, str]]:
    """(view, `VIEW <name> [(columns)] AS <select>` in `dialect`) of every view whose tables
    exist in the dataset, the views they read first."""
    dataset = client.fully_qualified_dataset_name()
    existing = {
        row[0]
        for row in client.execute_sql(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            dataset_name,
        )
    }
    columns: dict[str, set[str]] = {}
    for table, column in client.execute_sql(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = %s",
        dataset_name,
    ):
        columns.setdefault(table, set()).add(column)
    optional = {
        f"{{optional:{name}}}": optional_relation(dataset, name, needed, columns.get(name, set()))
        for name, needed in optional_tables().items()
    }
    definitions: list[tuple[str, str]] = []
    for view, parts in edition_views().items():
        selects = [sql for table, sql in parts if table in existing]
        if not selects:
            continue
        union = " UNION ALL ".join(selects).replace("{d}", dataset)
        for placeholder, relation in optional.items():
            union = union.replace(placeholder, relation)
        definitions.append(
            (view, f"VIEW {dataset}.{view} ({COLUMNS[view]}) AS {in_dialect(union, dialect)}")
        )
        existing.add(view)
    for view, sql in DERIVED.items():
        if DERIVED_FROM[view] in existing:
            select = in_dialect(sql.replace("{d}", dataset), dialect)
            definitions.append((view, f"VIEW {dataset}.{view} AS {select}"))
    return definitions


def remake_views(client: Any, definitions: list[tuple[str, str]]) -> None:
    """Each view replaced in place; where the warehouse refuses, dropped with the views of
    ours that read it and made again, in one transaction (readers see the old view or the
    new). Postgres keeps a view's column types and refuses a replacement that changes one,
    as a column does when another edition's tables arrive (text beside varchar). A view of
    the user's that reads the view makes the drop fail too: then one line says what to do."""
    dataset = client.fully_qualified_dataset_name()
    for view, sql in definitions:
        try:
            client.execute_sql(f"CREATE OR REPLACE {sql}")
        except DatabaseException as refused:
            readers = [derived for derived, base in DERIVED_FROM.items() if base == view]
            names = ", ".join(f"{dataset}.{name}" for name in (view, *readers))
            try:
                with client.begin_transaction():
                    client.execute_sql(f"DROP VIEW IF EXISTS {names}")
                    client.execute_sql(f"CREATE {sql}")
            except DatabaseException as error:
                raise WarehouseError(
                    f"the canonical view {dataset}.{view} changed ({first_line(refused)}) and "
                    f"cannot be made again ({first_line(error)}): drop the views of yours "
                    "that read it, load again, then make them again"
                ) from None


def optional_relation(
    dataset: str, table: str, needed: Mapping[str, str], present: set[str]
) -> str:
    """The table when it has the needed columns; else no rows with those columns and types."""
    if set(needed) <= present:
        return f"{dataset}.{table}"
    stand_in = ", ".join(f"NULL::{kind} AS {name}" for name, kind in needed.items())
    return f"(SELECT {stand_in} WHERE false)"
