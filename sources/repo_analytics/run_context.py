"""What a pipeline of ours hands the source for one run, besides the settings.

The settings are a user's (`RepoAnalyticsConfiguration`, from `.dlt/`, the environment or the
source's keyword arguments); these are the pipelines' own plumbing, never config keys: a user's
`dlt.pipeline(...).run(repo_analytics())` leaves them all at their defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .client.transport import HostGate
from .reading.scopes import RangeDiscovery
from .report import RunReport


@dataclass
class RunContext:
    """One run's plumbing.

    Attributes:
        report: where the run's counts and skips are recorded.
        now: the clock, for tests and the demo; the wall clock otherwise.
        backfill_window: set by the backfill: `{"key": ..., "signature": {...}}`. The run
            reads exactly [start_date, end_date) without touching the nightly cursors, and
            records the window as finished in the same load, with the scopes it read. The
            last window of a backfill that reaches the clock also has `"seed": {resource:
            [scope keys]}`, the scopes of its earlier windows: with its own, their nightly
            cursors move up to `end_date` in the same load, unless a scope is skipped.
            `"only": {level: [scope keys]}`: a finished window read again for these scopes
            alone (they appeared since). `"reconcile": true`: the window's reconciliation is
            to follow the backfill, and is recorded as pending until it did
            (`pipelines/runs/window_ledger.py`).
        merge_strategy: `upsert` where the destination has no delete-insert (Delta tables on
            a filesystem); dlt's default otherwise.
        host_gate: one gate shared by a backfill's windows running at once, so 429 waits and
            the `concurrency` bound on open requests hold across all of them.
        range_discovery: users discovered once over a backfill's whole range, read by every
            window (a window's own lists miss users active in it only under alias e-mails).
    """

    report: RunReport = field(default_factory=RunReport)
    now: datetime | None = None
    backfill_window: dict[str, Any] | None = None
    merge_strategy: str | None = None
    host_gate: HostGate | None = None
    range_discovery: RangeDiscovery | None = None


RUN_KEYS = tuple(RunContext.__dataclass_fields__)  # the pipelines' keys of a run's arguments
