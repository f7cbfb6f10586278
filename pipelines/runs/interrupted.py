"""A package whose load a crash interrupted: the merges of its doubtful tables de-duplicate.

The source declares the staged rows of its tables de-duplicated (dlt's `deduplicated`, see
`sources/repo_analytics/context.table_hints`): a run yields each key once, so a merge inserts
the staged rows as they are. dlt copies each file of a package into its staging table in a
job of its own and records the job's end right after the copy (a pending transition, which
a resumed load honours without running the job again). Killed between the copy's commit and
that record, the next run copies the file again, and the staging table holds its rows
twice. So before such a package's load resumes, the tables of its copy jobs that started
and left no record lose the declaration in the package's own schema (the one dlt's load
reads): their merges keep one row per key, as dlt's merges do by default.
"""

from __future__ import annotations

from typing import Any, Final

import dlt
from dlt.common import logger
from dlt.common.schema import Schema
from dlt.common.storages.file_storage import FileStorage
from dlt.common.storages.load_package import PackageStorage, ParsedLoadJobFileName

from pipelines.runs.dlt_internals import load_storage

DEDUPLICATED: Final = "x-stage-data-deduplicated"  # dlt's table hint for `deduplicated`
MERGE_JOB_FORMAT: Final = "sql"  # a merge (a follow-up job) reruns whole: it changes no staged row


def deduplicate_interrupted(pipeline: dlt.Pipeline) -> None:
    """Drop the `deduplicated` declaration of the tables whose copy may have run twice, in
    every normalized package of `pipeline` (call it before their load resumes)."""
    packages = load_storage(pipeline).normalized_packages
    for load_id in pipeline.list_normalized_load_packages():
        doubtful = interrupted_copies(packages, load_id)
        if not doubtful:
            continue
        schema = packages.load_schema(load_id)
        tables = sorted(name for name in doubtful if undeclare(schema, name))
        if tables:
            packages.save_schema(load_id, schema)
            logger.info(
                f"load {load_id} was interrupted while copying {', '.join(tables)}: "
                "their merges de-duplicate the staged rows"
            )


def undeclare(schema: Schema, table: str) -> bool:
    """Drop `table`'s `deduplicated` declaration from `schema`; whether it had one."""
    hints: dict[str, Any] = schema.tables.get(table, {})  # type: ignore[assignment]
    return bool(hints.pop(DEDUPLICATED, None))


def interrupted_copies(packages: PackageStorage, load_id: str) -> set[str]:
    """Tables of the package's copy jobs that started and left no record of their end."""
    tables = set()
    for path in packages.list_started_jobs(load_id):
        name = FileStorage.get_file_name_from_file_path(path)
        job = ParsedLoadJobFileName.parse(name)
        if job.file_format == MERGE_JOB_FORMAT:
            continue
        if packages.load_pending_transition(load_id, name) is None:
            tables.add(job.table_name)
    return tables
