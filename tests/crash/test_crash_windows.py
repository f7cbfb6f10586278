"""A backfill killed inside a window's load, or in dlt's normalize or load commit, loses nothing.

The crashes are made exactly, in a subprocess. First: the packages of two windows are both
normalized and not loaded (their loads were skipped), then the load is killed (SIGKILL, from
inside dlt's SQL job runner) at its first merge job, before it ran. The rerun must finish
both packages and land every row of both windows, each recorded finished by its own package.
(When windows ran on pipelines of their own, each needed a staging dataset of its own: one's
load emptied the shared staging tables under the other's half-loaded package.)
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
from dlt.common.storages.load_package import PackageStorage

from pipelines.runs.backfill import run_backfill
from simulator import Simulator
from tests.destinations.test_parquet_backfill import delta_rows
from tests.runs.test_backfill import (
    CLOCK,
    assert_rows_equal_truth,
    assert_tables_equal_truth,
    rows_of,
    source_args,
)
from tests.support.loader import DATASET, DESTINATIONS, Loader

FIRST = datetime(2026, 4, 2, tzinfo=UTC)
WINDOW = timedelta(days=30)  # two windows: [04-02, 05-02) and [05-02, 06-01), both with data


def killed_run(script: str, loader: Loader, tmp_path: Path, **fields: Any) -> None:
    """Run `script` in a Python subprocess with the loader's files, its source arguments, the
    clock and `fields` as its JSON argument; it must end killed by SIGKILL."""
    arguments = {
        "destination": loader.destination,
        "lake": str(loader.lake),
        "db": str(loader.db_file),
        "pipelines": str(tmp_path / "pipelines"),
        "schemas": str(tmp_path / "schemas"),
        "source": source_args(loader),
        "clock": CLOCK.isoformat(),
        **fields,
    }
    crash = subprocess.run(
        [sys.executable, "-c", script, json.dumps(arguments)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert crash.returncode == -signal.SIGKILL, crash.stderr[-2000:]


CRASH = r"""
import json, os, signal, sys
from datetime import datetime
from pathlib import Path

import dlt
from dlt.destinations.job_client_impl import SqlLoadJob

import pipelines.runs.load
from pipelines.runs.backfill import signature, window_key
from pipelines.runs.load import make_pipeline, run_load

args = json.loads(sys.argv[1])
main = make_pipeline(destination=dlt.destinations.duckdb(args["db"]),
                     dataset_name="repo_analytics", pipelines_dir=args["pipelines"],
                     schemas_dir=Path(args["schemas"]))
source = args["source"]
clock = datetime.fromisoformat(args["clock"])


def window(start, end, restore):
    loading = pipelines.runs.load.load_now
    pipelines.runs.load.load_now = lambda *a, **k: None  # the package stays normalized, not loaded
    try:  # as the backfill runs its windows: state restored before the first only
        run_load(main, start_date=start, end_date=end, now=clock, views=False, restore=restore,
                 backfill_window={"key": window_key(datetime.fromisoformat(start),
                                                    datetime.fromisoformat(end)),
                                  "signature": signature(source)}, **source)
    except AttributeError:  # the skipped load returned nothing
        pass
    pipelines.runs.load.load_now = loading


def killed_at_first_merge(self):
    with open(self._file_path, encoding="utf-8") as sql:
        if "DELETE FROM" in sql.read():  # a merge (of the package's files or staged rows)
            os.kill(os.getpid(), signal.SIGKILL)
    return run(self)


run = SqlLoadJob.run
window(*args["windows"][0], restore=True)
window(*args["windows"][1], restore=False)
SqlLoadJob.run = killed_at_first_merge
main.load()
"""


def test_rerun_after_a_kill_at_a_window_merge_lands_every_window(
    make_sim: Any, tmp_path: Path
) -> None:
    sim: Simulator = make_sim(edition="server")
    loader = Loader(sim, tmp_path)
    args = source_args(loader)
    windows = [
        (FIRST.isoformat(), (FIRST + WINDOW).isoformat()),
        ((FIRST + WINDOW).isoformat(), CLOCK.isoformat()),
    ]
    killed_run(CRASH, loader, tmp_path, windows=windows)

    rerun = run_backfill(loader.pipeline(), FIRST, CLOCK, window_days=30, now=CLOCK, **args)

    # both windows were finished by their crashed packages, so nothing is read again ...
    assert [w.resumed for w in rerun.windows] == [True, True]
    # ... and every commit and pull request of both windows is there, by key and value
    assert_tables_equal_truth(
        loader.db_file,
        sim,
        "server",
        required=(FIRST, CLOCK),
        allowed=(FIRST - timedelta(days=1), CLOCK),
    )


# A run killed right after one of dlt's steps (`kill`), inside a commit of its own:
# dlt commits a normalized package in two steps: it renames the package into load/normalized,
# then deletes the extracted copy ("do not kill this process"). Killed between the two, the
# package is in both places; normalizing it again cannot commit (the folder is taken)
# (`normalized`).
# dlt completes a load in three steps: it records the load in the destination (`_dlt_loads`),
# writes the package's completed marker, then renames the package out of load/normalized.
# Killed after the marker, the rerun loaded the package again: it recorded the load twice and
# failed with `LoadPackageAlreadyCompleted`, on every rerun. Killed before the marker, it
# recorded the load twice (`recorded`; after the marker: `marked`).
KILLED_AFTER = r"""
import json, os, signal, sys
from datetime import datetime
from pathlib import Path

