"""What reconciliation finds, kept in the pipeline's state so that the next run repairs it.

A backfill window is finished only once it reconciles. Its own load records it finished and,
when the backfill is to be reconciled, its reconciliation as pending (with the count of its
reads: `window_marker` in the source); after the reconciliation, one state-only load of the
pipeline (dlt's `managed_state`, then normalize and load, as `reset` does) settles each
window read:

- no mismatch: the pending record goes;
- a mismatch: the window is recorded unfinished, so the plain rerun reads it again, and
  reconciles it again (`verdict: mismatch`, with the measure that differed);
- a mismatch after `MOST_READS` reads: a host consistently inconsistent. The window stays
  finished and is not read again (`verdict: given_up`); the run says so in one line and
  exits 5 like any mismatch.

A window whose reconciliation never ran (the run stopped before it, or the destination could
not be read back) stays pending: the next backfill reconciles it with the windows it reads.

A nightly `load` whose reconciliation finds a mismatch holds every cursor the run read at
the start of the range it reconciled (`hold_cursors`), so the next run reads that range
again whatever its look-back; the range of each run is its own look-back, so a host that
keeps mismatching does not widen the reads night after night and needs no bound.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime
from typing import Any, Final, cast

import dlt

from pipelines.destinations.duckdb.file import waiting
from pipelines.destinations.warehouse import exclusive_load
from sources.repo_analytics import (
    FINISHED_KEY,
    READ_SCOPES_KEY,
    RECONCILIATION_KEY,
    WINDOW_MARKER,
    RunReport,
)
from sources.repo_analytics.reading.scopes import CURSOR_STATE_KEY, SCOPES_STATE_KEY

# the most times a window is read while its reconciliation keeps finding a mismatch
MOST_READS: Final = 3
LEDGER_KEPT: Final = (
    "the data is loaded; what the reconciliation found is kept and lands on the next run"
)
SOURCE_NAME: Final = "repo_analytics"

Window = tuple[str, datetime, datetime]  # key, start, end


@dataclass
class WindowVerdict:
    """What the reconciliation made of one window the backfill read (or left pending)."""

    key: str
    start: datetime
    end: datetime
    verdict: str  # passed | mismatch (read again) | given_up (kept, not read again)
    reads: int
    measure: str | None = None  # the first difference: repository, measure, API and landed

    def line(self) -> str | None:
        """The summary's line for the window; None when it passed."""
        span = f"window [{self.start.isoformat()} .. {self.end.isoformat()})"
        if self.verdict == "mismatch":
            return (
                f"{span} differs from the API's statistics ({self.measure}): recorded "
                f"unfinished, the next backfill reads it again (read {self.reads} of at most "
                f"{MOST_READS})"
            )
        if self.verdict == "given_up":
            return (
                f"{span} still differs from the API's statistics after {self.reads} reads "
                f"({self.measure}): the host's lists disagree with its own statistics; the "
                "window is kept as it is and not read again (`repo-analytics reset "
                "--resource backfill_windows --windows` forgets the finished windows)"
            )
        return None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "start": self.start.isoformat(), "end": self.end.isoformat()}


def marker_state(pipeline: dlt.Pipeline) -> dict[str, Any]:
    """The window marker's state: finished windows, the scopes each read, reconciliations."""
    sources = pipeline.state.get("sources", {})
    resources = sources.get(SOURCE_NAME, {}).get("resources", {})
    return dict(resources.get(WINDOW_MARKER, {}))


def records(pipeline: dlt.Pipeline, name: str) -> dict[str, Any]:
    """One of the marker's records (`FINISHED_KEY`, `READ_SCOPES_KEY`, `RECONCILIATION_KEY`)
    by window key."""
    return dict(marker_state(pipeline).get(name) or {})


def ran(check: Any) -> bool:
    """Whether a reconciliation compared anything (not switched off, not `not run`)."""
    return check is not None and bool(check.checked or check.rows_written)


def window_label(start: datetime, end: datetime) -> str:
    """A window as the reconciliation's differences name it."""
    return f"{start.date()}..{end.date()}"


def differences_by_window(
    differences: Iterable[Any], windows: list[Window]
) -> dict[str, list[Any]]:
    """The mismatches of each window: those the reconciliation named by the window, and those
    of a statistics period (named by its UTC dates) that overlaps the window."""
    labels = {window_label(start, end): key for key, start, end in windows}
    found: dict[str, list[Any]] = {key: [] for key, _, _ in windows}
    for difference in differences:
        if difference.verdict != "mismatch":
            continue
        key = labels.get(difference.window)
        if key is not None:
            found[key].append(difference)
            continue
        first, _, last = difference.window.partition("..")
        try:
            low = datetime.combine(date.fromisoformat(first), datetime.min.time(), UTC)
            high = datetime.combine(date.fromisoformat(last), datetime.min.time(), UTC)
        except ValueError:
            continue
        for key, start, end in windows:
            if start < high and end > low:
                found[key].append(difference)
    return found


