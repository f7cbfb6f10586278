"""A load killed right after a merge's commit or a file's copy into staging, before dlt
recorded the job's end.

Into DuckDB a merge reads the package's Parquet files itself
(`pipelines/destinations/duckdb/merges.py`):
killed between the merge's commit and dlt's record of it, the rerun runs the merge again,
which deletes what the first inserted. Where dlt copies a file into the staging table first
(a path a SQL job cannot carry, other destinations), the source's declaration that staged
rows are de-duplicated (dlt's `deduplicated`: the merges insert them as they are) would let a
copy run twice land its rows twice (`pipelines/runs/interrupted.py`). `repo-analytics load` runs
here in a process whose dlt job kills the process (SIGKILL) just after one table's merge or
copy commits; the rerun must land the package with each natural key once and the tables of a
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
from tests.crash.test_views_crash import (
    CRASH_WINDOW,
    MakeSim,
    cli_env,
    contents,
    duplicate_keys,
    packages,
    run_cli,
)

TABLE = "cloud_commits"  # the table whose job the kill follows
# a run of the CLI whose dlt job class `{job}` (of `{module}`) kills the process (SIGKILL)
# right after its run for TABLE committed
KILLED_AFTER = """
import os, signal, sys
from {module} import {job} as job
job_run, table = job.run, sys.argv[1]
def run(self):
    job_run(self)
    if self.load_table_name == table:
        os.kill(os.getpid(), signal.SIGKILL)
job.run = run
from pipelines.cli.main import console
sys.argv = ["repo-analytics", *sys.argv[2:]]
console()
"""
# dlt's copy of a file into DuckDB's staging table; dlt's SQL job (a merge, one transaction)
KILLED_AFTER_COPY = KILLED_AFTER.format(
    module="dlt.destinations.impl.duckdb.duck", job="DuckDbCopyJob"
)
KILLED_AFTER_MERGE = KILLED_AFTER.format(
    module="dlt.destinations.job_client_impl", job="SqlLoadJob"
)


@pytest.fixture
def host(make_sim: MakeSim) -> Iterator[Simulator]:
    yield make_sim(edition="cloud", size="tiny")


def killed_after(script: str, sim: Simulator, path: Path) -> subprocess.CompletedProcess[str]:
    """`repo-analytics load` of the crash window into `path`, in a process `script` kills."""
    path.mkdir(parents=True)
    flags = ["--duckdb", str(path / "data.duckdb"), "--pipelines-dir", str(path / "pipelines")]
    flags += ["--schemas-dir", str(path / "schemas"), "load", *CRASH_WINDOW]
    return subprocess.run(
        [sys.executable, "-c", script, TABLE, *flags],
        env=cli_env(sim),
        cwd=path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def started_without_record(package: Path, job_format: str) -> list[str]:
    """Tables of the package's jobs of `job_format` that started and left no record of
    their end."""
    records = package / "pending_transitions"
    return sorted(
        job.name.split(".")[0]
        for job in (package / "started_jobs").iterdir()
        if job.name.endswith("." + job_format) and not (records / job.name).exists()
    )


@pytest.mark.parametrize(
    ("script", "folder", "job_format"),
    [
        (KILLED_AFTER_MERGE, "crashed", "sql"),
        # a `;` in the working folders' path: dlt copies the files into staging first
        (KILLED_AFTER_COPY, "crashed;copied", "parquet"),
    ],
    ids=["merge", "copy"],
)
def test_a_job_run_twice_after_a_kill_lands_each_key_once(
    host: Simulator, tmp_path: Path, script: str, folder: str, job_format: str
) -> None:
    clean = run_cli(host, tmp_path / "clean")
    assert clean.returncode == 0, clean.stderr
    expected = contents(tmp_path / "clean" / "data.duckdb")
    assert expected[TABLE], "the window holds commits"

    path = tmp_path / folder
    killed = killed_after(script, host, path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    # the case guarded: the package pending, TABLE's job committed and not recorded (the
    # other job of the load's two at a time may be under way too)
    (load_id,) = packages(path / "pipelines")["normalized"]
    package = path / "pipelines" / "repo_analytics" / "load" / "normalized" / load_id
    assert TABLE in started_without_record(package, job_format)
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
