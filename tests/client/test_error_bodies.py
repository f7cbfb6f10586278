"""A 200 answer whose body is the API's error object is an error, never data: retried like a
5xx, then a clear stop. Real HTTP against the simulator's `error200` fault, both editions.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pipelines.cli.exits import root_cause as cause_of
from simulator import Simulator
from sources.repo_analytics import RetryBudgetExhausted
from sources.repo_analytics.errors import FatalApiError
from tests.client.test_client_faults import (
    SECRET,
    START,
    clock,
    data_tables,
    everything,
    in_window,
    keys,
    last_serial,
    log_since,
    one_line,
    run_cli,
)
from tests.support.loader import FAST_RETRY, Loader

MakeSim = Callable[..., Simulator]
MakeLoader = Callable[[Simulator], Loader]


def error200(match: str, count: int | None = 1) -> dict[str, Any]:
    rule: dict[str, Any] = {"kind": "error200", "rate": 1, "match": match}
    if count is not None:
        rule["count"] = count
    return {"seed": 1, "rules": [rule]}


def retried_once(sim: Simulator, endpoint: str) -> None:
    """The one faulted request got 200 with the error body, and was sent again and answered."""
    log = [e for e in sim.requests()["log"] if e["endpoint"] == endpoint]
    faulted = [e for e in log if e["fault"] == "error200"]
    assert len(faulted) == 1 and faulted[0]["status"] == 200
    assert any(
        later["n"] > faulted[0]["n"]
        and later["params"] == faulted[0]["params"]
        and later["fault"] is None
        for later in log
    )


def server_pull_requests(sim: Simulator, start: datetime) -> set[tuple[Any, ...]]:
    """Natural keys of the self-hosted pull requests updated in [start, clock)."""
    until = clock(sim)
    return {
        (p["toRef"]["repository"]["project"]["key"], p["toRef"]["repository"]["slug"], p["id"])
        for p in sim.truth("pull-requests")
        if start <= datetime.fromtimestamp(p["updatedDate"] / 1000, UTC) < until
    }


# retried, then the truth -------------------------------------------------------------------------
def test_cloud_list_page_with_error_body_is_retried(make_sim: MakeSim, loader: MakeLoader) -> None:
    """An error body with 200 on a list page is not an empty page: it is asked for again, and
    the table holds every pull request of the window."""
    sim = make_sim(edition="cloud", token=SECRET, faults=error200("pull-requests.list.workspace"))
    run = loader(sim)
    result = run.load(levels="workspace", resources="pull_requests", page_size=20)

    retried_once(sim, "pull-requests.list.workspace")
    assert result.report.totals().retries == 1
    loaded = keys(run, "cloud_workspace_pull_requests", "id")
    assert len(loaded) == len(set(loaded))
    assert set(loaded) == in_window(sim, "pull-requests", START, clock(sim))


def test_server_list_page_with_error_body_is_retried(make_sim: MakeSim, loader: MakeLoader) -> None:
    """The self-hosted `{"errors": [...]}` body with 200 is an error too, never data."""
    sim = make_sim(edition="server", faults=error200("pull-requests.list.global"))
    run = loader(sim)
    result = run.load(levels=["global"], resources=["pull_requests"], page_size=20)

    retried_once(sim, "pull-requests.list.global")
    assert result.report.totals().retries == 1
    loaded = run.rows("SELECT project_key, repository_slug, id FROM server_pull_requests_global")
    assert len(loaded) == len(set(loaded))
    assert set(loaded) == server_pull_requests(sim, START)


def test_cloud_statistics_with_error_body_is_retried(
    make_sim: MakeSim, loader: MakeLoader, tmp_path: Path
) -> None:
    """A statistics answer that is an error body is retried; the table equals a clean run's."""
    sim = make_sim(
        edition="cloud", token=SECRET, faults=error200("pull-requests.statistics.workspace")
    )
    args = {"levels": "workspace", "resources": "pull_request_statistics"}
    result = loader(sim).load(**args)
    retried_once(sim, "pull-requests.statistics.workspace")
    assert result.report.totals().retries == 1

    sim.clear_faults()
    clean = Loader(sim, tmp_path / "clean")
    clean.load(**args)
    tables = ("cloud_pull_request_statistics",)
    landed = data_tables(loader(sim).db_file, tables)
    assert landed == data_tables(clean.db_file, tables)
    assert landed["cloud_pull_request_statistics"]
    assert all(None not in row for row in landed["cloud_pull_request_statistics"])


