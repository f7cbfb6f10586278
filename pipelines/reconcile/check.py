"""Self-reconciliation: what landed, compared with the API's own statistics.

For each repository and window: commit counts and lines added (the commit statistics
endpoint) and pull requests by state (the pull-request statistics endpoint), against the
loaded tables. Pull requests are counted by their last update, the date the lists are read
by: one created in a window but updated after it is loaded by a later window (or night), and
counting by creation would report it missing where nothing is wrong. Each window is asked
at the top level first: where its totals equal what landed, no repository is asked one by one
(`pipelines/reconcile/windows.py`).

The repository-level statistics tables are checked too, row by row against the API's answer
for the row's own scope and period: the stored periods that overlap a window, and (for a
table a list refreshes: pull requests counted by creation period and current state) the
stored periods in which the list's items updated in a window were created. Those are the
rows the run should have written or read again; a stale one is a mismatch. A row the run's
own loads wrote (its `_dlt_load_id` is one of them) is the API's answer for that very scope
and period, read by this run: it is counted as written by the run and not asked for again.
Only the other rows (earlier runs', earlier backfills') are requested and compared.

The cloud commit `date` has no zone, so for the cloud edition a commit near a window edge may
fall on either side: a difference no larger than what the commits within 14 hours of an edge
(the widest offsets) add up to — in count, or in lines — is reported as
`within_edge_tolerance`, not as a mismatch.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import dlt
import duckdb

from pipelines.destinations.delta.children import LOAD_ID, delta_tables, parquet_scan
from pipelines.destinations.duckdb.file import NOT_RECONCILED, lock_wait, waiting
from pipelines.destinations.duckdb.memory import connection_config, memory_limit
from pipelines.destinations.warehouse import warehouse_tables
from pipelines.reconcile.model import (
    Difference,
    EditionChecks,
    Measures,
    Reconciliation,
    StoredPeriod,
    edition_checks,
    measure,
    refreshing_list,
    repository_table,
    required_endpoint,
)
from pipelines.reconcile.prefetch import StatisticsPrefetch
from pipelines.reconcile.windows import (
    LINES_ADDED,
    PR_STATE,
    PR_UPDATED,
    WindowTotals,
    api_statistics,
    compare_window,
    repository_jobs,
)
from sources.repo_analytics import EDITION_SPECS, RunReport
from sources.repo_analytics.dates import wire
from sources.repo_analytics.editions.spec import EditionSpec, StatisticsCheck
from sources.repo_analytics.errors import SkippableApiError
from sources.repo_analytics.reading.context import edition_client
from sources.repo_analytics.reading.origin import SOURCE
from sources.repo_analytics.reading.plan import build_plan
from sources.repo_analytics.reading.readers import ReadContext
from sources.repo_analytics.reading.scopes import repository_scope

__all__ = ["Reconciliation", "reconcile", "reconcile_pipeline", "reconcile_with"]

# a statistics table's period columns: its grain, and the period's start and end
PERIOD_COLUMNS = ("period", "period_start", "period_end")


def reconcile(
    db_file: str,
    dataset: str,
    windows: list[tuple[datetime, datetime]],
    source_args: dict[str, Any],
    run_loads: Collection[str] = (),
    prefetched: StatisticsPrefetch | None = None,
    planned: Mapping[str, Collection[str]] | None = None,
) -> Reconciliation:
    """Compare every repository of a DuckDB file's dataset, window by window, with the API.
    `run_loads`, `prefetched`, `planned`: see `reconcile_with`."""
    limit = connection_config(memory_limit(source_args))
    with duckdb.connect(db_file, read_only=True, config=limit) as con:
        return reconcile_with(con, dataset, windows, source_args, run_loads, prefetched, planned)


def reconcile_pipeline(
    pipeline: dlt.Pipeline,
    windows: list[tuple[datetime, datetime]],
    source_args: dict[str, Any],
    run_loads: Collection[str] = (),
    prefetched: StatisticsPrefetch | None = None,
    planned: Mapping[str, Collection[str]] | None = None,
) -> Reconciliation:
    """Reconcile what a run loaded into the pipeline's destination: a DuckDB file; Delta
    tables on a filesystem (read with dlt's deltalake helper) or a warehouse's tables (read
    through dlt's SQL client), each copied into an in-memory DuckDB; a destination dlt cannot
    read back is not reconciled (a note says so). `run_loads`, `prefetched`,
    `planned`: see `reconcile_with`."""
    name = pipeline.destination.destination_name
    edition = source_args.get("edition") or dlt.config.get("sources.repo_analytics.edition")
    spec = EDITION_SPECS.get(str(edition))
    checks = edition_checks(spec) if spec is not None else None
    if spec is None or checks is None:
        return Reconciliation(
            0,
            [],
            [
                f"not run: unknown edition {edition!r}"
                if spec is None
                else f"not run: the {edition} edition has nothing to reconcile"
            ],
        )
    if name == "duckdb":  # read-only: other processes' read-only connections do not block it
        db_file = str(pipeline.sql_client().credentials.database)
        return waiting(
            lambda: reconcile(
                db_file, pipeline.dataset_name, windows, source_args, run_loads, prefetched, planned
            ),
            lock_wait(source_args),
            NOT_RECONCILED,
        )
    columns = columns_read(spec, checks)  # the tables compared, each with what is read of it
    needed = tuple(columns)
    tables: dict[str, Any]  # a table's data, or the source DuckDB reads it from
    if name == "filesystem":
        # DuckDB's Parquet reader in place where it reads the table as Delta does, the faster
        # (`docs/decisions/reconciliation-reads.md`); else a copy of the columns compared, a
        # table, not a dataset: filters pushed into the dataset fail on string_view
        tables = {
            t: parquet_scan(d)
            or d.to_pyarrow_table(
                columns=[f.name for f in d.schema().fields if f.name in columns.get(t, ())]
            )
            for t, d in delta_tables(pipeline, *needed).items()
        }
    else:
        try:  # a warehouse with a SQL client (Postgres, ...): its tables, read once
            tables = warehouse_tables(pipeline, needed, columns)
        except Exception as error:  # noqa: BLE001 - a destination dlt cannot read back
            return Reconciliation(
                0, [], [f"not run: the {name} destination cannot be read back ({error})"]
            )
    with duckdb.connect() as con:
        con.execute(f'CREATE SCHEMA "{pipeline.dataset_name}"')
        for table, data in tables.items():
            if not isinstance(data, str):  # a copy: registered, read by its name
                con.register(f"{table}__copy", data)
                data = f'"{table}__copy"'
            con.execute(f'CREATE VIEW "{pipeline.dataset_name}"."{table}" AS SELECT * FROM {data}')
        return reconcile_with(
            con, pipeline.dataset_name, windows, source_args, run_loads, prefetched, planned
        )


def columns_read(spec: EditionSpec, checks: EditionChecks) -> dict[str, frozenset[str]]:
    """The columns the reconciliation reads, by table: a destination read back into DuckDB
    (Delta tables, a warehouse's) is read in these only, not whole: whole, a large year's
    tables multiplied the reconciliation's memory (`docs/decisions/reconciliation-reads.md`)."""
    read: dict[str, set[str]] = {
        checks.commit_table: {SOURCE, *spec.repository_key, checks.commit_time, LINES_ADDED},
        checks.pr_table: {SOURCE, *spec.repository_key, PR_STATE, PR_UPDATED},
    }
    for check in checks.statistics:
        table = repository_table(spec, check.resource)
        if table is None:
            continue
        level = () if check.level_column is None else (check.level_column,)
        read.setdefault(table, set()).update(
            (SOURCE, LOAD_ID, check.scope_column, *check.measures, *PERIOD_COLUMNS, *level)
        )
        listing = refreshing_list(spec, check.resource)
        if listing is not None and listing.refreshes is not None and listing.cursor is not None:
            read.setdefault(listing.table, set()).update(
                (SOURCE, *spec.repository_key, listing.cursor, listing.refreshes[1])
            )
    return {table: frozenset(columns) for table, columns in read.items()}


def reconcile_with(
    con: duckdb.DuckDBPyConnection,
    dataset: str,
    windows: list[tuple[datetime, datetime]],
    source_args: dict[str, Any],
    run_loads: Collection[str] = (),
    prefetched: StatisticsPrefetch | None = None,
    planned: Mapping[str, Collection[str]] | None = None,
) -> Reconciliation:
    """Every repository of the dataset, window by window, for what the run read (repository-
    level commits, pull requests, or both): the API's statistics are fetched in parallel
    (`concurrency` at once), then compared with what landed.

    `run_loads` are the ids of the loads the run made (`LoadInfo.loads_ids`): a stored
    statistics row one of them wrote is the API's answer of this run and is not asked for
    again (counted in `rows_written`); every other row of the windows is (`rows_rechecked`).
    None given: every row is asked for. `prefetched`: the statistics a backfill asked ahead
    (`pipelines/reconcile/prefetch.py`), taken instead of asking again. `planned`: the scope
    keys the run meant to read, by resource, those it skipped left out: its repositories are
    compared too, so a repository of which no row landed is a mismatch, not unseen."""
    spec = EDITION_SPECS[source_args["edition"]]
    plan = build_plan(spec, source_args)
    result = Reconciliation(0, [])
    checks = edition_checks(spec)
    if checks is None:
        result.notes.append(f"not run: the {spec.name} edition has nothing to reconcile")
        return result
    client = edition_client(plan, RunReport())
    ctx = ReadContext(plan, client, client.report)
    con.execute(f"SET schema '{dataset}'")
    present = {
        name
        for (name,) in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ?", [dataset]
        ).fetchall()
    }
    read = "repository" in plan.levels
    measures = Measures(
        read and "commits" in plan.resources and checks.commit_table in present,
        read and "pull_requests" in plan.resources and checks.pr_table in present,
        tuple(
            c
            for c in checks.statistics
            if read
            and c.resource in plan.resources
            and repository_table(spec, c.resource) in present
        ),
    )
    if not (measures.commits or measures.pull_requests or measures.statistics):
        result.notes.append(
            "not run: the run read no repository-level commits, pull "
            "requests or statistics into this dataset"
        )
        return result
    wanted = (
        None
        if plan.repositories is None
        else {tuple(name.split("/")) for name in plan.repositories}
    )
    totals = {
        (start, end): WindowTotals(con, spec, checks, plan.source, start, end)
        for start, end in windows
    }
    repositories: list[tuple[str, ...]] = []
    if measures.commits or measures.pull_requests:
        key = ", ".join(spec.repository_key)
        table = checks.commit_table if measures.commits else checks.pr_table
        repositories = [
            tuple(names)
            for names in con.execute(
                f"SELECT DISTINCT {key} FROM {table} WHERE {SOURCE} = ? ORDER BY ALL", [plan.source]
            ).fetchall()
            if wanted is None or tuple(names) in wanted
        ]
        meant = planned_repositories(spec, checks, measures, planned or {})
        extra = {names for names in meant if wanted is None or names in wanted}
        repositories = sorted({*repositories, *extra})
    ask = prefetched.ask if prefetched is not None else api_statistics
    jobs = repository_jobs(ctx, checks, measures, totals, repositories, wanted is None, result, ask)
    stored = [
        row
        for check in measures.statistics
        for row in stored_periods(
            con, spec, check, plan.statistics_period, windows, present, wanted, plan.source
        )
    ]
    own = frozenset(run_loads)
    rows = [row for row in stored if row.load_id is None or row.load_id not in own]
    result.rows_written, result.rows_rechecked = len(stored) - len(rows), len(rows)
    with ThreadPoolExecutor(max_workers=plan.concurrency) as pool:
        answers = list(pool.map(lambda j: ask(ctx, checks, j[3], j[0], j[1], j[2]), jobs))
        row_answers = list(pool.map(lambda row: api_period(ctx, row), rows))
    for (names, start, end, left), answer in zip(jobs, answers, strict=True):
        if isinstance(answer, str):
            result.notes.append(answer)
        else:
            compare_window(totals[start, end], names, answer, result, left)
    for row, row_answer in zip(rows, row_answers, strict=True):
        compare_period(row, row_answer, result)
    return result


def planned_unskipped(reports: Iterable[RunReport]) -> dict[str, set[str]]:
    """The scopes the runs meant to read, by resource, without any scope a run skipped (under
    any resource: its rows are not all in, which the skip already says)."""
    skipped = {s.resource.split(":", 1)[-1] for r in reports for s in r.skips}
    planned: dict[str, set[str]] = {}
    for report in reports:
        for name, keys in report.planned.items():
            planned.setdefault(name, set()).update(k for k in keys if k not in skipped)
    return planned


def planned_repositories(
    spec: EditionSpec,
    checks: EditionChecks,
    measures: Measures,
    planned: Mapping[str, Collection[str]],
) -> set[tuple[str, ...]]:
    """The repositories the run meant to read into the tables compared (their keys, as
    `spec.repository_key` values)."""
    tables = {checks.commit_table} if measures.commits else set()
    tables |= {checks.pr_table} if measures.pull_requests else set()
    names = {e.name for e in spec.endpoints if e.level == "repository" and e.table in tables}
    return {tuple(key.split("/")) for name in names for key in planned.get(name, ())}


def stored_periods(
    con: duckdb.DuckDBPyConnection,
    spec: EditionSpec,
    check: StatisticsCheck,
    period: str,
    windows: list[tuple[datetime, datetime]],
    present: set[str],
    wanted: set[tuple[str, ...]] | None,
    source: str,
) -> list[StoredPeriod]:
    """The stored repository-level rows of one statistics table (of the run's `period`
    grain and `source`) that the run should have written or read again: those overlapping a
    window, and those in which items of the refreshing list updated in a window were
    created."""
    table = repository_table(spec, check.resource)
    listing = refreshing_list(spec, check.resource)
    stamped = bool(
        con.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = ? AND column_name = ?",
            [table, LOAD_ID],
        ).fetchall()
    )
    scope = f's."{check.scope_column}"'
    grain, period_start, period_end = PERIOD_COLUMNS
    where = f"s.{SOURCE} = ? AND s.{grain} = ?" + (
        "" if check.level_column is None else f" AND s.\"{check.level_column}\" = 'repository'"
    )
    held = f"s.{period_start} < ? AND s.{period_end} > ?"
    changed = "FALSE"
    if listing is not None and listing.refreshes is not None and listing.table in present:
        names = ", ".join(f'p."{c}"' for c in spec.repository_key)
        created, updated = listing.refreshes[1], listing.cursor
        changed = (
            f"EXISTS (SELECT 1 FROM {listing.table} p WHERE p.{SOURCE} = s.{SOURCE} AND "
            f"concat_ws('/', {names}) = "
            f'{scope} AND p."{updated}" >= ? AND p."{updated}" < ? '
            f'AND p."{created}" >= s.{period_start} AND p."{created}" < s.{period_end})'
        )
    measures = ", ".join(f's."{m}"' for m in check.measures)
    load_id = f's."{LOAD_ID}"' if stamped else "NULL"  # a table older than the stamping
    sql = (
        f"SELECT {scope}, s.{period_start}, s.{period_end}, {load_id}, {measures} "
        f"FROM {table} s WHERE {where} AND (({held}) OR {changed})"
    )
    found: dict[tuple[Any, ...], StoredPeriod] = {}
    for start, end in windows:
        params = [source, period, end, start, *((start, end) if changed != "FALSE" else ())]
        for key, period_start, period_end, load, *landed in con.execute(sql, params).fetchall():
            repository = tuple(str(key).split("/"))
            if wanted is None or repository in wanted:
                found[(key, period_start)] = StoredPeriod(
                    check,
                    repository,
                    period_start.astimezone(UTC),
                    period_end.astimezone(UTC),
                    tuple(int(v or 0) for v in landed),
                    None if load is None else str(load),
                )
    return sorted(found.values(), key=lambda r: (r.names, r.start))


def api_period(ctx: ReadContext, row: StoredPeriod) -> tuple[int, ...] | str:
    """The API's numbers for one stored row's repository and period, read with the row's
    endpoint (its parameters, and its columns' JSON paths), or why they could not be read."""
    spec = ctx.plan.edition
    endpoint = required_endpoint(ctx, row.check.resource)
    dates = {spec.since_param: wire(row.start), spec.until_param: wire(row.end)}
    try:
        body = ctx.client.get_json(
            repository_scope(ctx, row.names).path(endpoint.path),
            {**endpoint.params, **dates},
            "reconcile",
        ).body
    except SkippableApiError as error:
        return (
            f"{'/'.join(row.names)} {row.check.resource} {row.start.date()}.."
            f"{row.end.date()} not checked: {error}"
        )
    return tuple(measure(endpoint, name, body) for name in row.check.measures)


def compare_period(
    row: StoredPeriod, answer: tuple[int, ...] | str, result: Reconciliation
) -> None:
    if isinstance(answer, str):
        result.notes.append(answer)
        return
    for name, api_value, landed in zip(row.check.measures, answer, row.landed, strict=True):
        result.checked += 1
        if api_value != landed:
            result.differences.append(
                Difference(
                    "/".join(row.names),
                    f"{row.start.date()}..{row.end.date()}",
                    f"{row.check.resource}_{name}",
                    api_value,
                    landed,
                    "mismatch",
                )
            )
