"""What one run did, counted as it happens: requests, retries, waits, rows, skips, notes."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any


@dataclass
class ResourceCounts:
    requests: int = 0
    retries: int = 0
    wait_seconds: float = 0.0
    rows: int = 0


@dataclass
class Skip:
    resource: str
    kind: str
    message: str


@dataclass
class RunReport:
    """Thread-safe counters for one run; `status` is clean, partial or the fatal kind."""

    started: float = field(default_factory=time.time)
    counts: dict[str, ResourceCounts] = field(
        default_factory=lambda: defaultdict(ResourceCounts))
    skips: list[Skip] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # [start, end) that every scope of the run read, whatever its cursor: a backfill window,
    # or a nightly run's look-back before its frozen end
    read_range: tuple[datetime, datetime] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _on_skip: list[Callable[[], None]] = field(default_factory=list, repr=False)

    def count_request(self, label: str) -> None:
        with self._lock:
            self.counts[label].requests += 1

    def count_retry(self, label: str, seconds: float) -> None:
        with self._lock:
            entry = self.counts[label]
            entry.retries += 1
            entry.wait_seconds += seconds

    def count_wait(self, label: str, seconds: float) -> None:
        with self._lock:
            self.counts[label].wait_seconds += seconds

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

    def totals(self) -> ResourceCounts:
        with self._lock:
            total = ResourceCounts()
            for entry in self.counts.values():
                total.requests += entry.requests
                total.retries += entry.retries
                total.wait_seconds += entry.wait_seconds
                total.rows += entry.rows
            return total

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            return {
                "duration_seconds": round(time.time() - self.started, 3),
                "window": [t.isoformat() for t in self.read_range] if self.read_range else None,
                "resources": {k: asdict(v) for k, v in sorted(self.counts.items())},
                "skips": [asdict(s) for s in self.skips],
                "notes": list(self.notes),
            }
