"""Where the report reads: the canonical views of a DuckDB file (opened read-only, so a
load may hold it a moment: the report waits as a load does) or of a warehouse through dlt's
SQL client, the queries written in DuckDB SQL and transpiled as the views are."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from pipelines.destinations.duckdb.file import check_catalog, configured_lock_wait, waiting
from pipelines.destinations.views import COLUMNS
from pipelines.destinations.views_sql import in_dialect
from sources.repo_analytics.errors import ConfigError

Row = tuple[Any, ...]


@dataclass
class Reader:
    """Runs DuckDB SQL over one dataset; `{d}` in the SQL is the dataset, qualified."""

    dataset: str
    destination: str  # as the user named it (duckdb, postgres, ...)
    dialect: str
    qualified: str
    run: Any  # (sql) -> rows
    found: set[str] | None = None

    def rows(self, sql: str) -> list[Row]:
        sql = in_dialect(sql.replace("{d}", self.qualified), self.dialect)
        return [tuple(row) for row in self.run(sql)]

    def relations(self) -> set[str]:
        """The dataset's tables and views (read once: the report reads, nothing changes)."""
        if self.found is None:
            self.found = {
                name
                for (name,) in self.rows(
                    "SELECT table_name FROM information_schema.tables "
                    f"WHERE table_schema = '{self.dataset}'"
                )
            }
        return self.found


@contextmanager
def duckdb_reader(path: str, dataset: str) -> Iterator[Reader]:
    file = Path(path)
    if not file.is_file():
        raise ConfigError(
            "duckdb", path, "an existing DuckDB file that a load wrote: pass --duckdb FILE"
        )
    check_catalog("duckdb", path, dataset)
    con = waiting(
        lambda: duckdb.connect(str(file), read_only=True),
        configured_lock_wait(),
        "no report was written",
    )
    try:
        yield Reader(
            dataset, "duckdb", "duckdb", f'"{dataset}"', lambda sql: con.execute(sql).fetchall()
        )
    finally:
        con.close()


@contextmanager
def warehouse_reader(destination: Any, name: str, dataset: str) -> Iterator[Reader]:
    """A dlt pipeline of its own in a temporary folder (the loads' working folders are left
    alone), connected and checked as a load's is. `name`: the destination as the user named
    it (`--destination`)."""
    import dlt

    from pipelines.destinations.warehouse import check_warehouse

    if destination.destination_name == "filesystem":
        raise ConfigError(
            "destination",
            name,
            "a SQL destination with the canonical views (duckdb, postgres or another dlt SQL "
            "destination): Delta tables have none; query them with DuckDB",
        )
    with tempfile.TemporaryDirectory(prefix="repo-analytics-report-") as folder:
        pipeline = dlt.pipeline(
            pipeline_name="repo_analytics_report",
            destination=destination,
            dataset_name=dataset,
            pipelines_dir=folder,
        )
        check_warehouse(pipeline)
        dialect = str(pipeline.destination.capabilities().sqlglot_dialect or "duckdb")
        with pipeline.sql_client() as client:
            qualified = client.fully_qualified_dataset_name()

            def run(sql: str) -> list[Row]:
                return [tuple(row) for row in client.execute_sql(sql) or []]

            yield Reader(dataset, name, dialect, qualified, run)


def check_views(reader: Reader) -> Reader:
    """The dataset has the canonical views of at least one kind of data."""
    found = reader.relations()
    if not found & set(COLUMNS):
        raise ConfigError(
            "dataset",
            reader.dataset,
            f"a dataset with the canonical views on this {reader.destination} destination: "
            "load into it first (repo-analytics load or backfill), or pass --dataset NAME",
        )
    return reader
