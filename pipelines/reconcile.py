"""Self-reconciliation: what landed, compared with the API's own statistics.

For each repository and window: commit counts and lines added (the commit statistics
endpoint) and pull requests by state (the pull-request statistics endpoint), against the
loaded tables. Pull requests are counted by their last update, the date the lists are read
by: one created in a window but updated after it is loaded by a later window (or night), and
counting by creation would report it missing where nothing is wrong.

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

from collections.abc import Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import dlt
import duckdb

from pipelines.duckdb_file import NOT_RECONCILED, lock_wait, waiting
from pipelines.duckdb_memory import connection_config, memory_limit
from pipelines.lake import LOAD_ID, delta_tables
from pipelines.warehouse import warehouse_tables
from sources.repo_analytics import EDITION_SPECS, RunReport
from sources.repo_analytics.client import edition_client
from sources.repo_analytics.context import Scope
from sources.repo_analytics.dates import wire
from sources.repo_analytics.errors import SkippableApiError
from sources.repo_analytics.origin import SOURCE
from sources.repo_analytics.plan import build_plan
from sources.repo_analytics.readers import ReadContext
from sources.repo_analytics.scopes import endpoint_for, repository_scope, top_scope
from sources.repo_analytics.tables import EditionSpec, Endpoint, ReconcileSpec, StatisticsCheck

EDGE: Final = timedelta(hours=14)


@dataclass(frozen=True)
class EditionChecks:
    """Where an edition keeps what is compared: its `ReconcileSpec`, with the repository-
    level list tables and time columns of its endpoint table."""

    commit_table: str
    commit_time: str  # column compared with the window
    commit_time_is_local: bool
    pr_table: str
    spec: ReconcileSpec

    @property
    def statistics(self) -> tuple[StatisticsCheck, ...]:
        return self.spec.statistics


def edition_checks(spec: EditionSpec) -> EditionChecks | None:
    """What the edition reconciles, or None when its table declares nothing (or lacks the
    repository-level lists compared)."""
    commits = repository_endpoint(spec, "commits")
    pull_requests = repository_endpoint(spec, "pull_requests")
    if spec.reconcile is None or commits is None or pull_requests is None or not commits.cursor:
        return None
    return EditionChecks(
        commits.table, commits.cursor, commits.cursor_naive, pull_requests.table, spec.reconcile
    )


@dataclass(frozen=True)
class Measures:
    """What is compared: only what the run read (its levels and resources)."""

    commits: bool
    pull_requests: bool
    statistics: tuple[StatisticsCheck, ...] = ()  # the statistics tables it read


@dataclass(frozen=True)
class StoredPeriod:
    """One stored statistics row of a repository: its period and measures."""

    check: StatisticsCheck
    names: tuple[str, ...]
    start: datetime
    end: datetime
    landed: tuple[int, ...]
    load_id: str | None = None  # the load that wrote it (None: written before ids were kept)


@dataclass
class Difference:
    repository: str
    window: str
    measure: str
    api: int
    landed: int
    verdict: str  # mismatch | within_edge_tolerance


@dataclass
class Reconciliation:
    checked: int
    differences: list[Difference]
    notes: list[str] = field(default_factory=list)  # windows not checked, and why
    # scopes the runs skipped (`resource:scope (kind)`): their rows could not be checked
    unchecked: list[str] = field(default_factory=list)
    # statistics rows of the checked windows: written by the run's own loads (the API's
    # answers of this run, not asked for again), and older ones asked for and compared
    rows_written: int = 0
    rows_rechecked: int = 0
    # (window, family) pairs whose top-level statistics equalled what landed: their
    # repositories' checks hold without asking each (see `confirmed_by_top_level`)
    windows_confirmed: int = 0

    def skipping(self, reports: Iterable[RunReport]) -> Reconciliation:
        """Name the scopes `reports` skipped: a verdict must not hide what it could not see."""
        self.unchecked = sorted({f"{s.resource} ({s.kind})" for r in reports for s in r.skips})
        return self

    @property
    def ok(self) -> bool:
        return not any(d.verdict == "mismatch" for d in self.differences)

    def summary(self, shown: int = 10) -> list[str]:
        """The verdict, then up to `shown` mismatches and every note, one line each."""
        if not self.checked and not self.rows_written:
            why = "; ".join(note.removeprefix("not run: ") for note in self.notes)
            return [
                f"reconciliation with the API's statistics: not run ({why or 'nothing to check'})"
            ]
        tolerated = sum(d.verdict != "mismatch" for d in self.differences)
        mismatched = [d for d in self.differences if d.verdict == "mismatch"]
        lines = [
            f"reconciliation with the API's statistics: "
            f"{'PASSED' if self.ok else 'FAILED'} ({self.checked} checks, "
            f"{len(mismatched)} mismatches"
            + (
                f", {tolerated} within the edge tolerance of the zone-less cloud commit date"
                if tolerated
                else ""
            )
            + (
                f"; {self.rows_written} statistics rows written by this run from the "
                f"API's answers, {self.rows_rechecked} older rows re-checked"
                if self.rows_written or self.rows_rechecked
                else ""
            )
            + (
                f"; {self.windows_confirmed} window totals matched by the top-level statistics"
                if self.windows_confirmed
                else ""
            )
            + (f"; {len(self.unchecked)} skipped scopes not checked" if self.unchecked else "")
            + ")"
        ]
        lines += [f"  not checked, skipped by the run: {scope}" for scope in self.unchecked[:shown]]
        if len(self.unchecked) > shown:
            lines.append(f"  … {len(self.unchecked) - shown} more skipped scopes in the run report")
        lines += [
            f"  mismatch {d.repository} {d.window} {d.measure}: API {d.api}, landed {d.landed}"
            for d in mismatched[:shown]
        ]
        if len(mismatched) > shown:
            lines.append(f"  … {len(mismatched) - shown} more in the run report")
        return lines + [f"  {note}" for note in self.notes]

    def as_dict(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "ok": self.ok,
            "differences": [asdict(d) for d in self.differences],
            "notes": self.notes,
            "unchecked": self.unchecked,
            "windows_confirmed_by_top_level": self.windows_confirmed,
            "statistics_rows": {
                "written_by_run": self.rows_written,
                "rechecked": self.rows_rechecked,
            },
        }


def required_endpoint(ctx: ReadContext, resource: str) -> Endpoint:
    endpoint = endpoint_for(ctx, resource, "repository")
    if endpoint is None:
        raise ValueError(
            f"the {ctx.plan.edition.name} edition has no repository-level `{resource}` endpoint"
        )
    return endpoint


def repository_endpoint(spec: EditionSpec, resource: str) -> Endpoint | None:
    """The edition's repository-level `resource`, if it has one."""
    return next(
        (e for e in spec.endpoints if e.resource == resource and e.level == "repository"), None
    )


