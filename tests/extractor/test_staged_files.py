"""The Parquet files a load into DuckDB stages are written uncompressed
(`pipelines/duckdb_memory.py` `staged_parquet_format`); a configured compression wins, and a
load into Delta tables keeps dlt's snappy for its own. Real loads of the tiny cloud host over
HTTP; the codecs read from the files dlt keeps of each loaded package."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from simulator import SimConfig, Simulator
from tests.conftest import FIXED_NOW
from tests.extractor.conftest import Loader
from tests.extractor.test_backfill import CLOCK, SINCE, SLACK, assert_tables_equal_truth


def staged_codecs(loader: Loader) -> dict[str, set[str]]:
    """Each staged table's codecs, over every column of every row group of its files."""
    pattern = f"{loader.pipeline_name}/load/loaded/*/completed_jobs/*.parquet"
    codecs: dict[str, set[str]] = {}
    for path in (loader.path / "pipelines").glob(pattern):
        meta = pq.ParquetFile(path).metadata
        found = codecs.setdefault(path.name.split(".")[0], set())
        for group in range(meta.num_row_groups):
            row_group = meta.row_group(group)
            found.update(row_group.column(i).compression for i in range(row_group.num_columns))
    return codecs


def loaded(tmp_path: Path, destination: str = "duckdb") -> dict[str, set[str]]:
    """A load of every level and resource (default settings); the staged files' codecs. Into
    DuckDB, the repository-level tables equal the truth."""
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        loader = Loader(sim, tmp_path / "run", destination=destination)
        loader.load()
        if destination == "duckdb":
            window = {"required": (SINCE, CLOCK), "allowed": (SINCE - SLACK, CLOCK)}
            assert_tables_equal_truth(loader.db_file, sim, "cloud", **window)
    codecs = staged_codecs(loader)
    assert {"cloud_commits", "cloud_pull_requests", "cloud_commit_parents"} <= set(codecs)
    return codecs


def test_a_load_into_duckdb_stages_uncompressed_files(tmp_path: Path) -> None:
    codecs = loaded(tmp_path)
    assert set().union(*codecs.values()) == {"UNCOMPRESSED"}, codecs


def test_a_configured_compression_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATA_WRITER__COMPRESSION", "zstd")
    codecs = loaded(tmp_path)
    assert set().union(*codecs.values()) == {"ZSTD"}, codecs


def test_a_load_into_delta_tables_keeps_dlts_codec(tmp_path: Path) -> None:
    codecs = loaded(tmp_path, destination="parquet")
    assert set().union(*codecs.values()) == {"SNAPPY"}, codecs
