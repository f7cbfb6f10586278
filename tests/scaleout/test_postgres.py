"""`repo-analytics --destination postgres`: a backfill and a nightly load into a real Postgres
server over loopback TCP, compared with the simulator's truth and reconciled; credentials
from dlt config only, checked before the first request and never shown; and several
processes loading a backfill's windows into one dataset at once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg2

from pipelines.destinations.warehouse import lock_key
from simulator import Simulator
from tests.runs.test_backfill import assert_rows_equal_truth, cli_args, cli_env, run_cli
from tests.scaleout.conftest import PASSWORD, PostgresServer

CLOCK = "2026-06-01T00:00:00+00:00"  # the simulators' fixed clock (tests/conftest.py)
SINCE = "2026-03-01"  # before the tiny history (90 days) begins
WINDOWS = (("2026-03-01", "2026-04-01"), ("2026-04-01", "2026-05-01"), ("2026-05-01", CLOCK))
PG_ARGS = ("--destination", "postgres")


def reader(postgres: PostgresServer, dataset: str) -> Any:
    def read(table: str, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
        names = ", ".join(f'"{c}"' for c in columns)
        return postgres.rows(f'SELECT {names} FROM "{dataset}"."{table}"')

    return read


def instant(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def assert_no_secret(folder: Path, *outputs: str) -> None:
    for text in (*outputs, *(p.read_text() for p in folder.glob("*.report.json"))):
        assert PASSWORD not in text


def test_backfill_then_nightly_into_postgres_equal_truth(
    make_sim: Any, postgres: PostgresServer, dataset: str, warehouse_env: Any, tmp_path: Path
) -> None:
    sim: Simulator = make_sim(edition="server")
    env = cli_env(sim, **warehouse_env())
    pg = (*PG_ARGS, "--dataset", dataset)
    done = run_cli(tmp_path, env, *pg, "backfill", "--since", SINCE, "--until", CLOCK)
    assert done.returncode == 0, done.stderr
    assert "reconciliation with the API's statistics: PASSED" in done.stdout
    assert_rows_equal_truth(reader(postgres, dataset), sim, "server")
    sim.advance(days=1)
    clock = datetime.fromtimestamp(sim.info()["now"], UTC).isoformat()
    nightly = run_cli(tmp_path, env, *pg, "load", "--end-date", clock)
    assert nightly.returncode == 0, nightly.stderr
    assert "reconciliation with the API's statistics: PASSED" in nightly.stdout
    assert_rows_equal_truth(reader(postgres, dataset), sim, "server")
    report = json.loads((tmp_path / "data.report.json").read_text())
    landed = {
        row[0] for row in postgres.rows(f'SELECT _dlt_load_id FROM "{dataset}".server_commits')
    }
    assert set(report["load"]["load_ids"]) & landed  # the nightly's rows name its load
    state = run_cli(tmp_path, env, *pg, "state")  # read back from the warehouse too
    assert state.returncode == 0, state.stderr
    # one window (shorter than the default 122 days), and the CSV exports' own window
    assert f"  {SINCE}T00:00:00+00:00/{CLOCK}" in state.stdout.splitlines()
    assert f"  exports {SINCE}T00:00:00+00:00/{CLOCK}" in state.stdout.splitlines()
    assert "last successful load: unknown" not in state.stdout
    assert_no_secret(tmp_path, done.stdout, done.stderr, nightly.stdout, nightly.stderr)


def test_missing_or_wrong_credentials_stop_before_the_first_request(
    make_sim: Any, postgres: PostgresServer, dataset: str, tmp_path: Path
) -> None:
    sim: Simulator = make_sim(edition="cloud")
    env = {k: v for k, v in cli_env(sim).items() if not k.startswith("DESTINATION__")}
    pg = (*PG_ARGS, "--dataset", dataset)
    missing = run_cli(tmp_path, env, *pg, "load", "--end-date", CLOCK)
    assert missing.returncode == 2
    assert missing.stderr.count("\n") == 1
    assert "DESTINATION__POSTGRES__CREDENTIALS" in missing.stderr
    wrong_uri = postgres.uri(password="not-" + PASSWORD)
    wrong_env = {**env, "DESTINATION__POSTGRES__CREDENTIALS": wrong_uri}
    wrong = run_cli(tmp_path, wrong_env, *pg, "load", "--end-date", CLOCK)
    assert wrong.returncode == 1
    assert wrong.stderr.startswith("repo-analytics: failed: the postgres destination refused")
    assert "password authentication failed" in wrong.stderr
    assert sim.requests()["total"] == 0  # nothing was read
    assert not postgres.rows(
        "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (dataset,)
    )
    assert_no_secret(tmp_path, missing.stdout, missing.stderr, wrong.stdout, wrong.stderr)
    assert "not-" + PASSWORD not in wrong.stderr


def test_windows_loaded_by_concurrent_processes_equal_truth(
    make_sim: Any, postgres: PostgresServer, dataset: str, warehouse_env: Any, tmp_path: Path
) -> None:
    """Three processes, each the backfill of one window with a working folder of its own,
    started together into one dataset: every table equals the truth, each key once."""
    sim: Simulator = make_sim(edition="cloud")
    env = cli_env(sim, **warehouse_env())
    runs = []
    for index, (since, until) in enumerate(WINDOWS):
        folder = tmp_path / f"window-{index}"
        folder.mkdir()
        command = cli_args(folder, *PG_ARGS, "--dataset", dataset, "--progress", "off")
        command += ["backfill", "--since", since, "--until", until, "--window-days", "31"]
        runs.append(subprocess.Popen(command, env=env, cwd=folder, text=True, **PIPES))
    outputs = [run.communicate(timeout=180) for run in runs]
    for run, (stdout, stderr) in zip(runs, outputs, strict=True):
        assert run.returncode == 0, stderr
        assert "reconciliation with the API's statistics: PASSED" in stdout
    everything = (instant(WINDOWS[0][0]), instant(WINDOWS[-1][1]))
    assert_rows_equal_truth(reader(postgres, dataset), sim, "cloud", everything, everything)
    for table, key in KEYS.items():
        total, distinct = postgres.rows(
            f'SELECT count(*), count(DISTINCT ({key})) FROM "{dataset}"."{table}"'
        )[0]
        assert total == distinct > 0, table
    truth_users = {u["uuid"] for u in sim.truth("users")}
    assert {r[0] for r in postgres.rows(f'SELECT uuid FROM "{dataset}".cloud_users')} == truth_users


def test_reset_waits_for_a_load_under_way(
    make_sim: Any, postgres: PostgresServer, dataset: str, warehouse_env: Any, tmp_path: Path
) -> None:
    """`reset` reads and writes the dataset's state under its load lock: while another
    process holds it (a backfill window loading), reset waits and writes nothing; once the
    lock is free it forgets the cursors."""
    sim: Simulator = make_sim(edition="cloud")
    env = cli_env(sim, **warehouse_env())
    pg = (*PG_ARGS, "--dataset", dataset)
    only = ("--levels", "repository", "--resources", "commits")
    loaded = run_cli(tmp_path, env, *pg, "load", *only, "--end-date", CLOCK)
    assert loaded.returncode == 0, loaded.stderr
    assert ": cursor date_local = " in run_cli(tmp_path, env, *pg, "state").stdout
    states = f'SELECT count(*) FROM "{dataset}"._dlt_pipeline_state'
    stored = postgres.rows(states)
    holder = psycopg2.connect(postgres.uri())
    holder.autocommit = True
    holder.cursor().execute("SELECT pg_advisory_lock(%s)", (lock_key(dataset),))
    command = cli_args(tmp_path, *pg, "reset", "--resource", "commits.repository", "--yes")
    reset = subprocess.Popen(command, env=env, cwd=tmp_path, text=True, **PIPES)
    try:
        deadline = time.monotonic() + 120
        while (
            reset.poll() is None
            and time.monotonic() < deadline
            and not waiting_for(postgres, lock_key(dataset))
        ):
            time.sleep(0.1)
        assert reset.poll() is None, "reset did not wait for the load lock"
        assert waiting_for(postgres, lock_key(dataset))
        assert postgres.rows(states) == stored  # nothing written while it waits
    finally:
        holder.close()  # the lock dies with its connection
    stdout, stderr = reset.communicate(timeout=120)
    assert reset.returncode == 0, stderr
    assert stdout.startswith("forgot the state of ")
    assert postgres.rows(states) != stored
    assert ": cursor date_local = " not in run_cli(tmp_path, env, *pg, "state").stdout


def waiting_for(postgres: PostgresServer, key: int) -> bool:
    """Whether a session waits for the advisory lock `key` (a 32-bit key: its low half)."""
    return bool(
        postgres.rows(
            "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = %s",
            (key,),
        )
    )


PIPES: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
KEYS = {
    "cloud_commits": "repository_slug, hash",
    "cloud_workspace_commits": "repository_slug, hash",
    "cloud_user_commits": "read_for_user_uuid, repository_slug, hash",
    "cloud_commit_parents": "repository_slug, hash, position",
    "cloud_pull_requests": "repository_slug, id",
    "cloud_pull_request_statistics": "level, scope, period_start, period, state_filter, date_type",
    "cloud_commit_change_statistics": "repository_slug, period_start, period, merges",
}


HIDDEN = """
import sys
sys.modules[{module!r}] = None  # as if its extra were not installed
{code}
"""


def test_a_missing_extra_says_what_to_install(make_sim: Any, tmp_path: Path) -> None:
    sim: Simulator = make_sim(edition="cloud")
    env = cli_env(sim, DESTINATION__POSTGRES__CREDENTIALS="postgresql://u:p@127.0.0.1:9/db")
    cli = "from pipelines.cli.main import main; sys.exit(main(sys.argv[1:]))"
    args = ["--destination", "postgres", "--pipelines-dir", str(tmp_path), "load"]
    no_driver = subprocess.run(
        [sys.executable, "-c", HIDDEN.format(module="psycopg2", code=cli), *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert no_driver.returncode == 1
    assert no_driver.stderr.strip().splitlines() == [
        "repo-analytics: failed: the postgres destination needs its extra: "
        'pip install -e ".[postgres]" (or dlt\'s: pip install "dlt[postgres]")'
    ]
    no_dagster = subprocess.run(
        [
            sys.executable,
            "-c",
            HIDDEN.format(module="dagster", code="import pipelines.integrations.dagster_assets"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert no_dagster.returncode == 1
    assert no_dagster.stderr.strip().splitlines()[-1] == (
        "ModuleNotFoundError: the Dagster integration needs its extra (no module `dagster`): "
        'pip install -e ".[dagster]"'
    )
    assert sim.requests()["total"] == 0
