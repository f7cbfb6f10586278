"""Lineage and files: every row names the load that wrote it, the run report names the loads,
and schemas are written beside the run (the working directory), never into the package.

The real `repo-analytics` command in subprocesses against a tiny simulator over HTTP, real
DuckDB files under tmp_path; the command's working directory is tmp_path and no
`--schemas-dir` is given, as a user runs it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
import yaml

import pipelines
from simulator import SimConfig, Simulator
from tests.runs.test_backfill import CLI, cli_env
from tests.support import FIXED_NOW
from tests.support.loader import DATASET


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as served:
        yield served


# a short load: the last week of the repository level
WEEK_LOAD = (
    "load",
    "--start-date",
    "2026-05-25",
    "--end-date",
    "2026-06-01T00:00:00+00:00",
    "--levels",
    "repository",
    "--no-reconcile",
)


def run_in(folder: Path, sim: Simulator, *command: str) -> subprocess.CompletedProcess[str]:
    """The command as a user types it in `folder`: no schemas folder named."""
    folder.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [
            str(CLI),
            "--duckdb",
            "data.duckdb",
            "--pipelines-dir",
            "pipelines",
            "--progress",
            "off",
            *command,
        ],
        cwd=folder,
        env=cli_env(sim),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def written_loads(db_file: Path) -> tuple[set[str], set[str]]:
    """The `_dlt_load_id`s of every row of every data table (none may lack one), and the
    loads `_dlt_loads` has as completed."""
    with duckdb.connect(str(db_file), read_only=True) as db:
        tables = [
            t
            for (t,) in db.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = ? "
                # not dlt's tables nor the runs' records (`_repo_analytics_runs`)
                "AND NOT starts_with(table_name, '_') AND table_type = 'BASE TABLE'",
                [DATASET],
            ).fetchall()
        ]
        assert "cloud_commits" in tables and "cloud_commit_parents" in tables, tables
        written: set[str] = set()
        for table in tables:
            missing = db.execute(
                f'SELECT count(*) - count(_dlt_load_id) FROM {DATASET}."{table}"'
            ).fetchone()
            assert missing == (0,), table
            written |= {
                i
                for (i,) in db.execute(
                    f'SELECT DISTINCT _dlt_load_id FROM {DATASET}."{table}"'
                ).fetchall()
            }
        loaded = {
            i
            for (i,) in db.execute(
                f"SELECT load_id FROM {DATASET}._dlt_loads WHERE status = 0"
            ).fetchall()
        }
    return written, loaded


def test_every_row_names_a_load_of_the_run_report(sim: Simulator, tmp_path: Path) -> None:
    """A backfill of two windows: every row of every data table (child tables included) has
    a `_dlt_load_id`, and those are exactly the two loads the run report names, one per
    window. A nightly load after it: every row names one of the reported loads (the nightly
    one replaced the rows it read again)."""
    backfill = run_in(
        tmp_path,
        sim,
        "backfill",
        "--since",
        "2026-05-02",
        "--until",
        "2026-06-01",
        "--window-days",
        "15",
        "--no-reconcile",
    )
    assert backfill.returncode == 0, backfill.stdout + backfill.stderr
    windows = json.loads((tmp_path / "data.report.json").read_text())["backfill"]
    named = [i for w in windows for i in w["report"]["load_ids"]]
    assert len(named) == len(set(named)) == 2
    written, loaded = written_loads(tmp_path / "data.duckdb")
    assert written == set(named) == loaded

    nightly = run_in(
        tmp_path, sim, "load", "--end-date", "2026-06-01T00:00:00+00:00", "--no-reconcile"
    )
    assert nightly.returncode == 0, nightly.stdout + nightly.stderr
    nightly_ids = json.loads((tmp_path / "data.report.json").read_text())["load"]["load_ids"]
    assert len(nightly_ids) == 1 and nightly_ids[0] not in named
    written, loaded = written_loads(tmp_path / "data.duckdb")
    assert nightly_ids[0] in written
    assert written <= {*named, *nightly_ids} <= loaded


def test_schemas_are_written_in_the_working_directory(sim: Simulator, tmp_path: Path) -> None:
    """A load without `--schemas-dir`: the pinned schema (import/) and the produced one
    (export/) are in `schemas/` of the working directory, and nothing is written into the
    installed package's folders."""
    package = Path(pipelines.__file__).resolve().parent.parent
    before = {p: p.stat().st_mtime_ns for p in package.glob("schemas/**/*") if p.is_file()}
    done = run_in(tmp_path, sim, *WEEK_LOAD)
    assert done.returncode == 0, done.stdout + done.stderr
    for folder in ("import", "export"):
        schema = tmp_path / "schemas" / folder / "repo_analytics.schema.yaml"
        assert schema.is_file(), folder
        assert "cloud_commits" in schema.read_text()
    after = {p: p.stat().st_mtime_ns for p in package.glob("schemas/**/*") if p.is_file()}
    assert after == before


def add_a_column_to_the_pin(folder: Path) -> None:
    """A user's edit of the pinned schema in `folder`: a column `analyst_note` on commits."""
    pinned = folder / "schemas" / "import" / "repo_analytics.schema.yaml"
    schema = yaml.safe_load(pinned.read_text())
    schema["tables"]["cloud_commits"]["columns"]["analyst_note"] = {
        "data_type": "text",
        "nullable": True,
    }
    pinned.write_text(yaml.safe_dump(schema))


def test_an_edited_pinned_schema_is_imported_by_the_next_run(
    sim: Simulator, tmp_path: Path
) -> None:
    """The pin is dlt's import schema: a user's edit of it reaches the next run's schema
    (export/), although a run reads the file only once."""
    command = (*WEEK_LOAD, "--resources", "commits")
    done = run_in(tmp_path, sim, *command)
    assert done.returncode == 0, done.stdout + done.stderr
    add_a_column_to_the_pin(tmp_path)
    exported = tmp_path / "schemas" / "export" / "repo_analytics.schema.yaml"
    assert "analyst_note" not in exported.read_text()
    again = run_in(tmp_path, sim, *command)
    assert again.returncode == 0, again.stdout + again.stderr
    columns = yaml.safe_load(exported.read_text())["tables"]["cloud_commits"]["columns"]
    assert columns["analyst_note"]["data_type"] == "text"


def test_a_pin_edited_while_the_working_folder_was_lost_is_imported(
    sim: Simulator, tmp_path: Path
) -> None:
    """A run whose working folder is gone takes the destination's state and schemas; the
    pin, edited meanwhile, is then imported into them (the pin is read before the state is
    restored, and again after it)."""
    command = (*WEEK_LOAD, "--resources", "commits")
    done = run_in(tmp_path, sim, *command)
    assert done.returncode == 0, done.stdout + done.stderr
    add_a_column_to_the_pin(tmp_path)
    shutil.rmtree(tmp_path / "pipelines")
    again = run_in(tmp_path, sim, *command)
    assert again.returncode == 0, again.stdout + again.stderr
    exported = tmp_path / "schemas" / "export" / "repo_analytics.schema.yaml"
    columns = yaml.safe_load(exported.read_text())["tables"]["cloud_commits"]["columns"]
    assert columns["analyst_note"]["data_type"] == "text"
    with duckdb.connect(str(tmp_path / "data.duckdb"), read_only=True) as con:
        names = {
            name
            for (name,) in con.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = ? AND table_name = 'cloud_commits'",
                [DATASET],
            ).fetchall()
        }
    assert "analyst_note" in names
