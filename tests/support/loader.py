"""Real pipeline runs under tmp_path, into a DuckDB file, into
Delta tables on a filesystem (the Parquet output) or into a real Postgres server, read back
with SQL either way (DuckDB SQL: on Postgres transpiled as the canonical views are)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import deltalake
import dlt
import duckdb
import psycopg2
import pytest

from pipelines.destinations.duckdb.memory import duckdb_destination, memory_limit
from pipelines.destinations.views_sql import in_dialect
from pipelines.runs.load import LoadResult, make_pipeline, run_load
from simulator import Simulator
from tests.support import FIXED_NOW

DATASET = "repo_analytics"
# The destinations a user can pick, each with its default settings: end-to-end tests of
# tables against the truth run on both.
DESTINATIONS = ("duckdb", "parquet")
# The SQL destinations the canonical views are made on: the views' truth tests run on each.
VIEW_DESTINATIONS = ("duckdb", "postgres")
# The cloud edition's tables and natural keys, as the README's "Cloud edition" table states:
# each led by `source` (where the rows came from), then these.
CLOUD_PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "cloud_commits": ("repository_slug", "hash"),
    "cloud_workspace_commits": ("repository_slug", "hash"),
    "cloud_user_commits": ("read_for_user_uuid", "repository_slug", "hash"),
    "cloud_commit_parents": ("repository_slug", "hash", "position"),
    "cloud_pull_requests": ("repository_slug", "id"),
    "cloud_workspace_pull_requests": ("repository_slug", "id"),
    "cloud_user_pull_requests": ("read_for_user_uuid", "repository_slug", "id"),
    "cloud_pull_request_statistics": (
        "level",
        "scope",
        "period_start",
        "period",
        "state_filter",
        "date_type",
    ),
    "cloud_commit_change_statistics": ("repository_slug", "period_start", "period", "merges"),
    "cloud_users": ("uuid",),
}
CLOUD_PRIMARY_KEYS = {table: ("source", *key) for table, key in CLOUD_PRIMARY_KEYS.items()}
# Fast retries for tests: the behaviour is the same, the waits are short.
FAST_RETRY = {
    "backoff_base": 0.01,
    "max_wait_seconds": 5,
    "total_wait_seconds": 60,
    "max_attempts": 6,
    "skip_retry_attempts": 2,
}


@dataclass
class Loader:
    """Runs loads of one pipeline against one simulator, into a DuckDB file (`duckdb`),
    Delta tables under `lake/` (`parquet`) or a dataset of its own on a Postgres server
    (`postgres`, `warehouse` its URI), and reads the tables back with DuckDB SQL."""

    sim: Simulator
    path: Path
    destination: str = "duckdb"
    warehouse: str | None = None  # the Postgres server's URI (destination `postgres`)
    # several hosts or workspaces load one dataset, each on a pipeline of its own
    pipeline_name: str = "repo_analytics"
    # rows of this `source` only, as if it had loaded the dataset alone (`of_source`)
    only_source: str | None = None
    # In-memory copies of the stored tables (Delta tables, or one source's rows), each kept
    # while the files it was copied from are unchanged: building one takes ~0.15 s, and a
    # check of a whole dataset asks hundreds of queries. Shared by the `of_source` loaders.
    copies: dict[str | None, tuple[object, duckdb.DuckDBPyConnection]] = field(
        default_factory=dict, repr=False, compare=False
    )
    # the read-only connection to the DuckDB file that the queries of a `reading` block share
    held: list[duckdb.DuckDBPyConnection] = field(default_factory=list, repr=False, compare=False)

    @property
    def db_file(self) -> Path:
        return self.path / "data.duckdb"

    @property
    def dataset(self) -> str:
        """The dataset's name: on the shared Postgres server one of this loader's own."""
        if self.destination != "postgres":
            return DATASET
        return "t_" + re.sub(r"[^a-z0-9]+", "_", self.path.name.lower()).strip("_")

    @property
    def lake(self) -> Path:
        return self.path / "lake"

    def pipeline(self) -> dlt.Pipeline:
        target: Any
        if self.destination == "duckdb":  # as users get it
            target = duckdb_destination(str(self.db_file), memory_limit({}), self.pipeline_name)
        elif self.destination == "postgres":
            target = dlt.destinations.postgres(credentials=self.warehouse)
        else:
            target = dlt.destinations.filesystem(bucket_url=str(self.lake))
        return make_pipeline(
            pipeline_name=self.pipeline_name,
            destination=target,
            dataset_name=self.dataset,
            pipelines_dir=str(self.path / "pipelines"),
            schemas_dir=self.path / "schemas",
        )

    def source_args(self, **overrides: Any) -> dict[str, Any]:
        info = self.sim.info()
        args: dict[str, Any] = {
            "edition": self.sim.config.edition,
            "base_url": self.sim.base_url,
            "start_date": "2026-03-01",
            "now": datetime.fromtimestamp(info["now"], UTC),
            "retry": FAST_RETRY,
        }
        if self.sim.config.edition == "cloud":
            args.update(workspace=info["workspace"], token=self.sim.config.token)
        else:
            args.update(username=self.sim.config.username, password=self.sim.config.password)
        args.update(overrides)
        return args

    def load(self, **overrides: Any) -> LoadResult:
        return run_load(self.pipeline(), **self.source_args(**overrides))

    def of_source(self, source: str) -> Loader:
        """This loader, reading only the rows of `source` (tables without any are left out)."""
        return replace(self, only_source=source)

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        """`sql` over the dataset, with the dataset as the default schema."""
        if self.destination == "postgres" and self.only_source is None:
            return postgres_rows(str(self.warehouse), self.dataset, sql)
        if self.only_source is None and self.destination == "duckdb":
            if self.held:
                with self.held[0].cursor() as con:
                    return on_dataset(con, sql)
            with duckdb.connect(str(self.db_file), read_only=True) as con:
                return on_dataset(con, sql)
        # a connection of its own to the copy: settings (`SET TimeZone`) stay with the query
        with self.copy().cursor() as con:
            con.execute(f"SET schema '{DATASET}'")
            return con.execute(sql).fetchall()

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Inside, the queries on the DuckDB file share one read-only connection: opening one
        takes ~30 ms (DuckDB starts its threads), and a check of a whole dataset asks a few
        hundred queries. Nothing may write the file inside the block: the connection holds
        it. Copies (Delta tables, one source's rows) are kept anyway (`copy`)."""
        shared = self.only_source is None and self.destination == "duckdb"
        if self.held or not shared or not self.db_file.exists():
            yield  # (no file: each query fails as it did outside a block)
            return
        with duckdb.connect(str(self.db_file), read_only=True) as con:
            self.held.append(con)
            try:
                yield
            finally:
                self.held.clear()

    def copy(self) -> duckdb.DuckDBPyConnection:
        """The in-memory copy `rows` reads, made again once the stored files changed."""
        stored = stored_files(self.db_file if self.destination == "duckdb" else self.lake)
        kept = self.copies.get(self.only_source)
        if kept is not None and kept[0] == stored:
            return kept[1]
        if kept is not None:
            kept[1].close()
        if self.only_source is not None:
            con = source_connection(self, self.only_source)
        else:
            con = lake_connection(self.lake)
        self.copies[self.only_source] = (stored, con)
        return con