def repository_table(spec: EditionSpec, resource: str) -> str | None:
    """The table of the edition's repository-level `resource`, if it has one."""
    endpoint = repository_endpoint(spec, resource)
    return endpoint.table if endpoint is not None else None


def refreshing_list(spec: EditionSpec, resource: str) -> Endpoint | None:
    """The repository-level list whose items' changes change rows of statistics `resource`
    (counted by creation period), if any: its table, cursor and creation column."""
    return next(
        (
            e
            for e in spec.endpoints
            if e.level == "repository" and e.refreshes is not None and e.refreshes[0] == resource
        ),
        None,
    )


def measure(endpoint: Endpoint, name: str, body: Any) -> int:
    """The value of the endpoint's column `name` in an answer (its JSON path), 0 if none."""
    columns = {c.name: c for c in endpoint.columns}
    return int(columns[name].read(body, {}) or 0)


def reconcile(
    db_file: str,
    dataset: str,
    windows: list[tuple[datetime, datetime]],
    source_args: dict[str, Any],
    run_loads: Collection[str] = (),
) -> Reconciliation:
    """Compare every repository of a DuckDB file's dataset, window by window, with the API.
    `run_loads`: the ids of the run's own loads (see `reconcile_with`)."""
    limit = connection_config(memory_limit(source_args))
    with duckdb.connect(db_file, read_only=True, config=limit) as con:
        return reconcile_with(con, dataset, windows, source_args, run_loads)


