"""Progress of loads and backfills: live bars on a terminal, plain lines elsewhere.

Live bars are dlt's tqdm progress collector fed from the runs' own counters (windows with
an ETA, rows, requests, retries with the wall-clock seconds waited), refreshed twice a second;
while they are shown, dlt's log lines are written above them rather than through them (tqdm's
`logging_redirect_tqdm`). Plain mode (not a terminal, e.g. cron or CI logs) prints one line
per finished window.
"""

from __future__ import annotations

import logging
import shutil
import sys
import threading
import time
from contextlib import ExitStack
from datetime import datetime
from typing import Any

from sources.repo_analytics.report import ResourceCounts, RunReport, waited_wall

PROGRESS_MODES = ("auto", "on", "off")
TICK_SECONDS = 0.5


class Progress:
    """Nothing shown: what `--progress off` gets."""

    def planned(self, windows: int) -> None:
        """A backfill's number of windows, known once they are planned."""

    def watch(self, report: RunReport) -> None:
        """A run under way, whose counters the display follows."""

    def window_ended(self, outcome: Any, ended: int, total: int) -> None:
        """A backfill window loaded (or found finished earlier); `ended` of `total` so far."""

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class WindowLines(Progress):
    """One line per window: rows, requests, retries, waits, time, and an ETA."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.loaded = 0

    def say(self, text: str) -> None:
        print(text, flush=True)

    def window_ended(self, outcome: Any, ended: int, total: int) -> None:
        span = f"[{bound(outcome.start)} .. {bound(outcome.end)})"
        head = f"window {outcome.index}/{total} {span}"
        what = "; the CSV exports" if getattr(outcome, "exports", False) else ""
        if outcome.resumed:
            self.say(f"{head}: finished earlier, skipped{what}")
            return
        self.loaded += 1
        elapsed = time.monotonic() - self.began
        eta = elapsed / self.loaded * (total - ended)
        totals = outcome.result.report.totals()
        self.say(
            f"{head}: {totals.rows} rows, {totals.requests} requests, {totals.retries} "
            f"retries, {totals.wait_seconds_wall:.1f} s waited, {outcome.seconds:.1f} s; "
            f"elapsed {elapsed:.0f} s, ETA {eta:.0f} s{what}"
        )
        for skip in outcome.result.report.skips:  # exit 3: the skipped scopes, listed
            self.say(f"  skipped {skip.resource}: {skip.kind}: {skip.message}")


class LiveBars(WindowLines):
    """dlt's tqdm collector on the terminal, fed by a ticker thread; window lines and dlt's
    log lines above it. dlt's logging is set up first (a pipeline made): the redirect gives
    the lines the format of the handler it stands in for, and puts that handler back after."""

    def __init__(self, step: str) -> None:
        super().__init__()
        from dlt.common.runtime.collector import TqdmCollector

        self.collector = TqdmCollector(dynamic_ncols=True)(step)
        self.reports: list[RunReport] = []
        self.shown = ResourceCounts()
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.ticker = threading.Thread(target=self.tick, name="progress", daemon=True)
        self.shown_until = ExitStack()  # what __exit__ undoes

    def __enter__(self) -> LiveBars:
        from tqdm.contrib.logging import logging_redirect_tqdm

        self.collector.__enter__()
        self.shown_until.callback(self.bars_closed)
        for name in ("rows", "requests", "retries"):
            self.collector.update(name, 0)
        self.shown_until.enter_context(logging_redirect_tqdm([logging.getLogger("dlt")]))
        self.ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.ticker.join()
        self.refresh()
        self.shown_until.close()

    def bars_closed(self) -> None:
        """Close the bars, and bring the cursor back to the start of its line. tqdm clears a
        bar below the first by writing blanks over it and moving up, which leaves the cursor
        where the blanks ended: the next line printed would start there (a bar as wide as
        the terminal: at its last column, breaking the line's first letter off)."""
        self.collector.__exit__(None, None, None)  # type: ignore[arg-type]
        sys.stderr.write("\r")  # where tqdm draws its bars
        sys.stderr.flush()

    def planned(self, windows: int) -> None:
        with self.lock:
            self.collector.update("windows", 0, total=windows)

    def watch(self, report: RunReport) -> None:
        with self.lock:
            self.reports.append(report)

    def say(self, text: str) -> None:
        from tqdm import tqdm

        with self.lock:
            tqdm.write(text, file=sys.stdout)

    def window_ended(self, outcome: Any, ended: int, total: int) -> None:
        super().window_ended(outcome, ended, total)
        with self.lock:
            self.collector.update("windows", 1)

    def tick(self) -> None:
        while not self.done.wait(TICK_SECONDS):
            self.refresh()

    def refresh(self) -> None:
        with self.lock:
            now = ResourceCounts()
            for report in self.reports:
                totals = report.totals()
                now.rows += totals.rows
                now.requests += totals.requests
                now.retries += totals.retries
            now.wait_seconds_wall = waited_wall(self.reports)
            self.collector.update("rows", now.rows - self.shown.rows)
            self.collector.update("requests", now.requests - self.shown.requests)
            # seconds waited are a figure, not a rate: shown after the retries that caused them
            self.collector.update(
                "retries",
                now.retries - self.shown.retries,
                message=f"waited {now.wait_seconds_wall:.1f} s",
            )
            self.shown = now


def bound(moment: datetime) -> str:
    """A window bound as its date when it is at midnight, else with its time of day."""
    if moment.time() == datetime.min.time():
        return moment.date().isoformat()
    return moment.isoformat(timespec="seconds" if moment.second else "minutes")


def make_progress(mode: str, step: str) -> Progress:
    """`on`: live bars; `off`: nothing; `auto`: bars on a sized terminal, else (backfills)
    one line per window."""
    # a terminal of zero columns (a pseudo-terminal nobody sized) would show no bar at all
    terminal = (
        sys.stdout.isatty() and sys.stderr.isatty() and shutil.get_terminal_size((0, 0)).columns > 0
    )
    live = mode == "on" or (mode == "auto" and terminal)
    if live:
        return LiveBars(step)
    if mode == "off":
        return Progress()
    return WindowLines()
