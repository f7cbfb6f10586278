"""The nightly incremental load: one dlt pipeline run of the configured source."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dlt
from dlt.common.pipeline import LoadInfo

from pipelines.views import create_views
from sources.repo_analytics import RunReport, repo_analytics
from sources.repo_analytics.settings import DEFAULT_CONCURRENCY

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "schemas"


@dataclass
class LoadResult:
    info: LoadInfo | None
    report: RunReport
    pipeline: Any


def make_pipeline(pipeline_name: str = "repo_analytics", destination: Any = None,
                  dataset_name: str = "repo_analytics", pipelines_dir: str | None = None,
                  schemas_dir: Path = SCHEMAS) -> dlt.Pipeline:
    """The pipeline: DuckDB by default, schemas imported from and exported to `schemas_dir`."""
    return dlt.pipeline(
        pipeline_name=pipeline_name,
        destination=destination or "duckdb",
        dataset_name=dataset_name,
        pipelines_dir=pipelines_dir,  # type: ignore[arg-type]  # None: dlt's default
        import_schema_path=str(schemas_dir / "import"),
        export_schema_path=str(schemas_dir / "export"),
    )


def run_load(pipeline: dlt.Pipeline, **source_args: Any) -> LoadResult:
    """Extract and load once; unfinished packages of a crashed run are dropped first.

    `concurrency` (scopes read at once) is dlt's extract worker count for this run, unless
    EXTRACT__WORKERS is set in the environment.
    """
    report = RunReport()
    if pipeline.has_pending_data:
        # abort_packages (dlt >= 1.30; drop_pending_packages is its deprecated alias, which
        # warns on stderr): restores the local state and schemas the packages started from.
        pipeline.abort_packages()
    workers = str(source_args.get("concurrency") or DEFAULT_CONCURRENCY)
    with extract_workers(workers):
        if pipeline.destination.destination_name == "filesystem":
            source_args = {"merge_strategy": "upsert", **source_args}
        source = repo_analytics(report=report, **source_args)
        info = pipeline.run(source, loader_file_format="parquet", **run_options(pipeline))
    if pipeline.destination.destination_name == "duckdb":
        create_views(pipeline)
    return LoadResult(info, report, pipeline)


def run_options(pipeline: dlt.Pipeline) -> dict[str, Any]:
    """Files on a filesystem (Parquet) merge only as Delta tables: ask for that format."""
    if pipeline.destination.destination_name == "filesystem":
        return {"table_format": "delta"}
    return {}


@contextmanager
def extract_workers(count: str) -> Iterator[None]:
    """dlt reads its worker count from config; set it for one run and put it back."""
    if "EXTRACT__WORKERS" in os.environ:
        yield
        return
    os.environ["EXTRACT__WORKERS"] = count
    try:
        yield
    finally:
        os.environ.pop("EXTRACT__WORKERS", None)