def reconcile_pipeline(
    pipeline: dlt.Pipeline,
    windows: list[tuple[datetime, datetime]],
    source_args: dict[str, Any],
    run_loads: Collection[str] = (),
) -> Reconciliation:
    """Reconcile what a run loaded into the pipeline's destination: a DuckDB file; Delta
    tables on a filesystem (read with dlt's deltalake helper) or a warehouse's tables (read
    through dlt's SQL client), each copied into an in-memory DuckDB; a destination dlt cannot
    read back is not reconciled (a note says so). `run_loads`: the ids of the run's own loads (see
    `reconcile_with`)."""
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
            lambda: reconcile(db_file, pipeline.dataset_name, windows, source_args, run_loads),
            lock_wait(source_args),
            NOT_RECONCILED,
        )
    statistics = [repository_table(spec, c.resource) for c in checks.statistics]
    needed = (checks.commit_table, checks.pr_table, *filter(None, statistics))
    if name == "filesystem":
        # a table, not a dataset: filters pushed into the dataset fail on string_view
        tables = {t: d.to_pyarrow_table() for t, d in delta_tables(pipeline, *needed).items()}
    else:
        try:  # a warehouse with a SQL client (Postgres, ...): its tables, read once
            tables = warehouse_tables(pipeline, needed)
        except Exception as error:  # noqa: BLE001 - a destination dlt cannot read back
            return Reconciliation(
                0, [], [f"not run: the {name} destination cannot be read back ({error})"]
            )
    with duckdb.connect() as con:
        con.execute(f'CREATE SCHEMA "{pipeline.dataset_name}"')
        for table, data in tables.items():
            con.register(f"{table}__copy", data)
            con.execute(
                f'CREATE VIEW "{pipeline.dataset_name}"."{table}" AS SELECT * FROM "{table}__copy"'
            )
        return reconcile_with(con, pipeline.dataset_name, windows, source_args, run_loads)


