"""The DuckDB file a run makes when nothing names one, and its name against the dataset's.

DuckDB 2 names a file's catalog after the file (up to its first dot) and cannot tell
`repo_analytics.<table>` apart when the catalog and the dataset share that name: the first
load fails (`Ambiguous reference to catalog or schema`), and so does every reader's query. The
default file is `repo-analytics.duckdb`; a file named as its dataset is refused before
anything is asked or written.

The real command in a subprocess against a real simulator, the real DuckDB file read back as a
BI tool reads it; expected rows from the simulator's ground truth.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import deltalake
import duckdb
import pytest

from pipelines.destinations.duckdb.memory import duckdb_destination
from pipelines.runs.load import make_pipeline
from simulator import SimConfig, Simulator
from sources.repo_analytics import ConfigError
from tests.runs.test_backfill import SLACK, assert_rows_equal_truth, cli_env, log_since
from tests.support import FIXED_NOW

CLI = Path(sys.executable).parent / "repo-analytics"
END = datetime.fromtimestamp(FIXED_NOW, tz=UTC)
START = END - timedelta(days=10)
PARQUET_DIR = "repo_analytics_parquet"  # --parquet-dir's default


def run_default_load(
    sim: Simulator, folder: Path, *options: str, pipelines: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`repo-analytics [options] load` of cloud commits over [START, END) in `folder`, with no
    --duckdb, --dataset nor --pipeline-name (the pipelines folder, `folder/pipelines` unless
    given, is kept out of the user's own dlt folder)."""
    return subprocess.run(
        [
            str(CLI),
            "--pipelines-dir",
            str(pipelines or folder / "pipelines"),
            "--progress",
            "off",
            *options,
            "load",
            "--start-date",
            START.isoformat(),
            "--end-date",
            END.isoformat(),
            "--levels",
            "repository",
            "--resources",
            "commits",
        ],
        env=cli_env(sim),
        cwd=folder,
        text=True,
        capture_output=True,
        timeout=300,
        check=False,
    )


