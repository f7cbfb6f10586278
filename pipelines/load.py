"""The nightly incremental load: one dlt pipeline run of the configured source."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dlt
from dlt.common.pipeline import LoadInfo

from sources.repo_analytics import RunReport, repo_analytics

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
        pipelines_dir=pipelines_dir,
        import_schema_path=str(schemas_dir / "import"),
        export_schema_path=str(schemas_dir / "export"),
    )


def run_load(pipeline: dlt.Pipeline, **source_args: Any) -> LoadResult:
    """Extract and load once; unfinished packages of a crashed run are dropped first.

    `concurrency` (scopes read at once) becomes dlt's extract worker count unless
    EXTRACT__WORKERS is set.
    """
    report = RunReport()
    if "concurrency" in source_args and "EXTRACT__WORKERS" not in os.environ:
        os.environ["EXTRACT__WORKERS"] = str(source_args["concurrency"])
    if pipeline.has_pending_data:
        pipeline.drop_pending_packages()
    source = repo_analytics(report=report, **source_args)
    info = pipeline.run(source, loader_file_format="parquet")
    return LoadResult(info, report, pipeline)
