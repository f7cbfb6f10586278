"""Backfill: a long range in half-open windows, one after another, resumable after a crash.

Each window is one load of the pipeline -- the same pipeline the nightly runs use, so dlt's
`pipeline info`, `trace` and `load-package` describe every backfill -- that reads exactly
[start, end) for every scope and records the window as finished in the same load: a window is
finished only once its data is in, a crash repeats at most the window it hit, and merge keys
make that repeat harmless. A window's load runs while the next window is read (at most one
load under way, `pipelines/runs/background_load.py`): a window ends once its load landed, a crash
may leave two packages, and the rerun lands both before it reads. Within a window every
resource reads its scopes `concurrency` at once (windows read at once were measured no
faster: the host's `concurrency` open requests are the bound either way). CSV exports, which
answer a whole range at once, come last, in windows of their own of up to 366 days. A
backfill's windows never move the nightly cursors, but the last one read by a backfill that
reaches the clock, which moves those of every window's scopes up to the backfill's end, in
its own load (unless a window skipped a scope).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import dlt

from pipelines.destinations.duckdb.file import VIEWS_LATER, lock_wait, waiting
from pipelines.destinations.views import create_views, has_views
from pipelines.runs.background_load import BackgroundLoad
from pipelines.runs.load import (
    ExtractedRun,
    LoadResult,
    after_load,
    extract_run,
    import_once,
    normalize_run,
    restore_state,
    run_settings,
    settle_pending,
)
from pipelines.runs.malloc import system_pool_while_running
from pipelines.runs.progress import Progress
from pipelines.runs.window_ledger import pending_windows, records
from pipelines.runs.window_scopes import Appeared, ScopeFinder, appeared_scopes
from sources.repo_analytics import (
    READ_SCOPES_KEY,
    RECONCILIATION_KEY,
    WINDOW_MARKER,
    RepoAnalyticsConfiguration,
    RunReport,
)
from sources.repo_analytics.client.transport import HostGate
from sources.repo_analytics.dates import parse_user_instant, windows
from sources.repo_analytics.editions import edition_spec
from sources.repo_analytics.errors import ConfigError
from sources.repo_analytics.reading.plan import chosen_resources
from sources.repo_analytics.reading.scopes import RangeDiscovery
from sources.repo_analytics.report import waited_wall
from sources.repo_analytics.settings import DEFAULT_CONCURRENCY

if TYPE_CHECKING:
    from pipelines.reconcile.prefetch import StatisticsPrefetch

SIGNATURE_KEYS = (
    "edition",
    "base_url",
    "workspace",
    "levels",
    "resources",
    "projects",
    "repositories",
    "users",
)
# a third of a year: each window is a dlt load with a fixed cost and asks every scope again,
# and longer windows did not raise the peak memory (`docs/decisions/window-size.md`)
DEFAULT_WINDOW_DAYS = 122
FORMER_WINDOW_DAYS = 92  # the default before: a backfill begun with it resumes in it
EXPORT_WINDOW_DAYS = 366  # the longest range a CSV export answers
EXPORTS_KEY_PREFIX = "exports "  # finished export windows: recorded apart from the others


@dataclass
class WindowOutcome:
    start: datetime
    end: datetime
    resumed: bool  # finished by an earlier run: nothing was requested for it
    result: LoadResult | None = None
    seconds: float = 0.0
    index: int = 0  # the window's place in the plan, from 1
    exports: bool = False  # a window of the CSV exports
    # why a window an earlier run read is read again: `mismatch` (its reconciliation found
    # one), `new_scopes` (whole: a repository appeared), `new_users` (only those users)
    again: str | None = None

    @property
    def key(self) -> str:
        """The window's key in the pipeline's state."""
        return (EXPORTS_KEY_PREFIX if self.exports else "") + window_key(self.start, self.end)


@dataclass
class BackfillResult:
    windows: list[WindowOutcome] = field(default_factory=list)  # in plan order
    exports: list[WindowOutcome] = field(default_factory=list)  # the CSV exports' windows
    seconds: float = 0.0  # the whole backfill, start to end
    # the window size taken from the backfill this one continued, where not the default
    resumed_window_days: int | None = None
    # scopes that appeared since finished windows were read, by window (`window_scopes`)
    appeared: Appeared = field(default_factory=Appeared)
    # finished windows of the lists whose reconciliation an earlier run left pending
    unreconciled: list[tuple[str, datetime, datetime]] = field(default_factory=list)

    @property
    def every_window(self) -> list[WindowOutcome]:
        return [*self.windows, *self.exports]

    @property
    def partial(self) -> bool:
        return any(w.result is not None and w.result.report.partial for w in self.every_window)

    @property
    def load_ids(self) -> tuple[str, ...]:
        """The ids of the loads the backfill made, window by window."""
        return tuple(i for w in self.every_window if w.result for i in w.result.load_ids)

    def totals(self) -> dict[str, float]:
        """The backfill's duration and waits: wall-clock (at least one thread waiting) and
        summed over every thread."""
        reports = [w.result.report for w in self.every_window if w.result]
        return {
            "duration_seconds": round(self.seconds, 3),
            "wait_seconds_wall": round(waited_wall(reports), 3),
            "wait_seconds_sum": round(sum(r.totals().wait_seconds_sum for r in reports), 3),
        }


class WindowLoads:
    """Backfill windows, each read while the window before it loads in the background
    (`pipelines/runs/background_load.py`); at most one load under way."""

    def __init__(
        self, pipeline: dlt.Pipeline, shown: Progress, total: int, new_file: bool = False
    ) -> None:
        self.pipeline = pipeline
        self.shown = shown
        self.total = total
        # the window whose load runs, the list it ends in, its package and its load
        self.under_way: (
            tuple[WindowOutcome, list[WindowOutcome], ExtractedRun, BackgroundLoad] | None
        ) = None
        # the first window read gives an older version's tables the source column; tables
        # made later are made with it, so later windows need not open DuckDB to ask. A
        # DuckDB file this run creates has no such table: its first opening is then the
        # first window's load's, in the background
        self.adopted = new_file
        self.reads: list[tuple[WindowOutcome, RunReport]] = []  # the windows read, in order

    @property
    def pending(self) -> int:
        """The windows read and not yet landed."""
        return 0 if self.under_way is None else 1

    def read(
        self,
        outcome: WindowOutcome,
        ended: list[WindowOutcome],
        last: bool = True,
        **source_args: Any,
    ) -> None:
        """Read the window of `outcome` into a package; once the window before it landed,
        start loading it (`last`: no window is read after it, while it loads). `ended` gets
        the outcome when it lands."""
        report = RunReport()
        self.shown.watch(report)
        try:
            extracted = extract_run(
                self.pipeline, report, restore=False, settle=False, **source_args
            )
        except BaseException:
            report.finish()
            raise
        self.reads.append((outcome, report))
        self.land()
        normalize_run(extracted, adopt=not self.adopted)
        self.adopted = True
        background = BackgroundLoad(
            self.pipeline, extracted.wait, after_load(extracted), beside_reads=not last
        )
        self.under_way = (outcome, ended, extracted, background)

    def land(self) -> None:
        """Wait for the load under way, if any: its window ends (or its failure is raised)."""
        if self.under_way is None:
            return
        outcome, ended, extracted, background = self.under_way
        self.under_way = None
        report = extracted.report
        try:
            info = background.finish()
            report.load_ids = list(info.loads_ids)
        finally:
            # the window ends when its load, and what followed it in the load's thread, did
            # (while the next window was being read)
            report.finish(at=background.ended)
        outcome.result = LoadResult(info, report, self.pipeline)
        outcome.seconds = report.duration_seconds
        ended.append(outcome)
        self.shown.window_ended(outcome, outcome.index, self.total)


def window_key(start: datetime, end: datetime) -> str:
    return f"{start.isoformat()}/{end.isoformat()}"


def signature(source_args: dict[str, Any]) -> dict[str, Any]:
    """What a finished window covered: a window is done only for the same scopes."""
    return {k: normalise(source_args.get(k)) for k in SIGNATURE_KEYS}


def normalise(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return sorted(str(v) for v in value)
    if isinstance(value, str) and "," in value:
        return sorted(v.strip() for v in value.split(","))
    return value if value is not None else "all"


def finished_windows(pipeline: dlt.Pipeline) -> dict[str, Any]:
    """The windows the pipeline's state records as finished, each with the signatures it was
    finished for (its working folder's state, or the destination's when that is newer)."""
    sources = pipeline.state.get("sources", {})
    resources = sources.get("repo_analytics", {}).get("resources", {})
    return {
        key: [wanted]
        for key, wanted in resources.get(WINDOW_MARKER, {}).get("finished", {}).items()
    }


def plan_windows(
    since: str | datetime, until: str | datetime | None, days: int, now: datetime
) -> list[tuple[datetime, datetime]]:
    start = parse_user_instant("since", since)
    end = parse_user_instant("until", until) if until else now.replace(microsecond=0)
    if start >= end:
        raise ConfigError("since", since, f"a date before until ({end.isoformat()})")
    if not 1 <= days <= 366:
        raise ConfigError("window_days", days, "a number of days from 1 to 366")
    return list(windows(start, end, timedelta(days=days)))


def backfill_passes(
    planned: list[tuple[datetime, datetime]],
    lists: list[str],
    exports: list[str],
    since: str | datetime,
    until: str | datetime | None,
    clock: datetime,
) -> list[tuple[str, list[str], list[tuple[datetime, datetime]]]]:
    """The backfill's passes, each (window key prefix, resource families, windows): the lists
    in `planned`, then the CSV exports in windows of their own."""
    return [
        (key_prefix, families, windows_of)
        for key_prefix, families, windows_of in (
            ("", lists, planned),
            (EXPORTS_KEY_PREFIX, exports, plan_windows(since, until, EXPORT_WINDOW_DAYS, clock)),
        )
        if families
    ]


def resumed_window_days(
    done: dict[str, Any], wanted: dict[str, Any], planned: list[tuple[datetime, datetime]]
) -> int | None:
    """The window size of the backfill this one continues, in whole days: that of the window
    an earlier run finished for the same scopes from the same start, where it ends before the
    range does and is known to be a whole window, not one cut at its run's end: the next
    window was finished too, or it is 92 days long (the default before 122). A rerun with no
    `--window-days` then requests nothing again for the windows that run finished."""
    finished = {}  # start -> end of the lists' windows finished for these scopes
    for key, signatures in done.items():
        first, _, last = key.partition("/")
        if key.startswith(EXPORTS_KEY_PREFIX) or wanted not in signatures:
            continue
        try:
            finished[datetime.fromisoformat(first)] = datetime.fromisoformat(last)
        except ValueError:
            continue
    start, end = planned[0][0], planned[-1][1]
    closed = finished.get(start)
    if closed is None or closed >= end or (closed - start) % timedelta(days=1):
        return None
    days = (closed - start).days
    return days if closed in finished or days == FORMER_WINDOW_DAYS else None


@system_pool_while_running()
def run_backfill(
    pipeline: dlt.Pipeline,
    since: str | datetime,
    until: str | datetime | None,
    window_days: int | None = None,
    progress: Progress | None = None,
    now: datetime | None = None,
    prefetch: StatisticsPrefetch | None = None,
    reconcile: bool = False,
    **source_args: Any,
) -> BackfillResult:
    """Load [since, until) window by window on `pipeline`, skipping the windows an earlier
    run finished. A failure stops the backfill: the windows loaded before it stay recorded,
    and the failure is raised. `prefetch`: the reconciliation's statistics, asked once the
    last window is read, while it loads (`pipelines/reconcile/prefetch.py`). `window_days`:
    None for the window size of the backfill this one resumes (`resumed_window_days`), or
    `DEFAULT_WINDOW_DAYS` where it resumes none. `reconcile`: the caller reconciles the
    windows of the lists after the backfill, and records what it found
    (`pipelines/runs/window_ledger.py`): each window's reconciliation is pending until then.

    A finished window is read again for the scopes that appeared since it was read
    (`pipelines/runs/window_scopes.py`); a window whose reconciliation found a mismatch was
    recorded unfinished, and is read again like any unfinished window.

    CSV exports are read in windows of their own, as long as the API allows (366 days), after
    the other resources' windows: an export answers a whole range in one request, so a
    window per export as long as the lists' would only multiply the requests (a year of the
    medium self-hosted host in quarters: 3,200 user exports instead of 800)."""
    began = time.monotonic()
    clock = now or datetime.now().astimezone()
    days = DEFAULT_WINDOW_DAYS if window_days is None else window_days
    planned = plan_windows(since, until, days, clock)
    settings = run_settings(source_args)
    lists, exports = split_exports(settings)
    passes = backfill_passes(planned, lists, exports, since, until, clock)
    shown = progress or Progress()
    total = sum(len(windows_of) for _, _, windows_of in passes)
    shown.planned(total)  # before finding the finished ones, which can take seconds
    wait = lock_wait(settings)  # for a DuckDB file another process holds
    settle_pending(pipeline, wait)  # a crashed run's packages land (with their window records)
    new_file = restore_state(pipeline, wait)  # a lost working folder: the destination's state
    import_once(pipeline)
    wanted = signature(source_args)
    done = finished_windows(pipeline)
    resumed_days = resumed_window_days(done, wanted, planned) if window_days is None else None
    if resumed_days == days:
        resumed_days = None  # the plan already has that size
    if resumed_days is not None:
        planned = plan_windows(since, until, resumed_days, clock)
        passes = backfill_passes(planned, lists, exports, since, until, clock)
        total = sum(len(windows_of) for _, _, windows_of in passes)
        shown.planned(total)
    # one gate for every window: a 429's Retry-After holds the next window too
    gate = HostGate(int(settings.concurrency or DEFAULT_CONCURRENCY))
    # users of the whole range, found in the lists of every family the backfill reads
    discovery = RangeDiscovery(
        planned[0][0], planned[-1][1], (*lists, *exports), tuple(planned) if lists else ()
    )
    result = BackfillResult(resumed_window_days=resumed_days)
    loads = WindowLoads(pipeline, shown, total, new_file)
    keys = [key_prefix + window_key(*w) for key_prefix, _, windows_of in passes for w in windows_of]
    finished = [
        (key_prefix + window_key(*w), families, *w)
        for key_prefix, families, windows_of in passes
        for w in windows_of
        if wanted in done.get(key_prefix + window_key(*w), ())
    ]
    read_scopes = records(pipeline, READ_SCOPES_KEY)
    if any(key in read_scopes for key, *_ in finished):
        finder = ScopeFinder(source_args, clock, gate, discovery)
        try:
            result.appeared = appeared_scopes(finder, finished, read_scopes)
        except BaseException:
            discovery.close()
            raise
    checks = records(pipeline, RECONCILIATION_KEY)
    to_read = [
        key for key in keys if wanted not in done.get(key, ()) or key in result.appeared.windows
    ]
    result.unreconciled = pending_windows(
        pipeline,
        [(k, start, end) for k, _, start, end in finished if not k.startswith(EXPORTS_KEY_PREFIX)],
        set(to_read),
    )
    # the last window read moves the nightly cursors of every window's scopes in its load
    seeding_key = (
        to_read[-1] if to_read and reaches_clock(planned[-1][1], clock, settings) else None
    )
    try:
        for key_prefix, families, windows_of in passes:
            ended = result.exports if key_prefix else result.windows
            for start, end in windows_of:
                index = len(result.windows) + len(result.exports) + loads.pending + 1
                key = key_prefix + window_key(start, end)
                if key not in to_read:
                    loads.land()  # the windows stay in plan order
                    outcome = WindowOutcome(start, end, True, index=index, exports=bool(key_prefix))
                    ended.append(outcome)
                    shown.window_ended(outcome, index, total)
                    continue
                outcome = WindowOutcome(start, end, False, None, 0.0, index, bool(key_prefix))
                window: dict[str, Any] = {
                    "key": key,
                    "signature": wanted,
                    "reconcile": reconcile and not key_prefix,
                }
                only = result.appeared.only(key)
                if only is not None:
                    window["only"] = only
                outcome.again = again_why(key, result.appeared, checks, only)
                if key == seeding_key and not any(r.partial for _, r in loads.reads):
                    window["seed"] = planned_scopes(r for _, r in loads.reads)
                loads.read(
                    outcome,
                    ended,
                    last=key == to_read[-1],
                    start_date=start.isoformat(),
                    end_date=end.isoformat(),
                    now=clock,
                    backfill_window=window,
                    host_gate=gate,
                    range_discovery=discovery,
                    **{**source_args, "resources": list(families)},
                )
        if prefetch is not None:  # the reconciliation checks the windows of the lists
            prefetch.start([r for outcome, r in loads.reads if not outcome.exports])
    finally:
        try:
            loads.land()  # a failure while reading a window: the window before it lands first
        finally:
            discovery.close()  # a failure: the later slices' parts still under way
    if has_views(pipeline):
        waiting(lambda: create_views(pipeline), wait, VIEWS_LATER)
    result.seconds = time.monotonic() - began
    return result


def again_why(
    key: str, appeared: Appeared, checks: dict[str, Any], only: dict[str, list[str]] | None
) -> str | None:
    """Why a window an earlier run read is read again (`WindowOutcome.again`), or None."""
    if only is not None:
        return "new_users"
    if key in appeared.windows:
        return "new_scopes"
    return "mismatch" if (checks.get(key) or {}).get("verdict") == "mismatch" else None


def planned_scopes(reports: Iterable[RunReport]) -> dict[str, list[str]]:
    """The scopes the runs of `reports` planned, by resource."""
    scopes: dict[str, set[str]] = {}
    for report in reports:
        for name, keys in report.planned.items():
            scopes.setdefault(name, set()).update(keys)
    return {name: sorted(keys) for name, keys in scopes.items()}


def reaches_clock(end: datetime, clock: datetime, settings: RepoAnalyticsConfiguration) -> bool:
    """Whether a backfill ending at `end` reaches the clock: no `--until`, or one within the
    look-back of now (today's date, say), so the first nightly's look-back covers the time
    between the backfill's end and its own."""
    lookback = timedelta(days=float(settings.lookback_days or 0))
    return end >= clock.replace(microsecond=0) - lookback


def split_exports(settings: RepoAnalyticsConfiguration) -> tuple[list[str], list[str]]:
    """The resource families the backfill reads: those in quarter windows, and the CSV
    exports (read in windows of their own), as the edition's endpoint table says."""
    spec = edition_spec(settings.edition)
    chosen = chosen_resources(spec, settings.resources)
    exported = {e.resource for e in spec.endpoints if e.kind == "csv"}
    return ([f for f in chosen if f not in exported], [f for f in chosen if f in exported])