def reconcile_with(
    con: duckdb.DuckDBPyConnection,
    dataset: str,
    windows: list[tuple[datetime, datetime]],
    source_args: dict[str, Any],
    run_loads: Collection[str] = (),
) -> Reconciliation:
    """Every repository of the dataset, window by window, for what the run read (repository-
    level commits, pull requests, or both): the API's statistics are fetched in parallel
    (`concurrency` at once), then compared with what landed.

    `run_loads` are the ids of the loads the run made (`LoadInfo.loads_ids`): a stored
    statistics row one of them wrote is the API's answer of this run and is not asked for
    again (counted in `rows_written`); every other row of the windows is (`rows_rechecked`).
    None given: every row is asked for."""
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
    # a window whose top-level statistics equal what landed needs no repository asked
    families = top_level_families(ctx, checks, measures)
    top_windows = windows if wanted is None and (families.commits or families.pull_requests) else []
    with ThreadPoolExecutor(max_workers=plan.concurrency) as pool:
        top_answers = list(
            pool.map(lambda w: api_statistics(ctx, checks, families, None, *w), top_windows)
        )
    confirmed = {
        window: confirmed_by_top_level(totals[window], answer, families)
        for window, answer in zip(top_windows, top_answers, strict=True)
    }
    jobs = []
    for start, end in windows:
        done = confirmed.get((start, end), Measures(False, False))
        left = Measures(
            measures.commits and not done.commits, measures.pull_requests and not done.pull_requests
        )
        result.checked += len(repositories) * (
            len(checks.spec.commit_measures) * done.commits
            + len(checks.spec.pr_states) * done.pull_requests
        )
        result.windows_confirmed += done.commits + done.pull_requests
        if left.commits or left.pull_requests:
            jobs += [(names, start, end, left) for names in repositories]
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
        answers = list(
            pool.map(lambda j: api_statistics(ctx, checks, j[3], j[0], j[1], j[2]), jobs)
        )
        row_answers = list(pool.map(lambda row: api_period(ctx, row), rows))
    for (names, start, end, left), answer in zip(jobs, answers, strict=True):
        if isinstance(answer, str):
            result.notes.append(answer)
        else:
            compare_window(totals[start, end], names, answer, result, left)
    for row, row_answer in zip(rows, row_answers, strict=True):
        compare_period(row, row_answer, result)
    return result


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
    where = f"s.{SOURCE} = ? AND s.period = ?" + (
        "" if check.level_column is None else f" AND s.\"{check.level_column}\" = 'repository'"
    )
    held = "s.period_start < ? AND s.period_end > ?"
    changed = "FALSE"
    if listing is not None and listing.refreshes is not None and listing.table in present:
        names = ", ".join(f'p."{c}"' for c in spec.repository_key)
        created, updated = listing.refreshes[1], listing.cursor
        changed = (
            f"EXISTS (SELECT 1 FROM {listing.table} p WHERE p.{SOURCE} = s.{SOURCE} AND "
            f"concat_ws('/', {names}) = "
            f'{scope} AND p."{updated}" >= ? AND p."{updated}" < ? '
            f'AND p."{created}" >= s.period_start AND p."{created}" < s.period_end)'
        )
    measures = ", ".join(f's."{m}"' for m in check.measures)
    load_id = f's."{LOAD_ID}"' if stamped else "NULL"  # a table older than the stamping
    sql = (
        f"SELECT {scope}, s.period_start, s.period_end, {load_id}, {measures} "
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
    for measure, api_value, landed in zip(row.check.measures, answer, row.landed, strict=True):
        result.checked += 1
        if api_value != landed:
            result.differences.append(
                Difference(
                    "/".join(row.names),
                    f"{row.start.date()}..{row.end.date()}",
                    f"{row.check.resource}_{measure}",
                    api_value,
                    landed,
                    "mismatch",
                )
            )


def api_statistics(
    ctx: ReadContext,
    checks: EditionChecks,
    measures: Measures,
    names: tuple[str, ...] | None,
    start: datetime,
    end: datetime,
) -> tuple[Any, Any] | str:
    """The API's commit and pull-request statistics of one repository (`names`; None: the
    edition's top level) and window, or why they could not be read (a scope the host skips:
    forbidden, not indexed). The query is the repository level's, on the scope's path."""
    spec = ctx.plan.edition
    scope = top_scope(ctx) if names is None else repository_scope(ctx, names)
    dates = {spec.since_param: wire(start), spec.until_param: wire(end)}
    stats = pr_stats = None
    try:
        if measures.commits:
            commit_stats = required_endpoint(ctx, checks.spec.commit_statistics)
            path = scope_path(ctx, commit_stats, scope.level, scope)
            body = ctx.client.get_json(path, {**commit_stats.params, **dates}, "reconcile").body
            stats = tuple(measure(commit_stats, name, body) for name in checks.spec.commit_measures)
        if not measures.pull_requests:
            return stats, None
        pr_endpoint = required_endpoint(ctx, "pull_request_statistics")
        by_update = {
            k: v
            for k, v in required_endpoint(ctx, "pull_requests").params.items()
            if k in pr_endpoint.params
        }  # the list's date type: updated
        path = scope_path(ctx, pr_endpoint, scope.level, scope)
        params = {**pr_endpoint.params, **by_update, **dates}
        body = ctx.client.get_json(path, params, "reconcile").body
        pr_stats = {state: measure(pr_endpoint, state, body) for state in checks.spec.pr_states}
    except SkippableApiError as error:
        where = spec.top_level if names is None else "/".join(names)
        return f"{where} {start.date()}..{end.date()} not checked: {error}"
    return stats, pr_stats


def scope_path(ctx: ReadContext, endpoint: Endpoint, level: str, scope: Scope) -> str:
    """The path of `endpoint`'s resource at `level` (the repository endpoint's own, or the
    same resource's endpoint at the top level) for `scope`."""
    if level == endpoint.level:
        return scope.path(endpoint.path)
    other = endpoint_for(ctx, endpoint.resource, level)
    if other is None:
        raise ValueError(
            f"the {ctx.plan.edition.name} edition has no {level}-level {endpoint.resource}"
        )
    return scope.path(other.path)


def top_level_families(ctx: ReadContext, checks: EditionChecks, measures: Measures) -> Measures:
    """The families whose windows can be confirmed by the top level's statistics: the edition
    has the statistics endpoint at its top level, and (commits) the commit time has a zone: a
    zone-less one may sit on either side of an edge in the API's count."""
    top = ctx.plan.edition.top_level
    return Measures(
        measures.commits
        and not checks.commit_time_is_local
        and endpoint_for(ctx, checks.spec.commit_statistics, top) is not None,
        measures.pull_requests and endpoint_for(ctx, "pull_request_statistics", top) is not None,
    )


def confirmed_by_top_level(
    totals: WindowTotals, answers: tuple[Any, Any] | str, families: Measures
) -> Measures:
    """The families of a window whose top-level statistics (`answers`) equal the sums of what
    landed.
    Every landed row was read from the API, so a repository holds more than the API counts
    only through a row the API has changed since (a pull request updated again, counted in
    its later window, where the dataset then lacks it): equal sums need such faults to
    cancel exactly. Its repositories are then not asked one by one. A host that refuses the
    top level, or counts repositories the run did not read, confirms nothing: each
    repository is asked, as without the top level."""
    if isinstance(answers, str):
        return Measures(False, False)
    stats, pr_stats = answers
    commits = families.commits and list(stats) == [
        sum(int(v[i] or 0) for v in totals.commits().values()) for i in range(2)
    ]
    by_state: dict[str, int] = {}
    for counts in totals.pull_requests().values():
        for state, count in counts.items():
            by_state[state] = by_state.get(state, 0) + count
    pull_requests = families.pull_requests and all(
        pr_stats[state] == by_state.get(state, 0) for state in totals.checks.spec.pr_states
    )
    return Measures(commits, pull_requests)


def compare_window(
    totals: WindowTotals,
    names: tuple[str, ...],
    answers: tuple[Any, Any],
    result: Reconciliation,
    measures: Measures,
) -> None:
    """One repository (`names`: its key columns) in the window of `totals`."""
    stats, pr_stats = answers
    window = WindowCheck(totals, names, result)
    if measures.commits:
        window.commits(stats)
    if measures.pull_requests:
        window.pull_requests(pr_stats)


@dataclass
class WindowTotals:
    """What landed in one window, per repository of the run's source: one grouped query per
    measure and window, each made when first asked, not one per repository."""

    con: duckdb.DuckDBPyConnection
    spec: EditionSpec
    checks: EditionChecks
    source: str
    start: datetime
    end: datetime
    _asked: dict[str, dict[tuple[Any, ...], list[Any]]] = field(default_factory=dict)

    def bounds(self) -> tuple[datetime, datetime]:
        if self.checks.commit_time_is_local:
            return self.start.replace(tzinfo=None), self.end.replace(tzinfo=None)
        return self.start, self.end

    def commits(self) -> dict[tuple[Any, ...], list[Any]]:
        """Commits and lines added whose time is in the window."""
        low, high = self.bounds()
        at = self.checks.commit_time
        return self.grouped("commits", f"{at} >= ? AND {at} < ?", [low, high])

    def near_edges(self) -> dict[tuple[Any, ...], list[Any]]:
        """Commits and lines added within `EDGE` of either end of the window (a zone-less
        commit time may sit on either side of it)."""
        low, high = self.bounds()
        at = self.checks.commit_time
        return self.grouped(
            "near",
            f"(({at} >= ? AND {at} < ?) OR ({at} >= ? AND {at} < ?))",
            [low - EDGE, low + EDGE, high - EDGE, high + EDGE],
        )

    def pull_requests(self) -> dict[tuple[Any, ...], dict[str, int]]:
        """Pull requests updated in the window, by state."""
        found = self.asked(
            "pull_requests",
            f"SELECT {self.key}, lower(state), count(*) FROM {self.checks.pr_table} "
            f"WHERE {SOURCE} = ? AND updated_at >= ? AND updated_at < ? GROUP BY ALL",
            [self.source, self.start, self.end],
            len(self.spec.repository_key) + 1,
        )
        by_state: dict[tuple[Any, ...], dict[str, int]] = {}
        for (*names, state), (count,) in found.items():
            by_state.setdefault(tuple(names), {})[state] = int(count)
        return by_state

    @property
    def key(self) -> str:
        return ", ".join(self.spec.repository_key)

    def grouped(self, name: str, where: str, params: list[Any]) -> dict[tuple[Any, ...], list[Any]]:
        return self.asked(
            name,
            f"SELECT {self.key}, count(*), coalesce(sum(lines_added), 0) "
            f"FROM {self.checks.commit_table} WHERE {SOURCE} = ? AND {where} GROUP BY ALL",
            [self.source, *params],
            len(self.spec.repository_key),
        )

    def asked(
        self, name: str, query: str, params: list[Any], width: int
    ) -> dict[tuple[Any, ...], list[Any]]:
        if name not in self._asked:
            self._asked[name] = {
                tuple(row[:width]): list(row[width:])
                for row in self.con.execute(query, params).fetchall()
            }
        return self._asked[name]


@dataclass
class WindowCheck:
    """One repository and window: landed rows against the API's answers."""

    totals: WindowTotals
    names: tuple[str, ...]  # the repository's key columns
    result: Reconciliation

    def differs(self, measure: str, api: int, landed: int, verdict: str) -> None:
        self.result.differences.append(
            Difference(
                "/".join(self.names),
                f"{self.totals.start.date()}..{self.totals.end.date()}",
                measure,
                api,
                int(landed),
                verdict,
            )
        )

    def commits(self, stats: Any) -> None:
        landed = self.totals.commits().get(self.names, [0, 0])
        edge = {"commits": 0, "lines_added": 0}  # what commits near an edge could account for
        if self.totals.checks.commit_time_is_local:
            near = self.totals.near_edges().get(self.names, [0, 0])
            edge = {"commits": int(near[0]), "lines_added": int(near[1])}
        for name, api_value, landed_value in (
            ("commits", stats[0], landed[0]),
            ("lines_added", stats[1], landed[1]),
        ):
            self.result.checked += 1
            if api_value != landed_value:
                self.differs(
                    name,
                    api_value,
                    landed_value,
                    "within_edge_tolerance"
                    if abs(api_value - landed_value) <= edge[name]
                    else "mismatch",
                )

    def pull_requests(self, pr_stats: Any) -> None:
        counts = self.totals.pull_requests().get(self.names, {})
        for state in self.totals.checks.spec.pr_states:
            self.result.checked += 1
            api_value = pr_stats[state]
            if api_value != counts.get(state, 0):
                self.differs(f"pull_requests_{state}", api_value, counts.get(state, 0), "mismatch")
