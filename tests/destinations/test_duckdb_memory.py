"""`duckdb_memory_limit` (issue 11): the limit reaches DuckDB through dlt's own credentials
setting, dlt's `global_config` wins where it names a limit, and values are checked. A load
into DuckDB runs at most two jobs at a time (the merges share the limit), unless dlt's own
`load.workers` says otherwise.

Real dlt pipelines into real DuckDB files; the limit read back from DuckDB itself. A run
stopped by the limit, and a bad value on the command line, are in test_config_keys.py and
test_client_faults.py.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dlt
import pytest
from dlt.destinations.impl.filesystem.configuration import (
    FilesystemDestinationClientConfiguration,
)

from pipelines.destinations.duckdb.memory import (
    LOAD_SETTINGS,
    configured_memory_limit,
    duckdb_destination,
    memory_limit,
)
from pipelines.destinations.warehouse import (
    DLT_LOAD_WORKERS,
    DUCKDB_LOAD_WORKERS,
    LOCAL_DELTA_LOAD_WORKERS,
    load_workers,
)
from pipelines.runs.background_load import load_now
from sources.repo_analytics.config import default_of
from sources.repo_analytics.errors import ConfigError

MIB = 2**20
ROOT = Path(__file__).resolve().parents[2]


def setting_after_load(folder: Path, limit: str | None, sql: str) -> Any:
    """Load one row through dlt with `limit`; the first row of `sql` (DuckDB's settings) as
    a connection of dlt's sees it."""
    pipeline = dlt.pipeline(
        "setting_probe",
        destination=duckdb_destination(str(folder / "settings.duckdb"), limit, "setting_probe"),
        dataset_name="probe",
        pipelines_dir=str(folder / "pipelines"),
    )
    pipeline.run([{"id": 1}], table_name="rows")
    with pipeline.sql_client() as client:
        first, *_ = client.execute_sql(sql)
    return first


def limit_in_duckdb(folder: Path, limit: str | None) -> tuple[float, int]:
    """DuckDB's memory limit (MiB) and threads on dlt's connection after a load."""
    text, threads = setting_after_load(
        folder, limit, "SELECT current_setting('memory_limit'), current_setting('threads')"
    )
    number, unit = str(text).split()
    return float(number) * {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024}[unit], int(threads)


def test_the_default_limit_reaches_dlts_connections(tmp_path: Path) -> None:
    default = memory_limit({})
    assert default == default_of("duckdb_memory_limit") == "80MB"
    mib, _ = limit_in_duckdb(tmp_path, default)
    assert mib == pytest.approx(80e6 / MIB, abs=0.1)


def test_default_leaves_duckdbs_own_limit(tmp_path: Path) -> None:
    """`default`: DuckDB's own limit, 80 % of the machine's memory: far above ours."""
    assert memory_limit({"duckdb_memory_limit": "default"}) is None
    mib, _ = limit_in_duckdb(tmp_path, None)
    assert mib > 1024


def test_dlts_global_config_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "DESTINATION__DUCKDB__CREDENTIALS__GLOBAL_CONFIG",
        '{"memory_limit": "100MB", "threads": 1}',
    )
    mib, threads = limit_in_duckdb(tmp_path, "150MB")
    assert mib == pytest.approx(100e6 / MIB, abs=0.1)
    assert threads == 1


def order_setting(folder: Path, limit: str | None) -> Any:
    """DuckDB's `preserve_insertion_order` on dlt's connection after a load."""
    (value,) = setting_after_load(
        folder, limit, "SELECT current_setting('preserve_insertion_order')"
    )
    return value


@pytest.mark.parametrize("limit", ["150MB", None])
def test_loads_keep_no_insertion_order(tmp_path: Path, limit: str | None) -> None:
    """The merges need not keep the staged rows' order (DuckDB's default keeps it), with our
    limit or DuckDB's own."""
    assert LOAD_SETTINGS == {"preserve_insertion_order": False}
    assert order_setting(tmp_path, limit) is False


