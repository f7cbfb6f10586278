"""A backfill's reconciliation statistics, asked while its last window loads
(`pipelines/reconcile/prefetch.py`), are the very questions the reconciliation asks without
them: the same requests, each once, the same verdict.

Real simulators over HTTP, a real DuckDB file; the questions are the simulator's request log.
An earlier backfill leaves repositories in the tables that the tested backfill does not read
(they are quiet in its range): the reconciliation asks for those itself.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pipelines.reconcile.check import reconcile_pipeline
from pipelines.reconcile.prefetch import StatisticsPrefetch
from pipelines.runs.backfill import run_backfill
from simulator import Simulator
from tests.runs.test_backfill import log_since
from tests.support.loader import Loader

# (edition, resource families, days in windows of a day; 0: a day some repository is quiet)
CASES = [
    ("cloud", ["commits", "pull_requests"], 4),
    ("cloud", ["commits"], 0),
    ("server", ["commits", "pull_requests"], 4),
]


def statistics_asked(sim: Simulator, serial: int) -> Counter[tuple[str, str]]:
    """The statistics requests since `serial`, by path and parameters."""
    return Counter(
        (entry["path"], json.dumps(entry["params"], sort_keys=True))
        for entry in log_since(sim, serial)
        if "statistics" in entry["endpoint"]
    )


def quiet_day(sim: Simulator, clock: datetime) -> datetime:
    """The start of the newest day before `clock` in which, with two days' margin either
    side (a window's discovery reads from a day before its start), some repository of the
    simulator's ground truth has no commit."""
    dates: dict[str, list[datetime]] = {}
    for commit in sim.truth("commits"):
        when = datetime.fromisoformat(commit["date"]).replace(tzinfo=UTC)
        dates.setdefault(commit["repository"]["slug"], []).append(when)
    day = clock.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=3)
    for _ in range(60):
        margin = (day - timedelta(days=2), day + timedelta(days=3))
        if any(not any(margin[0] <= d < margin[1] for d in ds) for ds in dates.values()):
            return day
        day -= timedelta(days=1)
    raise AssertionError("no day with a quiet repository in the simulator's last 60 days")


def repository_of(path: str) -> str:
    parts = path.split("/")
    return parts[parts.index("repos") + 1]


@pytest.mark.parametrize(("edition", "resources", "days"), CASES)
def test_statistics_asked_ahead_are_the_reconciliations_own_questions(
    edition: str,
    resources: list[str],
    days: int,
    make_sim: Callable[..., Simulator],
    tmp_path: Path,
) -> None:
    sim = make_sim(edition=edition)
    loader = Loader(sim, tmp_path)
    args = loader.source_args(levels=["repository"], resources=resources)
    args.pop("start_date")
    clock: datetime = args.pop("now")
    start = quiet_day(sim, clock) if days == 0 else clock - timedelta(days=days)
    end = start + timedelta(days=days or 1)
    pipeline = loader.pipeline()
    earlier = run_backfill(pipeline, clock - timedelta(days=90), start, 30, now=clock, **args)
    assert earlier.windows and not earlier.partial

    prefetch = StatisticsPrefetch(dict(args))
    serial = sim.requests()["total"]
    try:
        result = run_backfill(pipeline, start, end, 1, now=clock, prefetch=prefetch, **args)
        assert len(result.windows) == (days or 1) and not result.partial
        reports = [w.result.report for w in result.windows if w.result]
        windows = sorted({r.read_range for r in reports if r.read_range})
        run_loads = frozenset(result.load_ids)
        ahead = reconcile_pipeline(pipeline, windows, args, run_loads, prefetch)
    finally:
        prefetch.close()
    asked_ahead = statistics_asked(sim, serial)

    serial = sim.requests()["total"]
    plain = reconcile_pipeline(pipeline, windows, args, run_loads)
    asked_plain = statistics_asked(sim, serial)

    assert ahead.ok and ahead.checked > 0, ahead.as_dict()
    assert ahead.as_dict() == plain.as_dict()
    assert asked_plain and asked_ahead == asked_plain
    assert max(asked_ahead.values()) == 1
    if edition == "cloud":
        # zone-less commit dates: every repository of the tables is asked per window, those
        # this backfill did not read (quiet in its range) as well
        read = {key for r in reports for key in r.planned.get("commits.repository", ())}
        landed = {
            slug for (slug,) in loader.rows("SELECT DISTINCT repository_slug FROM cloud_commits")
        }
        assert read and read <= landed
        if resources == ["commits"]:
            assert landed - read, "no repository quiet in the range: nothing unforeseen"
        asked = Counter(repository_of(path) for path, _ in asked_ahead if "/repos/" in path)
        assert asked == dict.fromkeys(landed, len(windows))
    else:
        # zoned dates: each window is confirmed at the top level, no repository asked
        assert all("/repos/" not in path for path, _ in asked_ahead)
        assert ahead.windows_confirmed == 2 * len(windows)