def measure_text(difference: Any) -> str:
    return (
        f"{difference.repository} {difference.measure}: API {difference.api}, "
        f"landed {difference.landed}"
    )


def commit_state(
    pipeline: dlt.Pipeline, change: Callable[[dict[str, Any]], bool], wait: float
) -> bool:
    """Change the source's resource states (`change` returns whether it changed anything) and
    load the change, a state-only load, so the destination's copy has it too (a fresh
    machine restores it). Under the dataset's load lock (a warehouse other processes load
    into); a DuckDB file another process holds is waited for (`wait`)."""
    with exclusive_load(pipeline):
        with pipeline.managed_state(extract_state=True) as state:
            sources = cast(dict[str, Any], state).setdefault("sources", {})
            resources = sources.setdefault(SOURCE_NAME, {}).setdefault("resources", {})
            changed = change(resources)
        if changed:
            pipeline.normalize()
            waiting(pipeline.load, wait, LEDGER_KEPT)
    return changed


def settle_windows(
    pipeline: dlt.Pipeline, windows: list[Window], check: Any, wait: float
) -> list[WindowVerdict]:
    """Record what the reconciliation `check` found in each of `windows` (those it compared:
    read by the run, or pending from an earlier one), in one state-only load; the verdicts.
    A window not finished (a scope skipped) or not pending is left alone; a reconciliation
    that did not run leaves every window pending."""
    if not ran(check):
        return []
    found = differences_by_window(check.differences, windows)
    verdicts: list[WindowVerdict] = []

    def change(resources: dict[str, Any]) -> bool:
        marker = resources.get(WINDOW_MARKER) or {}
        finished = marker.get(FINISHED_KEY) or {}
        checks = marker.get(RECONCILIATION_KEY) or {}
        for key, start, end in windows:
            entry = checks.get(key)
            if key not in finished or entry is None:
                continue
            reads = int(entry.get("reads", 0))
            if not found[key]:
                checks.pop(key)
                verdicts.append(WindowVerdict(key, start, end, "passed", reads))
                continue
            measure = measure_text(found[key][0])
            verdict = "given_up" if reads >= MOST_READS else "mismatch"
            checks[key] = {"reads": reads, "verdict": verdict, "measure": measure}
            if verdict == "mismatch":  # unfinished: the next backfill reads it again
                finished.pop(key)
                (marker.get(READ_SCOPES_KEY) or {}).pop(key, None)
            verdicts.append(WindowVerdict(key, start, end, verdict, reads, measure))
        return bool(verdicts)

    commit_state(pipeline, change, wait)
    return verdicts


def pending_windows(
    pipeline: dlt.Pipeline, finished: Iterable[Window], read: set[str]
) -> list[Window]:
    """Of `finished` windows (of the lists), those an earlier run read and whose
    reconciliation is still pending; the ones this run read (`read`) aside."""
    checks = records(pipeline, RECONCILIATION_KEY)
    return [
        (key, start, end)
        for key, start, end in finished
        if key not in read and (checks.get(key) or {}).get("verdict") == "pending"
    ]


def given_up_windows(pipeline: dlt.Pipeline) -> dict[str, str]:
    """The windows kept as they are after mismatching `MOST_READS` reads: by window key,
    a line naming the measure."""
    checks = records(pipeline, RECONCILIATION_KEY)
    return {
        key: f"window {key} (read {entry.get('reads')} times): {entry.get('measure')}"
        for key, entry in sorted(checks.items())
        if entry.get("verdict") == "given_up"
    }


def hold_cursors(pipeline: dlt.Pipeline, report: RunReport, check: Any, wait: float) -> int:
    """A nightly whose reconciliation found a mismatch: the cursors of every scope the run
    read move back to the start of the range it reconciled (none moves forward), in one
    state-only load, so the next run reads that range again; how many were held."""
    if not ran(check) or check.ok or report.read_range is None:
        return 0
    start = report.read_range[0].astimezone(UTC)
    held = 0

    def change(resources: dict[str, Any]) -> bool:
        nonlocal held
        for name, keys in report.planned.items():
            scopes = (resources.get(name) or {}).get(SCOPES_STATE_KEY) or {}
            for key in keys:
                state = scopes.get(key) or {}
                value = state.get(CURSOR_STATE_KEY)
                if not isinstance(value, datetime):
                    continue
                naive = value.tzinfo is None
                if (value.replace(tzinfo=UTC) if naive else value) > start:
                    state[CURSOR_STATE_KEY] = start.replace(tzinfo=None) if naive else start
                    held += 1
        return held > 0

    commit_state(pipeline, change, wait)
    return held
