"""Backfill: a long range in half-open windows, several at once, resumable after a crash.

Each window is one load that reads exactly [start, end) for every scope and records the
window as finished in the same load: a window is finished only once its data is in, a crash
repeats at most the windows it hit, and merge keys make that repeat harmless.

Windows run `parallel` at a time, each on a window pipeline of its own (`<name>_window_<n>`:
dlt runs one load at a time per pipeline, and separate pipelines in separate threads). They
load the same dataset one after another (one lock: a DuckDB file has one writer), share one
gate per host (a 429 holds them all; at most `concurrency` requests are open at once), and
never touch the main pipeline's nightly cursors.
"""

from __future__ import annotations

import itertools
import shutil
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import dlt
from dlt.destinations.exceptions import DatabaseUndefinedRelation

from pipelines.load import (
    LoadResult,
    restore_state,
    run_load,
    settle_pending,
    sibling,
)
from pipelines.progress import Progress
from pipelines.views import create_views
from sources.repo_analytics import WINDOW_MARKER, RunReport
from sources.repo_analytics.client import HostGate
from sources.repo_analytics.dates import parse_user_instant, windows
from sources.repo_analytics.errors import ConfigError
from sources.repo_analytics.report import waited_wall
from sources.repo_analytics.scopes import RangeDiscovery
from sources.repo_analytics.settings import DEFAULT_CONCURRENCY

SIGNATURE_KEYS = ("edition", "base_url", "workspace", "levels", "resources", "projects",
                  "repositories", "users")
DEFAULT_WINDOW_DAYS = 92  # a quarter: each window is a dlt load, ~0.5 s of fixed cost
DEFAULT_PARALLEL_WINDOWS = 2
MAX_PARALLEL_WINDOWS = 8


@dataclass
class WindowOutcome:
    start: datetime
    end: datetime
    resumed: bool  # finished by an earlier run: nothing was requested for it
    result: LoadResult | None = None
    seconds: float = 0.0
    index: int = 0  # the window's place in the plan, from 1


@dataclass
class BackfillResult:
    windows: list[WindowOutcome] = field(default_factory=list)  # in plan order
    seconds: float = 0.0  # the whole backfill, start to end

    @property
    def partial(self) -> bool:
        return any(w.result is not None and w.result.report.partial for w in self.windows)

    def totals(self) -> dict[str, float]:
        """The backfill's duration and waits: wall-clock (at least one thread of any window
        waiting) and summed over every thread."""
        reports = [w.result.report for w in self.windows if w.result]
        return {"duration_seconds": round(self.seconds, 3),
                "wait_seconds_wall": round(waited_wall(reports), 3),
                "wait_seconds_sum": round(sum(r.totals().wait_seconds_sum for r in reports), 3)}


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


def window_pipeline_name(pipeline_name: str, slot: int) -> str:
    return f"{pipeline_name}_window_{slot}"


def window_pipelines(pipeline: dlt.Pipeline, slots: int = MAX_PARALLEL_WINDOWS
                     ) -> list[dlt.Pipeline]:
    """The pipeline and its window pipelines, each with its state restored from the
    destination when its working folder was lost, and a crashed run's packages finished.
    The pipeline is active again afterwards."""
    found = [pipeline]
    settle_pending(pipeline)
    restore_state(pipeline)
    stored = stored_pipelines(pipeline)
    for slot in range(1, slots + 1):
        name = window_pipeline_name(pipeline.pipeline_name, slot)
        known = (Path(pipeline.pipelines_dir) / name).exists()
        if not known and stored is not None and name not in stored:
            continue  # never used, here or elsewhere: nothing to restore or finish
        each = sibling(pipeline, name)
        settle_pending(each)
        restore_state(each)
        if known or each.state.get("sources"):
            found.append(each)
        else:  # never used, here or (restored from the destination) elsewhere
            shutil.rmtree(each.working_dir, ignore_errors=True)
    pipeline.activate()
    return found


def stored_pipelines(pipeline: dlt.Pipeline) -> set[str] | None:
    """Names of the pipelines whose state the destination holds, or None when it cannot
    tell (each window pipeline is then asked; making one costs a tenth of a second). A
    filesystem destination cannot: its SQL view of the dataset may lack the state table."""
    if pipeline.destination.destination_name == "filesystem":
        return None
    try:
        with pipeline.sql_client() as client:
            table = client.make_qualified_table_name("_dlt_pipeline_state")
            rows = client.execute_sql(f"SELECT DISTINCT pipeline_name FROM {table}")
            return {str(name) for (name,) in rows or ()}
    except DatabaseUndefinedRelation:
        return set()  # nothing loaded into this dataset yet
    except Exception:  # noqa: BLE001 - a destination without SQL access: ask each one
        return None


def recorded_windows(pipeline: dlt.Pipeline) -> dict[str, Any]:
    """The windows one pipeline's state records as finished, with their signatures."""
    sources = pipeline.state.get("sources", {})
    resources = sources.get("repo_analytics", {}).get("resources", {})
    return dict(resources.get(WINDOW_MARKER, {}).get("finished", {}))


def finished_windows(pipeline: dlt.Pipeline, slots: int = MAX_PARALLEL_WINDOWS
                     ) -> dict[str, Any]:
    """Windows recorded as finished by the pipeline (sequential backfills of earlier versions)
    or by any of its window pipelines."""
    done: dict[str, Any] = {}
    for each in window_pipelines(pipeline, slots):
        for key, wanted in recorded_windows(each).items():
            done.setdefault(key, []).append(wanted)
    return done


