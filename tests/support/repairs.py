"""What the tests of repairs share: the command line on either destination against a
simulator, and a whole dataset compared with the simulator's ground truth.

Every table of both editions is compared (lists of every level, their child tables, users,
statistics), each natural key once, using the truth modules of the end-to-end tests."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import tests.cloud.truth as cloud_truth
import tests.selfhosted.truth as server_truth
from simulator import Simulator
from tests.runs.test_backfill import cli_env, dated, log_since, run_cli
from tests.support.helpers import column_types, count, data_tables
from tests.support.loader import Loader

__all__ = ["dated", "log_since"]


def run(
    folder: Path, sim: Simulator, destination: str, *command: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """`repo-analytics <command>` against `sim`, its files in `folder`, into `destination`
    (`duckdb`: `folder/data.duckdb`; `parquet`: Delta tables under `folder/lake`)."""
    where = (
        ("--destination", "parquet", "--parquet-dir", str(folder / "lake"))
        if destination == "parquet"
        else ()
    )
    return run_cli(folder, cli_env(sim, **env), "--progress", "off", *where, *command)


def report_of(folder: Path) -> dict[str, Any]:
    """The last run's report, beside the DuckDB path (for Delta tables too)."""
    return json.loads((folder / "data.report.json").read_text())


def assert_equals_truth(
    loader: Loader, sim: Simulator, since: datetime, statistics: bool = True
) -> None:
    """Every table of the dataset equals the truth of [since, the simulator's clock), each
    natural key once (`statistics=False`: the statistics tables left out, as for a nightly's
    partial periods)."""
    if sim.config.edition == "cloud":
        truth = cloud_truth.Truth.read(sim)
        window = cloud_truth.Window(since, truth.clock)
        with loader.reading():
            cloud_truth.check_repository_commits(loader, truth, window)
            cloud_truth.check_workspace_commits(loader, truth, window)
            cloud_truth.check_user_commits(loader, truth, window)
            cloud_truth.check_parents(loader, truth, window)
            for level in ("repository", "workspace", "user"):
                cloud_truth.check_pull_requests(loader, truth, window, level)
            cloud_truth.check_users(loader, truth)
            if statistics:
                cloud_truth.check_pr_statistics(loader, truth, window)
                cloud_truth.check_change_statistics(loader, truth, window)
        assert_unique_keys(loader, cloud_truth.PRIMARY_KEYS)
        return
    s_truth = server_truth.Truth.read(sim)
    s_window = server_truth.Window(since, s_truth.clock)
    scopes = server_truth.expected_scopes(s_truth, s_window)
    with loader.reading():
        server_truth.check_lists(loader, s_truth, s_window, scopes)
    if statistics:
        server_truth.check_statistics(
            loader,
            "server_commit_statistics",
            server_truth.expected_commit_statistics(s_truth, s_window, scopes),
        )
        server_truth.check_statistics(
            loader,
            "server_pull_request_statistics",
            server_truth.expected_pr_statistics(s_truth, s_window, scopes),
        )
    assert_unique_keys(loader, server_truth.PRIMARY_KEYS)


def assert_unique_keys(loader: Loader, keys: dict[str, tuple[str, ...]]) -> None:
    """Every data table's natural key is unique and never NULL; no marker rows are stored."""
    with loader.reading():
        tables = sorted(data_tables(loader))
        assert tables
        for table in tables:
            key = ", ".join(f'"{c}"' for c in keys[table])
            total, distinct = loader.rows(
                f'SELECT (SELECT count(*) FROM "{table}"), '
                f'(SELECT count(*) FROM (SELECT DISTINCT {key} FROM "{table}"))'
            )[0]
            assert total == distinct, f"{table}: {total} rows, {distinct} distinct keys"
            if "removed" in column_types(loader, table):
                assert count(loader, table, "WHERE removed") == 0, f"{table} stores marker rows"