def test_dlts_global_config_wins_for_the_order_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "DESTINATION__DUCKDB__CREDENTIALS__GLOBAL_CONFIG", '{"preserve_insertion_order": true}'
    )
    assert order_setting(tmp_path, "150MB") is True
    mib, _ = limit_in_duckdb(tmp_path, "150MB")  # the limit still ours
    assert mib == pytest.approx(150e6 / MIB, abs=0.1)


def test_the_variable_sets_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCES__REPO_ANALYTICS__DUCKDB_MEMORY_LIMIT", "0.5GB")
    assert configured_memory_limit({}) == "0.5GB"
    assert configured_memory_limit({"duckdb_memory_limit": "64MiB"}) == "64MiB"  # a flag wins
    mib, _ = limit_in_duckdb(tmp_path, configured_memory_limit({}))
    assert mib == pytest.approx(0.5e9 / MIB, abs=0.1)


@pytest.mark.parametrize("value", ["lots", "0MB", "12", "-5MB", "80%", ""])
def test_a_bad_value_names_the_key_and_the_valid_ones(value: str) -> None:
    with pytest.raises(ConfigError) as raised:
        memory_limit({"duckdb_memory_limit": value})
    assert raised.value.key == "duckdb_memory_limit"
    assert "256MB or 2GB" in str(raised.value) and "`default`" in str(raised.value)


def job_spans(
    folder: Path, destination: Any = None, load: Callable[[dlt.Pipeline], Any] | None = None
) -> list[tuple[Any, Any]]:
    """Extract and normalize a dozen merged tables, load them with `load` (into a DuckDB
    file, or into Delta tables at `destination`), and return each load job's [started,
    finished] from dlt's load metrics, in order of start."""
    pipeline = dlt.pipeline(
        "workers_probe",
        destination=destination
        or duckdb_destination(str(folder / "workers.duckdb"), "150MB", "workers_probe"),
        dataset_name="probe",
        pipelines_dir=str(folder / "pipelines"),
    )
    rows = [{"id": i, "value": f"value {i}"} for i in range(ROWS)]
    table_format = "delta" if destination is not None else None
    pipeline.extract(
        [
            dlt.resource(
                rows,
                name=f"t{number}",
                primary_key="id",
                write_disposition="merge",
                table_format=table_format,
            )
            for number in range(12)
        ]
    )  # one package: its jobs are the load's to schedule
    pipeline.normalize()
    info = load(pipeline) if load is not None else load_now(pipeline, 0)
    spans = [
        (job.started_at, job.finished_at)
        for metrics in info.metrics.values()
        for step in metrics
        for job in step["job_metrics"].values()
    ]
    assert len(spans) >= 12 and all(end is not None for _, end in spans)
    return sorted(spans)


ROWS = 5_000


def most_at_once(spans: list[tuple[Any, Any]]) -> int:
    """The most jobs running at one moment (a job's end before another's start at a tie)."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def test_a_duckdb_load_runs_one_job_at_a_time(tmp_path: Path) -> None:
    """dlt ran up to 20 jobs at once: a large year's merges then failed to pin memory under
    the 150MB limit and were retried. Now one runs at a time, with DuckDB's threads."""
    assert DUCKDB_LOAD_WORKERS == 1
    assert most_at_once(job_spans(tmp_path)) <= DUCKDB_LOAD_WORKERS


def test_dlts_load_workers_setting_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOAD__WORKERS", "8")
    assert most_at_once(job_spans(tmp_path)) > DUCKDB_LOAD_WORKERS


def test_a_load_into_local_delta_tables_runs_two_jobs_at_most(tmp_path: Path) -> None:
    """Each job a deltalake merge: all at once (dlt's 20), a medium year's loads peaked
    ~180 MB higher. Every load of ours (`load_now`: the backfill's, the nightly's, the load
    of pending packages); dlt's setting still wins."""
    lake = dlt.destinations.filesystem(str(tmp_path / "lake"))
    assert LOCAL_DELTA_LOAD_WORKERS == 2
    assert most_at_once(job_spans(tmp_path, lake)) <= LOCAL_DELTA_LOAD_WORKERS


