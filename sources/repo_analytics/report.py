"""What one run did, counted as it happens: requests, retries, waits, rows, skips, notes.

Waits are kept as intervals on the monotonic clock, so that the time spent waiting can be
told two ways: `wait_seconds_wall`, the wall-clock time during which at least one thread was
waiting (never more than the run took), and `wait_seconds_sum`, every thread's waits added up
(threads held together by one 429 each count the same second).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

Interval = tuple[float, float]  # [start, end) on time.monotonic()


@dataclass
class ResourceCounts:
    requests: int = 0
    retries: int = 0
    wait_seconds_sum: float = 0.0  # every thread's waits added up
    wait_seconds_wall: float = 0.0  # time during which at least one thread waited
    rows: int = 0


def wall_seconds(intervals: Iterable[Interval], now: float | None = None) -> float:
    """The length of the union of `intervals`, each cut at `now` (a wait under way counts
    only as far as it went)."""
    cut = time.monotonic() if now is None else now
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        end = min(end, cut)
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def waited_wall(reports: Iterable[RunReport]) -> float:
    """Wall-clock seconds during which at least one thread of any of `reports` waited."""
    return wall_seconds(i for report in reports for i in report.wait_intervals())


@dataclass
class Skip:
    resource: str
    kind: str
    message: str


@dataclass
class RunReport:
    """Thread-safe counters for one run; `status` is clean, partial or the fatal kind."""

    started: float = field(default_factory=time.time)
    counts: dict[str, ResourceCounts] = field(default_factory=lambda: defaultdict(ResourceCounts))
    skips: list[Skip] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # [start, end) that every scope of the run read, whatever its cursor: a backfill window,
    # or a nightly run's look-back before its frozen end
    read_range: tuple[datetime, datetime] | None = None
    # the scope keys each resource (endpoint and level) was to read in this run
    planned: dict[str, set[str]] = field(default_factory=dict)
    # the ids of the loads that wrote the run's rows (each row's `_dlt_load_id`)
    load_ids: list[str] = field(default_factory=list)
    # where the run's rows come from: their `source` column (`origin.source_identity`)
    source: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _began: float = field(default_factory=time.monotonic, repr=False)
    _ended: float | None = field(default=None, repr=False)
    _waits: dict[str, list[Interval]] = field(default_factory=lambda: defaultdict(list), repr=False)
    _on_skip: list[Callable[[], None]] = field(default_factory=list, repr=False)

    def count_request(self, label: str) -> None:
        with self._lock:
            self.counts[label].requests += 1

    def count_retry(self, label: str, seconds: float) -> None:
        """A retry about to sleep `seconds`, from now."""
        began = time.monotonic()
        with self._lock:
            self.counts[label].retries += 1
            self._add_wait(label, began, seconds)

    def count_wait(self, label: str, seconds: float, began: float | None = None) -> None:
        """A wait of `seconds` that began at `began` (monotonic; default: it just ended)."""
        start = time.monotonic() - seconds if began is None else began
        with self._lock:
            self._add_wait(label, start, seconds)

    def _add_wait(self, label: str, start: float, seconds: float) -> None:
        self.counts[label].wait_seconds_sum += seconds
        self._waits[label].append((start, start + seconds))

    def wait_intervals(self) -> list[Interval]:
        with self._lock:
            return [i for waits in self._waits.values() for i in waits]

    def finish(self, at: float | None = None) -> None:
        """The run ended (at `at`, monotonic; default now): its duration stops there, not
        when the report is written."""
        with self._lock:
            if self._ended is None:
                self._ended = time.monotonic() if at is None else at

    @property
    def duration_seconds(self) -> float:
        """From the start of the run to its end (to now while it runs)."""
        with self._lock:
            return (self._ended if self._ended is not None else time.monotonic()) - self._began

    def count_rows(self, label: str, rows: int) -> None:
        with self._lock:
            self.counts[label].rows += rows

    def skip(self, resource: str, kind: str, message: str) -> None:
        with self._lock:
            self.skips.append(Skip(resource, kind, message))
            callbacks = list(self._on_skip)
        for callback in callbacks:
            callback()

    def on_skip(self, callback: Callable[[], None]) -> None:
        """Call `callback` at every skip of this run, and now if a scope was skipped already."""
        with self._lock:
            self._on_skip.append(callback)
            skipped = bool(self.skips)
        if skipped:
            callback()

    def note(self, text: str) -> None:
        with self._lock:
            self.notes.append(text)

    @property
    def partial(self) -> bool:
        return bool(self.skips)

    def resource_counts(self) -> dict[str, ResourceCounts]:
        """Counts per resource and scope, with their wall-clock waits."""
        with self._lock:
            return {
                label: ResourceCounts(
                    entry.requests,
                    entry.retries,
                    entry.wait_seconds_sum,
                    wall_seconds(self._waits.get(label, ())),
                    entry.rows,
                )
                for label, entry in sorted(self.counts.items())
            }

    def totals(self) -> ResourceCounts:
        total = ResourceCounts()
        for entry in self.resource_counts().values():
            total.requests += entry.requests
            total.retries += entry.retries
            total.wait_seconds_sum += entry.wait_seconds_sum
            total.rows += entry.rows
        total.wait_seconds_wall = wall_seconds(self.wait_intervals())
        return total

    def as_dict(self) -> dict[str, Any]:
        totals, counts, duration = self.totals(), self.resource_counts(), self.duration_seconds
        with self._lock:
            return {
                "duration_seconds": round(duration, 3),
                "wait_seconds_wall": round(totals.wait_seconds_wall, 3),
                "wait_seconds_sum": round(totals.wait_seconds_sum, 3),
                "source": self.source,
                "window": [t.isoformat() for t in self.read_range] if self.read_range else None,
                "resources": {k: rounded(asdict(v)) for k, v in counts.items()},
                "skips": [asdict(s) for s in self.skips],
                "notes": list(self.notes),
                "load_ids": list(self.load_ids),
            }


def rounded(counts: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in counts.items()}
