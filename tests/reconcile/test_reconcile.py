"""Reconciliation of the repository-level statistics tables: only rows the run did not write
are asked for again.

A statistics row a run wrote is the API's answer for that row's scope and period, read by
the run itself (`_dlt_load_id` is one of the run's loads): asking for it again is a repeat.
A row of an earlier load in a checked window can be stale, and is asked for and compared.

Real simulators over HTTP; which rows are whose comes from the dataset's `_dlt_load_id`
column and the runs' `LoadInfo`, what was asked for from the simulator's request log.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pipelines.reconcile.check import reconcile_pipeline
from simulator import Simulator
from tests.runs.test_backfill import cli_env, dated, log_since, query, run_cli
from tests.support.loader import DESTINATIONS, Loader

VERDICT = "reconciliation with the API's statistics: "


@dataclass(frozen=True)
class StatisticsTable:
    """A repository-level statistics table, the endpoint that answers its rows (as the
    simulator's request log names it) and the number of measures compared per row."""

    table: str
    scope_column: str
    level_column: bool  # the table holds several levels: keep the repository rows
    measures: int


STATISTICS: dict[str, dict[str, StatisticsTable]] = {
    "cloud": {
        "pull-requests.statistics.repository": StatisticsTable(
            "cloud_pull_request_statistics", "scope", True, 5
        ),
        "commits.changes-statistics.repository": StatisticsTable(
            "cloud_commit_change_statistics", "repository_slug", False, 3
        ),
    },
    "server": {
        "pull-requests.statistics.repository": StatisticsTable(
            "server_pull_request_statistics", "scope", True, 4
        ),
        "commits.statistics.repository": StatisticsTable(
            "server_commit_statistics", "scope", True, 3
        ),
    },
}
RESOURCES = {
    "cloud": ["pull_request_statistics", "change_statistics"],
    "server": ["pull_request_statistics", "commit_statistics"],
}
# Daily rows, an explicit choice (the default is month): many rows of a window, some written
# by the run's look-back and some only by the earlier load.
GRAIN = "day"

RowKey = tuple[str, str, datetime]  # (endpoint, repository scope, period_start)


def clock_of(sim: Simulator) -> datetime:
    return datetime.fromtimestamp(sim.info()["now"], UTC)


def scope_of(path: str) -> str:
    """The repository scope a request's path names, as the tables store it: the cloud slug,
    the self-hosted `KEY/slug`."""
    parts = path.split("/")
    slug = parts[parts.index("repos") + 1]
    if "projects" in parts:
        return f"{parts[parts.index('projects') + 1]}/{slug}"
    return slug


def asked(log: list[dict[str, Any]], edition: str) -> Counter[RowKey]:
    """The repository-level statistics requests of `log`, by endpoint, scope and since."""
    found: Counter[RowKey] = Counter()
    for entry in log:
        if entry["endpoint"] in STATISTICS[edition]:
            span = dated(entry)
            assert span is not None, entry
            found[(entry["endpoint"], scope_of(entry["path"]), span[0])] += 1
    return found


def stored(
    rows: Callable[[str], list[tuple[Any, ...]]],
    edition: str,
    window: tuple[datetime, datetime] | None = None,
) -> dict[RowKey, str | None]:
    """The stored repository-level daily rows (overlapping `window`, when given), each with
    the id of the load that wrote it."""
    found: dict[RowKey, str | None] = {}
    for endpoint, t in STATISTICS[edition].items():
        level = " AND level = 'repository'" if t.level_column else ""
        for scope, start, end, load_id in rows(
            f'SELECT "{t.scope_column}", period_start, period_end, _dlt_load_id '
            f"FROM {t.table} WHERE period = '{GRAIN}'{level}"
        ):
            start, end = start.astimezone(UTC), end.astimezone(UTC)
            if window is None or (start < window[1] and end > window[0]):
                found[(endpoint, str(scope), start)] = load_id
    return found


def measures_of(keys: set[RowKey], edition: str) -> int:
    return sum(STATISTICS[edition][endpoint].measures for endpoint, _, _ in keys)


@pytest.mark.parametrize("destination", DESTINATIONS)
@pytest.mark.parametrize("edition", ["cloud", "server"])
def test_reconcile_asks_again_only_for_rows_the_run_did_not_write(
    edition: str, destination: str, make_sim: Callable[..., Simulator], tmp_path: Path
) -> None:
    """An earlier load of the repository-level daily statistics from 2026-03-01, then the same
    load again (it re-reads its look-back). Reconciled with the second load's ids over the
    two weeks before the clock: the rows that load wrote are not asked for (they are the
    API's answers of this run), each row of the earlier load in the window is asked for once
    and compared; the verdict counts both."""
    sim = make_sim(edition=edition)
    loader = Loader(sim, tmp_path, destination)
    scopes = {"levels": ["repository"], "resources": RESOURCES[edition], "statistics_period": GRAIN}
    earlier = loader.load(**scopes)
    assert earlier.info is not None and not earlier.report.skips
    run = loader.load(**scopes)
    assert run.info is not None and not run.report.skips
    run_loads = set(run.info.loads_ids)
    assert run_loads and not run_loads & set(earlier.info.loads_ids)

    clock = clock_of(sim)
    window = (clock - timedelta(days=14), clock)
    rows = stored(loader.rows, edition, window)
    own = {key for key, load_id in rows.items() if load_id in run_loads}
    older = set(rows) - own
    assert own, "the run wrote no statistics row in the window"
    assert older, "no row of the earlier load in the window"
    assert {rows[key] for key in older} <= set(earlier.info.loads_ids)

    args = loader.source_args(**scopes)
    args.pop("start_date")
    args.pop("now")
    before = sim.requests()["total"]
    check = reconcile_pipeline(loader.pipeline(), [window], args, run_loads=run_loads)
    requests = asked(log_since(sim, before), edition)

    assert not set(requests) & own, sorted(set(requests) & own)[:3]
    assert requests == Counter(older)
    assert check.ok and check.differences == [], check.as_dict()
    assert check.checked == measures_of(older, edition)
    assert check.as_dict()["statistics_rows"] == {
        "written_by_run": len(own),
        "rechecked": len(older),
    }
    assert check.summary()[0] == (
        f"{VERDICT}PASSED ({check.checked} checks, 0 mismatches; {len(own)} statistics rows "
        f"written by this run from the API's answers, {len(older)} older rows re-checked)"
    )


def test_cli_backfill_asks_no_statistics_row_twice(
    make_sim: Callable[..., Simulator], tmp_path: Path
) -> None:
    """`repo-analytics backfill` of the repository-level daily statistics alone, in three
    windows: each stored row is asked for once, by the window that loaded it; the
    reconciliation after the windows asks for none of them again (they are this run's), and
    says so."""
    sim = make_sim(edition="cloud")
    before = sim.requests()["total"]
    done = run_cli(
        tmp_path,
        cli_env(sim),
        "backfill",
        "--since",
        "2026-05-01",
        "--until",
        "2026-05-31",
        "--window-days",
        "10",
        "--levels",
        "repository",
        "--resources",
        ",".join(RESOURCES["cloud"]),
        "--statistics-period",
        GRAIN,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    log = log_since(sim, before)
    statistics = [e for e in log if "statistics" in e["endpoint"]]
    repeated = Counter((e["path"], json.dumps(e["params"], sort_keys=True)) for e in statistics)
    assert [key for key, count in repeated.items() if count > 1] == []

    def rows(sql: str) -> list[tuple[Any, ...]]:
        return query(tmp_path / "data.duckdb", sql)

    held = stored(rows, "cloud")
    assert len(held) > 30 and Counter(held.keys()) == asked(log, "cloud")
    verdict = [line for line in done.stdout.splitlines() if line.startswith(VERDICT)]
    assert verdict == [
        f"{VERDICT}PASSED (0 checks, 0 mismatches; {len(held)} statistics "
        "rows written by this run from the API's answers, 0 older rows "
        "re-checked)"
    ], done.stdout
    report: Mapping[str, Any] = json.loads((tmp_path / "data.report.json").read_text())
    assert report["reconciliation"]["statistics_rows"] == {
        "written_by_run": len(held),
        "rechecked": 0,
    }
