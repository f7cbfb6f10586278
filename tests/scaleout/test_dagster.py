"""The Dagster integration: backfill windows as time partitions of dagster-dlt assets,
materialised in-process against a simulator and a real Postgres, compared with the truth of
exactly those windows; a partition run again changes nothing; and three partitions run at
once by Dagster's own command in three processes (the code location `dagster dev -m
pipelines.integrations.dagster_assets` loads), configured from the environment alone."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest

from pipelines.destinations.duckdb import DEFAULT_DUCKDB
from pipelines.integrations.dagster_assets import resolve_partitions, window_assets
from simulator import Simulator
from tests.runs.test_backfill import assert_rows_equal_truth, cli_env
from tests.scaleout.conftest import PostgresServer
from tests.scaleout.test_postgres import reader
from tests.support.helpers import from_z
from tests.support.loader import FAST_RETRY

PARTITIONS = ("2026-05-04", "2026-05-11", "2026-05-18")  # Mondays: weekly windows
RANGE = (datetime(2026, 5, 4, tzinfo=UTC), datetime(2026, 5, 25, tzinfo=UTC))
KEYS = {
    "server_commits": "project_key, repository_slug, id",
    "server_commits_global": "project_key, repository_slug, id",
    "server_commit_parents": "project_key, repository_slug, id, position",
    "server_pull_requests": "project_key, repository_slug, id",
    "server_pull_request_exports": "level, scope, project, repository, pull_request_id",
}


def sim_args(sim: Simulator) -> dict[str, Any]:
    return {
        "edition": "server",
        "base_url": sim.base_url,
        "username": sim.config.username,
        "password": sim.config.password,
        "retry": FAST_RETRY,
    }


def contents(postgres: PostgresServer, dataset: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every data table without dlt's columns, sorted."""
    tables = postgres.rows(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
        "AND table_name NOT LIKE '\\_dlt%%'",
        (dataset,),
    )
    out = {}
    for (table,) in sorted(tables):
        columns = [
            c
            for (c,) in postgres.rows(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                "AND table_name = %s ORDER BY ordinal_position",
                (dataset, table),
            )
            if not c.startswith("_dlt")
        ]
        names = ", ".join(f'"{c}"' for c in columns)
        out[table] = postgres.rows(f'SELECT {names} FROM "{dataset}"."{table}" ORDER BY {names}')
    return out


def test_partitions_load_their_windows_and_a_rerun_changes_nothing(
    make_sim: Any, postgres: PostgresServer, dataset: str, warehouse_env: Any, tmp_path: Path
) -> None:
    sim: Simulator = make_sim(edition="server")
    settings = resolve_partitions(
        {
            "start": PARTITIONS[0],
            "end": RANGE[1].date().isoformat(),
            "grain": "week",
            "dataset": dataset,
            "pipelines_dir": str(tmp_path / "pipelines"),
        }
    )
    assets = window_assets(settings, sim_args(sim))
    partitions = assets.partitions_def
    assert partitions is not None
    assert partitions.get_partition_keys() == list(PARTITIONS)
    instance = dg.DagsterInstance.ephemeral()
    read = 0
    for key in PARTITIONS:
        result = dg.materialize([assets], partition_key=key, instance=instance)
        assert result.success
        events = result.get_asset_materialization_events()
        by_key = {e.asset_key.to_user_string(): e for e in events}
        commits = by_key["repo_analytics/server_commits_repository"].materialization.metadata
        assert commits["window"].value.startswith(f"[{key}T00:00:00+00:00")
        assert "PASSED" in commits["reconciliation"].value
        read += commits["rows_read"].value
    in_range = [
        c for c in sim.truth("commits") if RANGE[0] <= from_z(c["authorTimestamp"]) < RANGE[1]
    ]
    assert read == len(in_range) > 0  # the repository lists of the three weeks, once each
    assert_rows_equal_truth(reader(postgres, dataset), sim, "server", RANGE, RANGE)
    for table, key_columns in KEYS.items():
        total, distinct = postgres.rows(
            f'SELECT count(*), count(DISTINCT ({key_columns})) FROM "{dataset}"."{table}"'
        )[0]
        assert total == distinct > 0, table
    before = contents(postgres, dataset)
    again = dg.materialize([assets], partition_key=PARTITIONS[1], instance=instance)
    assert again.success
    assert contents(postgres, dataset) == before
    done = instance.get_materialized_partitions(
        dg.AssetKey(["repo_analytics", "server_commits_repository"])
    )
    assert done == set(PARTITIONS)


