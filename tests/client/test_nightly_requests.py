"""What a nightly with nothing new asks the host: each scope and endpoint once, plus what
the look-back makes necessary, counted in the simulator's request log.

The small cloud host's year is backfilled, then the nightly load (what `repo-analytics load`
runs) twice with the simulator's clock unchanged (nothing new), default settings: the first
alone, the second followed by the reconciliation the command runs after it. Every expected
request is derived from the simulator's ground truth and the documented defaults (README:
the look-back of 3 days, monthly statistics), never from extractor code:

- one request per scope and endpoint (one page each: nothing new), the user directory once
  (discovery shares it and the top-level lists with the resources);
- the statistics refresh: a pull request updated within the look-back but created in an
  older month changes that month's statistics (counted by creation period and current
  state), so that month is asked again for each scope holding such a pull request;
- reconciliation (the second run): one top-level pull-request statistics request for the
  window, and one commit statistics request per repository (the cloud edition has commit
  statistics at repository level only).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pipelines.reconcile.check import reconcile_pipeline
from pipelines.reconcile.model import read_windows
from pipelines.runs.backfill import run_backfill
from pipelines.runs.load import run_load
from simulator import Simulator
from tests.support import FIXED_NOW
from tests.support.helpers import period_floor
from tests.support.loader import Loader

MakeSim = Callable[..., Simulator]
LOOKBACK = timedelta(days=3)  # README: lookback_days defaults to 3
YEAR = timedelta(days=366)
# the endpoints a cloud scope of each level is read by, default settings
ENDPOINTS = {
    "workspace": (
        "commits.list.workspace",
        "pull-requests.list.workspace",
        "pull-requests.statistics.workspace",
    ),
    "repository": (
        "commits.list.repository",
        "pull-requests.list.repository",
        "commits.changes-statistics.repository",
        "pull-requests.statistics.repository",
    ),
    "user": (
        "commits.list.user",
        "pull-requests.list.user",
        "pull-requests.statistics.user.short",
    ),
}
DIRECTORY = "users.list.short"


def instant(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def refreshed(sim: Simulator, clock: datetime) -> Counter[str]:
    """The statistics refresh by endpoint: per scope, the months before the statistics' own
    look-back in which pull requests updated within the look-back were created."""
    horizon = period_floor(clock - LOOKBACK, "month")
    slugs = {u["_sim"]["slug"] for u in sim.truth("users")}
    months: set[tuple[str, str, datetime]] = set()
    for pr in sim.truth("pull-requests"):
        facts = pr["_sim"]
        created = period_floor(instant(facts["created_ms"]), "month")
        if not clock - LOOKBACK <= instant(facts["updated_ms"]) < clock or created >= horizon:
            continue
        months.add(("pull-requests.statistics.workspace", "", created))
        slug = pr["destination"]["repository"]["slug"]
        months.add(("pull-requests.statistics.repository", slug, created))
        if facts["user"] in slugs:
            months.add(("pull-requests.statistics.user.short", facts["user"], created))
    return Counter(endpoint for endpoint, _, _ in months)


@pytest.mark.slow
def test_a_nightly_with_nothing_new_asks_each_scope_and_endpoint_once(
    make_sim: MakeSim, tmp_path: Path
) -> None:
    # a week into a month: pull requests updated within the look-back, created the month before
    sim = make_sim(edition="cloud", size="small", now=FIXED_NOW + 6 * 24 * 3600)
    clock = datetime.fromtimestamp(sim.info()["now"], UTC)
    loader = Loader(sim, tmp_path)
    defaults = loader.source_args(start_date=None)
    backfill = {k: v for k, v in defaults.items() if k not in ("start_date", "now")}
    assert not run_backfill(loader.pipeline(), clock - YEAR, clock, now=clock, **backfill).partial
    repositories, users = len(sim.truth("repositories")), len(sim.truth("users"))
    pairs = Counter({DIRECTORY: 1})
    for level, count in (("workspace", 1), ("repository", repositories), ("user", users)):
        pairs.update({endpoint: count for endpoint in ENDPOINTS[level]})
    refresh = refreshed(sim, clock)
    assert refresh, "no pull request of the look-back was created before its month"

    sim.reset_requests()
    first = run_load(loader.pipeline(), **defaults)
    log = sim.requests()["log"]

    assert first.report.totals().rows > 0  # the look-back, read again
    assert Counter(e["endpoint"] for e in log) == pairs + refresh
    assert len(log) == sum(pairs.values()) + sum(refresh.values())
    assert len({(e["path"], str(sorted(e["params"].items()))) for e in log}) == len(log)
    assert {e["status"] for e in log} == {200}

    sim.reset_requests()
    second = run_load(loader.pipeline(), **defaults)
    check = reconcile_pipeline(
        loader.pipeline(), read_windows([second.report]), defaults, second.load_ids
    )
    again = sim.requests()["log"]

    assert check.ok and check.checked > 0
    reconciliation = Counter(
        {"pull-requests.statistics.workspace": 1, "commits.changes-statistics.repository": 1}
    )
    reconciliation["commits.changes-statistics.repository"] = repositories
    assert Counter(e["endpoint"] for e in again) == pairs + refresh + reconciliation
    by_update = [
        e["endpoint"]
        for e in again
        if "statistics" in e["endpoint"] and e["params"].get("date_type") == "updated"
    ]
    assert by_update == ["pull-requests.statistics.workspace"]  # the window, at the top level
