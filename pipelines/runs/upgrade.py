"""Datasets written before rows named their source: the `source` column added, and filled.

Every table's key now starts with `source` (`sources/repo_analytics/reading/origin.py`). A table of
an older dataset lacks the column, and its rows would never match a re-read row's key: the
first run of this version would duplicate every row it reads again. So before that run
loads, each such table gets the column (dlt would add it NOT NULL, which an existing table's
rows refuse), and when the pipeline's state was written by the older version (it read
resources but records no source) the rows get this run's source: an older dataset was
loaded by one pipeline, from one source, the one this pipeline's state was made for. A
pipeline new to the dataset leaves them to that older pipeline's first run (NULL until then).
"""

from __future__ import annotations

from typing import Any

import dlt
from dlt.common import logger

from pipelines.destinations.delta.children import delta_tables
from sources.repo_analytics.reading.origin import SOURCE, is_legacy_state


def legacy_pipeline(pipeline: dlt.Pipeline) -> bool:
    """Whether the pipeline's state was written before sources were recorded."""
    return is_legacy_state(pipeline.state.get("sources", {}).get("repo_analytics", {}))


def adopt_rows(pipeline: dlt.Pipeline, source: str, fill: bool) -> dict[str, int]:
    """Add the `source` column to the dataset's tables lacking it (dlt would add it NOT NULL:
    DuckDB refuses that on a table with rows, a Delta merge on a table without it) and, with
    `fill`, set it to `source` where it is NULL; the rows filled per table."""
    name = pipeline.destination.destination_name
    if name == "duckdb":
        filled = adopt_duckdb(pipeline, source, fill)
    elif name == "filesystem":
        filled = adopt_delta(pipeline, source, fill)
    else:
        return {}
    if filled:
        logger.info(f"rows written before rows named their source, now of `{source}`: {filled}")
    return filled


def adopt_duckdb(pipeline: dlt.Pipeline, source: str, fill: bool) -> dict[str, int]:
    filled: dict[str, int] = {}
    with pipeline.sql_client() as client:
        con: Any = client.native_connection
        staging = client.staging_dataset_name
        for dataset in (pipeline.dataset_name, staging):
            tables = con.execute(
                "SELECT table_name, bool_or(column_name = ?) FROM information_schema.columns "
                "WHERE table_schema = ? AND NOT starts_with(table_name, '_dlt') "
                "AND table_name IN (SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = ? AND table_type = 'BASE TABLE') GROUP BY ALL",
                [SOURCE, dataset, dataset],
            ).fetchall()
            for table, has_source in tables:
                qualified = f'"{dataset}"."{table}"'
                if not has_source:
                    con.execute(f'ALTER TABLE {qualified} ADD COLUMN "{SOURCE}" VARCHAR')
                if fill and dataset != staging:
                    (count,) = con.execute(
                        f'UPDATE {qualified} SET "{SOURCE}" = ? WHERE "{SOURCE}" IS NULL',
                        [source],
                    ).fetchone()
                    if count:
                        filled[table] = int(count)
    return filled


def adopt_delta(pipeline: dlt.Pipeline, source: str, fill: bool) -> dict[str, int]:
    """Delta tables (the Parquet output): the same, with deltalake's own operations."""
    from deltalake import Field
    from deltalake.schema import PrimitiveType

    filled: dict[str, int] = {}
    names = pipeline.default_schema.data_table_names(include_incomplete=True)
    for table, delta in delta_tables(pipeline, *names).items():
        if SOURCE not in {f.name for f in delta.schema().fields}:
            delta.alter.add_columns(Field(SOURCE, PrimitiveType("string"), nullable=True))
        if fill:
            done = delta.update(new_values={SOURCE: source}, predicate=f'"{SOURCE}" IS NULL')
            if done.get("num_updated_rows"):
                filled[table] = int(done["num_updated_rows"])
    return filled