def test_server_csv_export_with_error_body_is_retried(
    make_sim: MakeSim, loader: MakeLoader
) -> None:
    """A JSON error body with 200 where a CSV export was asked for is not read as CSV rows."""
    sim = make_sim(edition="server", faults=error200("commits.csv.global"))
    run = loader(sim)
    result = run.load(levels=["global"], resources=["commit_exports"])

    retried_once(sim, "commits.csv.global")
    assert result.report.totals().retries == 1
    until = clock(sim)
    landed = [h for (h,) in run.rows("SELECT commit_hash FROM server_commit_exports")]
    assert sorted(landed) == sorted(
        c["id"]
        for c in sim.truth("commits")
        if START <= datetime.fromisoformat(c["authorTimestamp"].replace("Z", "+00:00")) < until
    )


# every time: a clear stop, nothing written ----------------------------------------------------
def test_error_body_every_time_stops_the_run_and_writes_nothing(
    make_sim: MakeSim, loader: MakeLoader
) -> None:
    """Past the retry budget the run stops with the URL and what to do; tables and cursors
    stay as the last good run left them."""
    sim = make_sim(edition="cloud", token=SECRET)
    run = loader(sim)
    args = {"levels": "workspace", "resources": "commits,pull_requests", "page_size": 50}
    run.load(**args)
    before, state = everything(run.db_file), run.pipeline().state["sources"]
    sim.advance(days=1)
    sim.set_faults(error200("pull-requests.list.workspace", count=None))
    serial = last_serial(sim)

    with pytest.raises(Exception) as caught:
        run.load(**args, retry={**FAST_RETRY, "max_attempts": 3})
    cause = cause_of(caught.value)
    assert isinstance(cause, RetryBudgetExhausted), cause
    message = str(cause)
    assert "still failing after 3 attempts" in message and "rerun" in message
    assert "error body" in message and "200" in message
    assert f"{sim.api_base}/workspace/{sim.config.workspace}/pull-requests" in message
    assert SECRET not in message
    faulted = [e for e in log_since(sim, serial) if e["fault"] == "error200"]
    assert len(faulted) == 3
    assert everything(run.db_file) == before
    assert run.pipeline().state["sources"] == state


def test_cli_error_body_every_time_exits_4_with_one_line(make_sim: MakeSim, tmp_path: Path) -> None:
    """The command: exit 4, one line naming the URL (no token) and saying to rerun, no tables."""
    sim = make_sim(
        edition="cloud", token=SECRET, faults=error200("pull-requests.list.workspace", count=None)
    )
    budget = {
        **FAST_RETRY,
        "backoff_base": 10,
        "max_wait_seconds": 100,
        "total_wait_seconds": 0.001,
    }
    done = run_cli(sim, tmp_path, env={"SOURCES__REPO_ANALYTICS__RETRY": json.dumps(budget)})
    assert done.returncode == 4, (done.stdout, done.stderr)
    line = one_line(done.stderr)
    assert line.startswith("repo-analytics: stopped: ")
    assert f"{sim.api_base}/workspace/{sim.config.workspace}/pull-requests?" in line
    assert "error body" in line and "rerun later" in line
    assert everything(tmp_path / "data.duckdb") == {}


def test_server_csv_export_answered_with_a_login_page_fails(
    make_sim: MakeSim, loader: MakeLoader
) -> None:
    """An HTML page where a CSV export was asked for is never read as rows: the run fails
    naming the URL and the likely login page, and writes nothing."""
    sim = make_sim(edition="server", faults="html=1,match=commits.csv")
    run = loader(sim)
    with pytest.raises(Exception) as caught:
        run.load(levels=["global"], resources=["commit_exports"])
    cause = cause_of(caught.value)
    assert isinstance(cause, FatalApiError) and cause.kind == "not_csv", cause
    assert "instead of CSV" in str(cause) and "login page" in str(cause)
    assert f"{sim.api_base}/commits/export/csv?" in str(cause)
    assert everything(run.db_file) == {}