import dlt
from dlt.common.storages.load_package import PackageStorage
from dlt.common.storages.load_storage import LoadStorage
from dlt.destinations.impl.filesystem.filesystem import FilesystemClient
from dlt.destinations.job_client_impl import SqlJobClientBase

from pipelines.runs.backfill import signature, window_key
from pipelines.runs.load import make_pipeline, run_load

args = json.loads(sys.argv[1])
lake = args["destination"] == "parquet"
target = (dlt.destinations.filesystem(bucket_url=args["lake"]) if lake
          else dlt.destinations.duckdb(args["db"]))
main = make_pipeline(destination=target, dataset_name="repo_analytics",
                     pipelines_dir=args["pipelines"], schemas_dir=Path(args["schemas"]))
owner, step = {"normalized": (LoadStorage, "commit_new_load_package"),
               "recorded": (FilesystemClient if lake else SqlJobClientBase, "complete_load"),
               "marked": (PackageStorage, "complete_loading_package")}[args["kill"]]
complete = getattr(owner, step)


def killed_after(self, *args):
    complete(self, *args)
    os.kill(os.getpid(), signal.SIGKILL)


setattr(owner, step, killed_after)
start, end = args["window"]
run_load(main, start_date=start, end_date=end, now=datetime.fromisoformat(args["clock"]),
         views=False,
         backfill_window={"key": window_key(datetime.fromisoformat(start),
                                            datetime.fromisoformat(end)),
                          "signature": signature(args["source"])}, **args["source"])
"""


def recorded_loads(loader: Loader, load_id: str) -> int:
    """How many times the dataset records the load `load_id`: rows of `_dlt_loads` in the
    DuckDB file, files of it in the lake (none before the first load made them)."""
    if loader.destination == "parquet":
        loads = loader.lake / DATASET / "_dlt_loads"
        return len(list(loads.glob(f"*{load_id}*"))) if loads.is_dir() else 0
    if not loader.db_file.exists():
        return 0
    with duckdb.connect(str(loader.db_file), read_only=True) as con:
        (count,) = con.execute(
            f"select count(*) from {DATASET}._dlt_loads where load_id = ?", [load_id]
        ).fetchone()  # type: ignore[misc]
    return int(count)


@pytest.mark.parametrize("destination", DESTINATIONS)
@pytest.mark.parametrize("kill", ["normalized", "recorded", "marked"])
def test_rerun_after_a_kill_inside_a_dlt_commit_finishes_the_package(
    make_sim: Any, tmp_path: Path, kill: str, destination: str
) -> None:
    """Killed inside dlt's normalize commit (`normalized`: the package both extracted and
    normalized) or its load commit (`recorded`, `marked`: loaded, still among the normalized
    packages), a window's package is finished by the rerun: loaded if it was not, archived if
    it was, its load recorded once; its window is skipped, not read again, and every row is
    there, in a DuckDB file and in Delta tables. (Before, each of these failed every rerun or,
    into DuckDB, recorded the load twice.)"""
    sim: Simulator = make_sim(edition="cloud")
    loader = Loader(sim, tmp_path, destination)
    args = source_args(loader)
    start = CLOCK - WINDOW
    killed_run(
        KILLED_AFTER,
        loader,
        tmp_path,
        window=(start.isoformat(), CLOCK.isoformat()),
        kill=kill,
    )
    folder = tmp_path / "pipelines" / "repo_analytics"
    load = folder / "load"
    (crashed,) = [p.name for p in (load / "normalized").iterdir()]
    marker = load / "normalized" / crashed / PackageStorage.PACKAGE_COMPLETED_FILE_NAME
    assert marker.exists() == (kill == "marked"), "the kill did not land where it was meant to"
    extracted = [p.name for p in (folder / "normalize" / "extracted").iterdir()]
    assert extracted == ([crashed] if kill == "normalized" else [])
    assert recorded_loads(loader, crashed) == (kill != "normalized")
    before = sim.requests()["total"]

    rerun = run_backfill(loader.pipeline(), start, CLOCK, window_days=30, now=CLOCK, **args)

    assert [w.resumed for w in rerun.windows] == [True]  # finished by the crashed package
    assert sim.requests()["total"] - before < 50, "the finished window was read again"
    assert not list((load / "normalized").iterdir())
    assert (load / "loaded" / crashed).is_dir()
    assert recorded_loads(loader, crashed) == 1, "the crashed load was recorded again"

    def read(table: str, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
        if destination == "parquet":
            return delta_rows(loader.lake, table, columns)
        return rows_of(loader.db_file, table, columns)

    assert_rows_equal_truth(
        read, sim, "cloud", required=(start, CLOCK), allowed=(start - timedelta(hours=26), CLOCK)
    )