def postgres_rows(uri: str, dataset: str, sql: str) -> list[tuple[Any, ...]]:
    """`sql` (DuckDB SQL; statements apart by `;`, the last one's rows returned) on the
    Postgres dataset, transpiled as the canonical views are; `DESCRIBE "table"` as the
    table's column names and types."""
    statements = [part.strip() for part in sql.split(";") if part.strip()]
    with psycopg2.connect(uri) as con, con.cursor() as cursor:
        cursor.execute(f'SET search_path TO "{dataset}"')
        for statement in statements:
            described = re.fullmatch(r'DESCRIBE "(\w+)"', statement)
            if described:
                cursor.execute(
                    "SELECT column_name, data_type FROM information_schema.columns WHERE "
                    "table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                    (dataset, described.group(1)),
                )
            else:
                cursor.execute(in_dialect(statement, "postgres"))
        return cursor.fetchall() if cursor.description else []


def on_dataset(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[Any, ...]]:
    """`sql` with the dataset as the default schema, when the file has it (none after a run
    that wrote nothing)."""
    if con.execute(
        "SELECT 1 FROM information_schema.schemata WHERE schema_name = ?", [DATASET]
    ).fetchall():
        con.execute(f"SET schema '{DATASET}'")
    return con.execute(sql).fetchall()