def test_dlts_load_workers_setting_wins_on_delta_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOAD__WORKERS", "8")
    lake = dlt.destinations.filesystem(str(tmp_path / "lake"))
    assert most_at_once(job_spans(tmp_path, lake, lambda p: load_now(p, 0))) > 2


def test_delta_tables_in_an_object_store_keep_dlts_default_workers(tmp_path: Path) -> None:
    pipeline = dlt.pipeline(
        "workers_remote",
        destination=dlt.destinations.filesystem("s3://a-bucket/lake"),
        pipelines_dir=str(tmp_path),
    )
    remote = FilesystemDestinationClientConfiguration(bucket_url="s3://a-bucket/lake")
    local = FilesystemDestinationClientConfiguration(bucket_url=str(tmp_path / "lake"))
    assert load_workers(pipeline, remote) == DLT_LOAD_WORKERS == 20
    assert load_workers(pipeline, local) == LOCAL_DELTA_LOAD_WORKERS


def test_dlts_credentials_settings_reach_the_connections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The credentials come resolved from dlt's own settings: the pipeline's section first
    (`<pipeline>.destination.duckdb.credentials`), then `destination.duckdb.credentials`, as
    dlt reads them. A `local_config` setting and a `pragmas` one reach dlt's connections."""
    monkeypatch.setenv(
        "SETTING_PROBE__DESTINATION__DUCKDB__CREDENTIALS__LOCAL_CONFIG",
        '{"default_order": "desc"}',
    )
    monkeypatch.setenv("DESTINATION__DUCKDB__CREDENTIALS__LOCAL_CONFIG", '{"default_order": "asc"}')
    monkeypatch.setenv("DESTINATION__DUCKDB__CREDENTIALS__PRAGMAS", '["enable_progress_bar"]')
    destination = duckdb_destination(str(tmp_path / "settings.duckdb"), "150MB", "setting_probe")
    pipeline = dlt.pipeline(
        "setting_probe",
        destination=destination,
        dataset_name="probe",
        pipelines_dir=str(tmp_path / "pipelines"),
    )
    pipeline.run([{"id": 1}], table_name="rows")
    with pipeline.sql_client() as client:
        order, progress_bar = client.execute_sql(
            "SELECT current_setting('default_order'), current_setting('enable_progress_bar')"
        )[0]
    assert (str(order).lower(), progress_bar) == ("desc", True)
    # what dlt's steps were given is the one resolved instance (not resolved again per step)
    assert pipeline.sql_client().credentials is destination.config_params["credentials"]


PRINTED = """
import sys
import dlt
from pipelines.destinations.duckdb.memory import duckdb_destination
destination = duckdb_destination(sys.argv[1] + "/printed.duckdb", "80MB", "printed")
pipeline = dlt.pipeline("printed", destination=destination, dataset_name="probe",
                        pipelines_dir=sys.argv[1] + "/pipelines")
info = pipeline.run([{"id": 1}], table_name="rows")
print(str(pipeline.sql_client().credentials))
print("sqlalchemy" in sys.modules)
"""


def test_a_run_into_duckdb_imports_no_sqlalchemy(tmp_path: Path) -> None:
    """dlt's DuckDB credentials parse and print themselves through SQLAlchemy wherever it is
    installed (the `dagster` extra brings it: ~0.3 s and 12 MB of every run); ours print the
    same location with dlt's own URL class."""
    import importlib.util

    done = subprocess.run(
        [sys.executable, "-c", PRINTED, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    printed, imported = done.stdout.split()
    assert printed == f"duckdb:///{tmp_path}/printed.duckdb"
    # where SQLAlchemy is not installed the check says nothing: the test environment has it
    assert importlib.util.find_spec("sqlalchemy") is not None
    assert imported == "False"