def assert_commits_of_the_range(sim: Simulator, db_file: Path) -> None:
    """The file's commits are the truth's of [START, END), read as a BI tool reads them."""

    def read(table: str, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
        names = ", ".join(f'"{c}"' for c in columns)
        with duckdb.connect(str(db_file), read_only=True) as con:
            return con.execute(f"SELECT {names} FROM repo_analytics.{table}").fetchall()

    assert_rows_equal_truth(
        read, sim, "cloud", required=(START, END), allowed=(START - SLACK, END), prs=False
    )


@pytest.fixture(scope="module")
def cloud() -> Iterator[Simulator]:
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        yield sim


def test_a_load_on_the_default_file_lands_and_reads_by_dataset(
    cloud: Simulator, tmp_path: Path
) -> None:
    """The rows land in `repo-analytics.duckdb` of the working folder (its report beside it),
    and a BI query of `repo_analytics.<table>` (the dataset-qualified name, unquoted) reads
    the truth's commits of the range. On DuckDB 2 with the earlier default file,
    `repo_analytics.duckdb`, the load failed with exit 1."""
    done = run_default_load(cloud, tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in tmp_path.glob("*.duckdb")) == ["repo-analytics.duckdb"]
    assert (tmp_path / "repo-analytics.report.json").is_file()
    db_file = tmp_path / "repo-analytics.duckdb"
    assert_commits_of_the_range(cloud, db_file)


def loads_in(db_file: Path) -> int:
    with duckdb.connect(str(db_file), read_only=True) as con:
        (count,) = con.execute("SELECT count(*) FROM repo_analytics._dlt_loads").fetchone() or (0,)
    return int(count)


def test_a_relative_file_is_the_working_folder_s_not_the_first_run_s(
    cloud: Simulator, tmp_path: Path
) -> None:
    """The default (relative) file of a run in another folder, with the same pipeline, is that
    folder's: it gets the whole range and its report; the first folder's file gets no load.
    dlt resolves a relative path against the folder of the pipeline's first run, which the
    run loaded into while its report and views went to this folder's file."""
    first, second, pipelines = tmp_path / "first", tmp_path / "second", tmp_path / "pipelines"
    first.mkdir()
    second.mkdir()
    assert run_default_load(cloud, first, pipelines=pipelines).returncode == 0
    loads_of_first = loads_in(first / "repo-analytics.duckdb")

    done = run_default_load(cloud, second, pipelines=pipelines)

    assert done.returncode == 0, done.stdout + done.stderr
    db_file = second / "repo-analytics.duckdb"
    assert (second / "repo-analytics.report.json").is_file()
    assert loads_in(first / "repo-analytics.duckdb") == loads_of_first
    assert_commits_of_the_range(cloud, db_file)


def test_a_relative_parquet_folder_is_the_working_folder_s(
    cloud: Simulator, tmp_path: Path
) -> None:
    """The same for `--destination parquet` and its default, relative `--parquet-dir`."""
    first, second, pipelines = tmp_path / "first", tmp_path / "second", tmp_path / "pipelines"
    first.mkdir()
    second.mkdir()
    options = ("--destination", "parquet")
    assert run_default_load(cloud, first, *options, pipelines=pipelines).returncode == 0
    loads_of_first = sorted((first / PARQUET_DIR / "repo_analytics" / "_dlt_loads").iterdir())

    done = run_default_load(cloud, second, *options, pipelines=pipelines)

    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted((first / PARQUET_DIR / "repo_analytics" / "_dlt_loads").iterdir()) == (
        loads_of_first
    )
    lake = second / PARQUET_DIR / "repo_analytics"

    def read(table: str, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
        data = deltalake.DeltaTable(str(lake / table)).to_pyarrow_table(columns=list(columns))
        return list(zip(*(data.column(c).to_pylist() for c in columns), strict=True))

    assert_rows_equal_truth(
        read, cloud, "cloud", required=(START, END), allowed=(START - SLACK, END), prs=False
    )


def test_the_earlier_default_file_is_not_left_behind(cloud: Simulator, tmp_path: Path) -> None:
    """A folder holding the earlier default file and not today's: one line naming both and
    the rename, exit 2, nothing asked of the host, nothing written (a run would have started
    an empty file beside the data while the pipeline's cursors skip what it holds)."""
    (tmp_path / "repo_analytics.duckdb").write_bytes(b"")
    before = cloud.requests()["total"]

    done = run_default_load(cloud, tmp_path)

    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("repo-analytics: config error: config `duckdb`")
    assert "repo_analytics.duckdb" in line and "rename it to repo-analytics.duckdb" in line
    assert log_since(cloud, before) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo_analytics.duckdb"]


def test_the_earlier_default_file_named_by_flag_loads_beside_another_dataset(
    cloud: Simulator, tmp_path: Path
) -> None:
    """The earlier file stays usable: named by --duckdb, with a dataset of another name."""
    done = run_default_load(
        cloud, tmp_path, "--duckdb", "repo_analytics.duckdb", "--dataset", "analytics"
    )

    assert done.returncode == 0, done.stdout + done.stderr
    with duckdb.connect(str(tmp_path / "repo_analytics.duckdb"), read_only=True) as con:
        (count,) = con.execute("SELECT count(*) FROM analytics.cloud_commits").fetchone() or (0,)
    assert count > 0


@pytest.mark.parametrize(
    ("destination", "pipeline_name", "dataset"),
    [
        ("duckdb", "sales", "sales"),  # dlt's own default file: <pipeline_name>.duckdb
        ("sales.v2.duckdb", "p", "Sales"),
        ("folder/.sales.duckdb", "p", "sales"),
    ],
)
def test_a_pipeline_into_a_file_named_as_its_dataset_is_refused(
    tmp_path: Path, destination: str, pipeline_name: str, dataset: str
) -> None:
    """Every entry point (the Dagster assets too) makes its pipeline with `make_pipeline`:
    a DuckDB file whose catalog (its name up to the first dot, any case) is the dataset's
    stops there, before a pipeline folder is made."""
    target = (
        destination
        if destination == "duckdb"
        else duckdb_destination(str(tmp_path / destination), None, pipeline_name)
    )
    with pytest.raises(ConfigError) as raised:
        make_pipeline(pipeline_name, target, dataset.lower(), str(tmp_path / "pipelines"))
    assert raised.value.key == "destination"
    assert "is not the dataset's" in str(raised.value)
    assert not (tmp_path / "pipelines").exists()


def test_a_pipeline_into_a_file_named_otherwise_is_made(tmp_path: Path) -> None:
    pipeline = make_pipeline(
        "sales",
        duckdb_destination(str(tmp_path / "sales-data.duckdb"), None, "sales"),
        "sales",
        str(tmp_path / "pipelines"),
        tmp_path / "schemas",
    )
    assert pipeline.dataset_name == "sales"