def stored_files(path: Path) -> list[tuple[str, int, int, int]]:
    """Name, inode, size and modification time of every file at `path` (a DuckDB file and its
    write-ahead log, or a folder of Delta tables): what a copy of the tables depends on."""
    if path.is_dir():
        files = sorted(f for f in path.rglob("*") if f.is_file())
    else:
        files = [f for f in (path, path.with_name(path.name + ".wal")) if f.exists()]
    found = []
    for file in files:
        try:
            stat = file.stat()
        except FileNotFoundError:  # a writer's temporary file, gone since the listing
            continue
        found.append((str(file), stat.st_ino, stat.st_size, stat.st_mtime_ns))
    return found


def lake_connection(lake: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB holding a copy of every Delta table of the dataset (as deltalake
    reads it), in a schema named like the dataset; the `_dlt` tables are not Delta tables."""
    con = duckdb.connect()
    con.execute(f"CREATE SCHEMA {DATASET}")
    con.execute(f"SET schema '{DATASET}'")
    folder = lake / DATASET
    for table in sorted(folder.iterdir()) if folder.is_dir() else ():
        if (table / "_delta_log").is_dir():
            data = deltalake.DeltaTable(str(table)).to_pyarrow_table()
            con.register("delta_data", data)
            con.execute(f'CREATE TABLE "{table.name}" AS SELECT * FROM delta_data')
            con.unregister("delta_data")
    return con


def source_connection(loader: Loader, source: str) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB holding, in a schema named like the dataset, a copy of each data
    table's rows of `source` (tables with none left out) and of dlt's own tables."""
    if loader.destination == "duckdb":
        con = duckdb.connect()
        con.execute("ATTACH ? AS stored (READ_ONLY)", [str(loader.db_file)])
        con.execute(f"CREATE SCHEMA {DATASET}")
        for (table,) in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'stored' "
            "AND table_schema = ? AND table_type = 'BASE TABLE'",
            [DATASET],
        ).fetchall():
            con.execute(
                f'CREATE TABLE {DATASET}."{table}" AS SELECT * FROM stored.{DATASET}."{table}"'
            )
        con.execute("DETACH stored")
        con.execute(f"SET schema '{DATASET}'")
    else:
        con = lake_connection(loader.lake)
    for table, columns in con.execute(
        "SELECT table_name, list(column_name) FROM information_schema.columns "
        "WHERE table_schema = ? GROUP BY ALL",
        [DATASET],
    ).fetchall():
        if table.startswith("_dlt"):
            continue
        assert "source" in columns, f"{table} has no source column"
        con.execute(f'DELETE FROM "{table}" WHERE source IS DISTINCT FROM ?', [source])
        if not con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]:
            con.execute(f'DROP TABLE "{table}"')
    return con


@pytest.fixture
def loader(tmp_path: Path) -> Iterator[Callable[[Simulator], Loader]]:
    def make(sim: Simulator) -> Loader:
        return Loader(sim, tmp_path)

    yield make


@pytest.fixture(scope="module", params=VIEW_DESTINATIONS)
def views_destination(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    """Each SQL destination of the canonical views, with the Postgres server's URI (the
    session's server, started when first asked for)."""
    if request.param == "postgres":
        return "postgres", request.getfixturevalue("postgres").uri()
    return str(request.param), None


@pytest.fixture(params=DESTINATIONS)
def destination(request: pytest.FixtureRequest) -> str:
    """Each destination a user can choose, with its default settings."""
    return str(request.param)


__all__ = ["DESTINATIONS", "FIXED_NOW", "FAST_RETRY", "Loader", "lake_connection"]
