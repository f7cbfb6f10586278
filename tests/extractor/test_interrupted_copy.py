"""A load killed right after a file's copy into staging, before dlt recorded the copy's end.

The source declares its tables' staged rows de-duplicated (dlt's `deduplicated`: the merges
insert them as they are). A run killed between the commit of a copy into the staging table
and dlt's record of that job's end leaves the job started; the next run copies the file
again and the staging table holds its rows twice. `repo-analytics load` runs here in a
process whose dlt copy job kills the process (SIGKILL) just after its copy of one table
commits; the rerun must land the package with each natural key once and the tables of a
clean run (a tiny cloud host: real HTTP, a real DuckDB file).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator import Simulator
from tests.extractor.test_views_crash import (
    CRASH_WINDOW,
    MakeSim,
    cli_env,
    contents,
    duplicate_keys,
    packages,
    run_cli,
)

TABLE = "cloud_commits"  # the table whose copy the kill follows
# dlt's DuckDB copy job, killed right after its copy of TABLE committed: a run of the CLI
KILLED_AFTER_COPY = """
import os, signal, sys
from dlt.destinations.impl.duckdb.duck import DuckDbCopyJob
copy, table = DuckDbCopyJob.run, sys.argv[1]
def run(self):
    copy(self)
    if self.load_table_name == table:
        os.kill(os.getpid(), signal.SIGKILL)
DuckDbCopyJob.run = run
from pipelines.cli import console
sys.argv = ["repo-analytics", *sys.argv[2:]]
console()
"""


@pytest.fixture
def host(make_sim: MakeSim) -> Iterator[Simulator]:
    yield make_sim(edition="cloud", size="tiny")


def killed_after_copy(sim: Simulator, path: Path) -> subprocess.CompletedProcess[str]:
    path.mkdir(parents=True)
    flags = ["--duckdb", str(path / "data.duckdb"), "--pipelines-dir", str(path / "pipelines")]
    flags += ["--schemas-dir", str(path / "schemas"), "load", *CRASH_WINDOW]
    return subprocess.run(
        [sys.executable, "-c", KILLED_AFTER_COPY, TABLE, *flags],
        env=cli_env(sim),
        cwd=path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def started_without_record(package: Path) -> list[str]:
    """Copy jobs of the package that started and left no record of their end."""
    records = package / "pending_transitions"
    return sorted(
        job.name.split(".")[0]
        for job in (package / "started_jobs").iterdir()
        if not job.name.endswith(".sql") and not (records / job.name).exists()
    )


def test_a_copy_run_twice_after_a_kill_lands_each_key_once(host: Simulator, tmp_path: Path) -> None:
    clean = run_cli(host, tmp_path / "clean")
    assert clean.returncode == 0, clean.stderr
    expected = contents(tmp_path / "clean" / "data.duckdb")
    assert expected[TABLE], "the window holds commits"

    path = tmp_path / "crashed"
    killed = killed_after_copy(host, path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    # the case guarded: the package pending, TABLE's copy committed and not recorded (the
    # other job of the load's two at a time may be under way too)
    (load_id,) = packages(path / "pipelines")["normalized"]
    package = path / "pipelines" / "repo_analytics" / "load" / "normalized" / load_id
    assert TABLE in started_without_record(package)
    schema = json.loads((package / "schema.json").read_text())
    assert schema["tables"][TABLE]["x-stage-data-deduplicated"] is True

    rerun = run_cli(host, path)
    assert rerun.returncode == 0, rerun.stderr
    assert packages(path / "pipelines")["normalized"] == set()
    db_file = path / "data.duckdb"
    assert duplicate_keys(db_file) == {}
    found = contents(db_file)
    assert sorted(found) == sorted(expected)
    for table, rows in expected.items():
        assert found[table] == rows, table
