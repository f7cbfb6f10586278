"""Backfill: a long range in half-open windows, each its own load, resumable after a crash.

Each window is one pipeline run that reads exactly [start, end) for every scope (scopes in
parallel, sharing one client and so one rate limiter per host) and records the window as
finished in the same load: a window is finished only once its data is in, a crash repeats at
most the window it hit, and merge keys make that repeat harmless. Windows run one after
another: one DuckDB file has one writer, and one dlt pipeline one run at a time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import dlt

from pipelines.load import LoadResult, run_load
from sources.repo_analytics import WINDOW_MARKER
from sources.repo_analytics.dates import parse_user_instant, windows
from sources.repo_analytics.errors import ConfigError

SIGNATURE_KEYS = ("edition", "base_url", "workspace", "levels", "resources", "projects",
                  "repositories", "users")
DEFAULT_WINDOW_DAYS = 30


@dataclass
class WindowOutcome:
    start: datetime
    end: datetime
    resumed: bool  # finished by an earlier run: nothing was requested for it
    result: LoadResult | None = None
    seconds: float = 0.0


@dataclass
class BackfillResult:
    windows: list[WindowOutcome] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        return any(w.result is not None and w.result.report.partial for w in self.windows)


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
    """Windows recorded as finished in the pipeline's state (restored from the destination
    when the working folder was lost). A crashed run's pending packages are dropped first:
    extract already wrote their window into the local state, but their data is not loaded."""
    if pipeline.has_pending_data:
        pipeline.abort_packages()
    try:
        pipeline.sync_destination()
    except Exception:  # noqa: BLE001 - a first run has nothing to restore
        pass
    sources = pipeline.state.get("sources", {})
    resources = sources.get("repo_analytics", {}).get("resources", {})
    return dict(resources.get(WINDOW_MARKER, {}).get("finished", {}))


def plan_windows(since: str | datetime, until: str | datetime | None, days: int,
                 now: datetime) -> list[tuple[datetime, datetime]]:
    start = parse_user_instant("since", since)
    end = parse_user_instant("until", until) if until else now.replace(microsecond=0)
    if start >= end:
        raise ConfigError("since", since, f"a date before until ({end.isoformat()})")
    if not 1 <= days <= 366:
        raise ConfigError("window_days", days, "a number of days from 1 to 366")
    return list(windows(start, end, timedelta(days=days)))


def run_backfill(pipeline: dlt.Pipeline, since: str | datetime, until: str | datetime | None,
                 window_days: int = DEFAULT_WINDOW_DAYS,
                 progress: Callable[[WindowOutcome, int, int], None] | None = None,
                 now: datetime | None = None, **source_args: Any) -> BackfillResult:
    """Load [since, until) window by window, skipping windows an earlier run finished."""
    clock = now or datetime.now().astimezone()
    planned = plan_windows(since, until, window_days, clock)
    done = finished_windows(pipeline)
    wanted = signature(source_args)
    result = BackfillResult()
    for index, (start, end) in enumerate(planned, 1):
        key = window_key(start, end)
        if done.get(key) == wanted:
            outcome = WindowOutcome(start, end, resumed=True)
        else:
            began = time.monotonic()
            loaded = run_load(pipeline, start_date=start.isoformat(), end_date=end.isoformat(),
                              now=clock, backfill_window={"key": key, "signature": wanted},
                              **source_args)
            outcome = WindowOutcome(start, end, False, loaded, time.monotonic() - began)
        result.windows.append(outcome)
        if progress is not None:
            progress(outcome, index, len(planned))
    return result