def plan_windows(since: str | datetime, until: str | datetime | None, days: int,
                 now: datetime) -> list[tuple[datetime, datetime]]:
    start = parse_user_instant("since", since)
    end = parse_user_instant("until", until) if until else now.replace(microsecond=0)
    if start >= end:
        raise ConfigError("since", since, f"a date before until ({end.isoformat()})")
    if not 1 <= days <= 366:
        raise ConfigError("window_days", days, "a number of days from 1 to 366")
    return list(windows(start, end, timedelta(days=days)))


@dataclass
class WindowRunner:
    """Loads windows on the calling thread's own window pipeline."""

    pipeline: dlt.Pipeline
    source_args: dict[str, Any]
    wanted: dict[str, Any]
    clock: datetime
    gate: HostGate
    progress: Progress
    discovery: RangeDiscovery  # users of the whole range, known to every window
    load_lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    _slots: Any = field(default_factory=lambda: itertools.count(1))
    _local: threading.local = field(default_factory=threading.local)

    def own_pipeline(self) -> dlt.Pipeline:
        """This thread's window pipeline: dlt binds a pipeline to the thread that made it."""
        mine = getattr(self._local, "pipeline", None)
        if mine is None:
            name = window_pipeline_name(self.pipeline.pipeline_name, next(self._slots))
            mine = self._local.pipeline = sibling(self.pipeline, name)
            self._local.restored = False
        return mine

    def run(self, index: int, start: datetime, end: datetime) -> WindowOutcome | None:
        if self.stopping.is_set():  # another window failed: start nothing new
            return None
        began = time.monotonic()
        key = window_key(start, end)
        report = RunReport()
        self.progress.watch(report)
        try:
            pipeline = self.own_pipeline()
            restore = not self._local.restored  # its first window: state may be elsewhere
            self._local.restored = True
            loaded = run_load(pipeline, start_date=start.isoformat(), restore=restore,
                              end_date=end.isoformat(), now=self.clock,
                              backfill_window={"key": key, "signature": self.wanted},
                              host_gate=self.gate, range_discovery=self.discovery,
                              load_lock=self.load_lock, views=False,
                              report=report, **self.source_args)
        except BaseException:
            self.stopping.set()  # before this thread takes the next window off the queue
            raise
        return WindowOutcome(start, end, False, loaded, time.monotonic() - began, index)


def run_backfill(pipeline: dlt.Pipeline, since: str | datetime, until: str | datetime | None,
                 window_days: int = DEFAULT_WINDOW_DAYS,
                 progress: Progress | None = None, now: datetime | None = None,
                 parallel: int = DEFAULT_PARALLEL_WINDOWS, **source_args: Any
                 ) -> BackfillResult:
    """Load [since, until) window by window, `parallel` windows at once, skipping windows
    an earlier run finished. The first failure stops new windows from starting; the windows
    under way finish and stay recorded, and the failure is raised."""
    if not 1 <= parallel <= MAX_PARALLEL_WINDOWS:
        raise ConfigError("parallel_windows", parallel,
                          f"a number from 1 to {MAX_PARALLEL_WINDOWS}")
    began = time.monotonic()
    clock = now or datetime.now().astimezone()
    planned = plan_windows(since, until, window_days, clock)
    shown = progress or Progress()
    shown.planned(len(planned))  # before finding the finished ones, which can take seconds
    wanted = signature(source_args)
    done = finished_windows(pipeline)
    outcomes: dict[int, WindowOutcome] = {}

    def ended(outcome: WindowOutcome) -> None:
        outcomes[outcome.index] = outcome
        shown.window_ended(outcome, len(outcomes), len(planned))

    todo = []
    for index, (start, end) in enumerate(planned, 1):
        if wanted in done.get(window_key(start, end), ()):
            ended(WindowOutcome(start, end, resumed=True, index=index))
        else:
            todo.append((index, start, end))
    concurrency = int(source_args.get("concurrency") or DEFAULT_CONCURRENCY)
    runner = WindowRunner(pipeline, source_args, wanted, clock, HostGate(concurrency), shown,
                          RangeDiscovery(planned[0][0], planned[-1][1]))
    failure: BaseException | None = None
    with ThreadPoolExecutor(
            max_workers=min(parallel, max(len(todo), 1)),
            thread_name_prefix="backfill-window") as pool:
        pending: set[Future[WindowOutcome | None]] = {
            pool.submit(runner.run, *window) for window in todo}
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    try:
                        outcome = future.result()
                    except Exception as error:  # noqa: BLE001 - raised once all have ended
                        runner.stopping.set()
                        failure = failure or error
                        continue
                    if outcome is not None:
                        ended(outcome)
        except BaseException:  # Ctrl-C: start nothing new; the windows under way finish
            runner.stopping.set()
            raise
    pipeline.activate()
    if failure is not None:
        raise failure
    result = BackfillResult([outcomes[i] for i in sorted(outcomes)], 0.0)
    if not until and not result.partial:
        seed_nightly_cursors(pipeline, result, planned[-1][1], clock, source_args)
    if pipeline.destination.destination_name == "duckdb":
        create_views(pipeline)
    result.seconds = time.monotonic() - began
    return result


def seed_nightly_cursors(pipeline: dlt.Pipeline, result: BackfillResult, end: datetime,
                         clock: datetime, source_args: dict[str, Any]) -> None:
    """A backfill that reached the clock moves the nightly cursors of the scopes its windows
    read up to its end (never back), in one state-only load: the first nightly run then
    reads its look-back, not the 30 days of a first run. Scopes of windows finished by an
    earlier invocation are not known here; their first nightly reads from `start_date`."""
    cursors: dict[str, dict[str, datetime]] = {}
    for window in result.windows:
        if window.result is not None:
            for name, keys in window.result.report.planned.items():
                cursors.setdefault(name, {}).update(dict.fromkeys(keys, end))
    if cursors:
        run_load(pipeline, views=False, now=clock, nightly_cursors=cursors, **source_args)
