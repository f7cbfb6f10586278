"""A warehouse destination with a server (Postgres, or any dlt SQL destination): checked
before the first request, and loaded into by several processes at once.

Each process (a backfill window, a Dagster partition) extracts and normalises on its own, in
its own working folder; only dlt's load step, which changes the dataset's tables, runs one
process at a time. On Postgres a session advisory lock keyed by the dataset serialises it:
two processes loading at once would race on dlt's DDL (`CREATE TABLE` of a new table: one
fails with `relation ... already exists`), share the `<dataset>_staging` tables (each load
truncates them first), and let two delete-insert merges of the same key both insert it (a
duplicate row). The lock dies with its connection, so a killed process never holds it.
"""

from __future__ import annotations

import zlib
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import dlt
from dlt.common.configuration.exceptions import ConfigFieldMissingException
from dlt.common.exceptions import MissingDependencyException

from sources.repo_analytics.errors import ConfigError, RepoAnalyticsError

# destinations that are files of this machine: nothing to connect to, nothing to serialise
LOCAL_DESTINATIONS = ("duckdb", "filesystem")
LOCK_NAMESPACE = "repo_analytics load "
# One DuckDB file, one process, one memory limit: a load's jobs (a merge per table) all at once
# failed to pin memory and were retried, each with a traceback in the output. Since a merge
# reads the load's files itself (no copies into staging beside it,
# `pipelines/destinations/duckdb/merges.py`), one at a time, with DuckDB's threads to itself,
# is as fast or faster (`docs/decisions/duckdb-merges.md`).
DUCKDB_LOAD_WORKERS = 1
# Delta tables on this machine's disks: each job a deltalake merge, native work that scans its
# target table, all of them at once under dlt's default. Two at a time hold much less and are
# no slower (`docs/decisions/delta-merges.md`). Object stores keep dlt's default: their merges
# wait on the network, not measured here.
LOCAL_DELTA_LOAD_WORKERS = 2
DLT_LOAD_WORKERS = 20  # `pipeline.load()`'s own default


class WarehouseError(RepoAnalyticsError):
    """The destination refused the connection (credentials, host, database)."""


def destination_name(pipeline: dlt.Pipeline) -> str:
    return str(pipeline.destination.destination_name)


def check_warehouse(pipeline: dlt.Pipeline) -> None:
    """Resolve a server destination's credentials and connect once, before the first
    request: a missing or wrong credential stops the run before anything is read."""
    name = destination_name(pipeline)
    if name in LOCAL_DESTINATIONS:
        return
    variable = f"DESTINATION__{name.upper()}__CREDENTIALS"
    try:
        with pipeline.sql_client():
            pass
    except MissingDependencyException:
        raise WarehouseError(
            f'the {name} destination needs its extra: pip install -e ".[{name}]" '
            f'(or dlt\'s: pip install "dlt[{name}]")'
        ) from None
    except ConfigFieldMissingException:
        raise ConfigError(
            "destination",
            name,
            f"its credentials: set {variable} (a connection string such as "
            f"postgresql://USER:PASSWORD@HOST:5432/DATABASE) or [destination.{name}.credentials]"
            " in .dlt/secrets.toml",
        ) from None
    except Exception as error:  # noqa: BLE001 - any driver's refusal becomes one line
        raise WarehouseError(
            f"the {name} destination refused the connection "
            f"({masked(pipeline, first_line(error))}): check {variable} or "
            f"[destination.{name}.credentials] in .dlt/secrets.toml, and that the server is up"
        ) from None


def first_line(error: BaseException) -> str:
    cause: BaseException = error
    while getattr(cause, "__cause__", None) is not None:
        cause = cause.__cause__  # type: ignore[assignment]
    text = str(cause).strip().splitlines()
    return text[0] if text else type(cause).__name__


def masked(pipeline: dlt.Pipeline, text: str) -> str:
    """`text` without the destination's password, should a driver ever repeat it."""
    try:
        password = getattr(pipeline.destination_client().config.credentials, "password", None)
    except Exception:  # noqa: BLE001 - nothing resolved: nothing to mask
        password = None
    return text.replace(str(password), "***") if password else text


@contextmanager
def exclusive_load(pipeline: dlt.Pipeline) -> Iterator[None]:
    """Hold the dataset's load lock (Postgres: a session advisory lock on a connection of
    its own) while the body runs; other destinations: no lock."""
    if destination_name(pipeline) != "postgres":
        yield
        return
    key = lock_key(pipeline.dataset_name)
    with pipeline.sql_client() as client:
        client.execute_sql("SELECT pg_advisory_lock(%s)", key)
        try:
            yield
        finally:
            client.execute_sql("SELECT pg_advisory_unlock(%s)", key)


def lock_key(dataset: str) -> int:
    """A stable 32-bit key per dataset (the same in every process and machine)."""
    return zlib.crc32((LOCK_NAMESPACE + dataset).encode("utf-8"))


def load_workers(pipeline: dlt.Pipeline, client_config: Any) -> int:
    """The jobs a load of `pipeline` (its destination client's configuration given) runs at
    once: into DuckDB one, into Delta tables on this machine's disks two; elsewhere dlt's
    default. dlt's `load.workers` setting wins."""
    if destination_name(pipeline) == "duckdb":
        return DUCKDB_LOAD_WORKERS
    if getattr(client_config, "is_local_filesystem", False):
        return LOCAL_DELTA_LOAD_WORKERS
    return DLT_LOAD_WORKERS


def warehouse_tables(
    pipeline: dlt.Pipeline, names: tuple[str, ...], columns: Mapping[str, Collection[str]]
) -> dict[str, Any]:
    """The dataset's tables of those names that exist, each read as an Arrow table of those
    of its `columns` (by table) it has, through dlt's SQL client (the reconciliation compares
    them in DuckDB)."""
    found: dict[str, Any] = {}
    with pipeline.sql_client() as client:
        dataset = client.fully_qualified_dataset_name(quote=False)
        present: dict[str, list[str]] = {}
        for table, column in (
            client.execute_sql(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = %s ORDER BY table_name, ordinal_position",
                dataset,
            )
            or ()
        ):
            present.setdefault(table, []).append(column)
        for name in names:
            kept = [c for c in present.get(name, ()) if c in columns.get(name, ())]
            if kept:
                listed = ", ".join(client.escape_column_name(c) for c in kept)
                with client.execute_query(
                    f"SELECT {listed} FROM {client.make_qualified_table_name(name)}"
                ) as cursor:
                    found[name] = cursor.arrow()
    return found