def test_partitions_run_by_concurrent_dagster_processes_equal_truth(
    make_sim: Any,
    postgres: PostgresServer,
    warehouse_env: Any,
    dataset: str,
    tmp_path: Path,
) -> None:
    """Three `dagster asset materialize -m pipelines.integrations.dagster_assets --partition KEY`
    processes
    at once, as three workers run three partitions of a backfill: every setting from the
    environment (dlt config), one dataset; the tables equal the truth of the three weeks,
    each key once. A missing partition start is refused, naming its variable."""
    sim: Simulator = make_sim(edition="server")
    env = cli_env(
        sim,
        **warehouse_env(),
        REPO_ANALYTICS_DAGSTER__START=PARTITIONS[0],
        REPO_ANALYTICS_DAGSTER__DATASET=dataset,
        REPO_ANALYTICS_DAGSTER__PIPELINES_DIR=str(tmp_path / "pipelines"),
    )
    dagster = str(Path(sys.executable).with_name("dagster"))
    location = ["-m", "pipelines.integrations.dagster_assets"]
    runs = []
    for key in PARTITIONS:
        home = tmp_path / f"dagster-{key}"  # each worker's own instance (sqlite)
        home.mkdir()
        command = [dagster, "asset", "materialize", *location, "--select", "key:repo_analytics/*"]
        runs.append(
            subprocess.Popen(
                [*command, "--partition", key],
                env={**env, "DAGSTER_HOME": str(home)},
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for run in runs:
        _, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, stderr[-2000:]
    assert_rows_equal_truth(reader(postgres, dataset), sim, "server", RANGE, RANGE)
    for table, key_columns in KEYS.items():
        total, distinct = postgres.rows(
            f'SELECT count(*), count(DISTINCT ({key_columns})) FROM "{dataset}"."{table}"'
        )[0]
        assert total == distinct > 0, table
    unset = {k: v for k, v in env.items() if k != "REPO_ANALYTICS_DAGSTER__START"}
    failed = subprocess.run(
        [dagster, "definitions", "validate", *location],
        env={**unset, "DAGSTER_HOME": str(tmp_path)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert failed.returncode != 0
    assert "REPO_ANALYTICS_DAGSTER__START" in failed.stdout + failed.stderr


def location_env(sim: Simulator, destination: str, **extra: str) -> dict[str, str]:
    """The environment a user gives `dagster dev -m pipelines.integrations.dagster_assets`: the
    source's
    settings and the partitions' (`REPO_ANALYTICS_DAGSTER__...`), nothing else."""
    return cli_env(
        sim,
        REPO_ANALYTICS_DAGSTER__START=PARTITIONS[0],
        REPO_ANALYTICS_DAGSTER__DESTINATION=destination,
        **extra,
    )


@pytest.mark.parametrize("destination", ["duckdb", "postgres"])
def test_the_code_location_loads_as_the_ui_loads_it(
    make_sim: Any, destination: str, dataset: str, request: Any, tmp_path: Path
) -> None:
    """`dagster definitions validate` and `dagster asset list` of the module the UI serves,
    configured from the environment alone: DuckDB (with no file named: the default one) and
    Postgres load, and every asset is named after its edition and resource."""
    sim: Simulator = make_sim(edition="server")
    extra = request.getfixturevalue("warehouse_env")() if destination == "postgres" else {}
    env = {**location_env(sim, destination, **extra), "DAGSTER_HOME": str(tmp_path)}
    dagster = str(Path(sys.executable).with_name("dagster"))
    location = ["-m", "pipelines.integrations.dagster_assets"]
    outputs = []
    for command in (["definitions", "validate"], ["asset", "list"]):
        done = subprocess.run(
            [dagster, *command, *location],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        outputs.append(done.stdout)
    keys = {line.strip() for line in outputs[1].splitlines() if line.startswith("repo_analytics/")}
    assert "repo_analytics/server_commits_repository" in keys
    assert "repo_analytics/server_pull_requests_global" in keys
    names = {key.rpartition("/")[2] for key in keys}
    assert len(names) == len(keys) > 10 and all(n.startswith("server_") for n in names)


def test_a_partition_materialises_into_duckdb(
    make_sim: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One weekly partition into DuckDB, no file named: the command line's default file in
    the working folder holds exactly that week, equal to the truth, and reconciled, and the
    canonical views over it."""
    sim: Simulator = make_sim(edition="server")
    monkeypatch.chdir(tmp_path)
    settings = resolve_partitions(
        {
            "start": PARTITIONS[0],
            "end": RANGE[1].date().isoformat(),
            "destination": "duckdb",
            "pipelines_dir": str(tmp_path / "pipelines"),
        }
    )
    assets = window_assets(settings, sim_args(sim))
    key = PARTITIONS[1]
    result = dg.materialize([assets], partition_key=key, instance=dg.DagsterInstance.ephemeral())
    assert result.success
    events = {
        e.asset_key.to_user_string(): e.materialization.metadata
        for e in result.get_asset_materialization_events()
    }
    commits = events["repo_analytics/server_commits_repository"]
    assert "PASSED" in commits["reconciliation"].value
    db_file = tmp_path / DEFAULT_DUCKDB
    start = datetime.fromisoformat(key).replace(tzinfo=UTC)
    week = (start, start + timedelta(days=7))

    def read(table: str, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
        names = ", ".join(f'"{c}"' for c in columns)
        with duckdb.connect(str(db_file), read_only=True) as con:
            return con.execute(f'SELECT {names} FROM repo_analytics."{table}"').fetchall()

    assert_rows_equal_truth(read, sim, "server", week, week)
    in_week = [c for c in sim.truth("commits") if week[0] <= from_z(c["authorTimestamp"]) < week[1]]
    assert commits["rows_read"].value == len(in_week) > 0
    assert len(read("commits", ("commit_id",))) == len(in_week)  # the canonical views too
