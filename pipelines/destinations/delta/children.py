"""Delta tables on a filesystem (the Parquet output): finding them, and the one thing dlt's
upsert cannot do for us there, replacing a parent's whole child list.

On DuckDB a re-read parent's children replace the ones it had (delete-insert on the parent's
key, with hard-delete marker rows for an emptied list). A Delta table is upserted by primary
key instead: an item whose list got shorter keeps its stale tail. Every load writes a parent
row together with its complete current list, all stamped with the load's `_dlt_load_id`; so
a child row older than the newest load that wrote its parent (at any level) is stale, and is
deleted after the load. A crash between the load and the pruning is mended by the next run's
pruning. That pruning reads only the owner rows written since the last complete one, as its
record says (`pipelines/destinations/delta/pruned_through.py`); with no record that fits, every
owner row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import dlt
import duckdb
import pyarrow as pa

from pipelines.destinations.delta.pruned_through import (
    RECORD_FILE,
    PrunedThrough,
    read_record,
    table_versions,
    write_record,
)
from sources.repo_analytics import EDITION_SPECS
from sources.repo_analytics.reading.origin import SOURCE

LOAD_ID = "_dlt_load_id"
# Delta reader features under which a table's current files, read as plain Parquet, are the
# table: a zone-less timestamp column is stored as one
PLAIN_PARQUET_FEATURES = frozenset({"timestampNtz"})


@dataclass(frozen=True)
class ChildList:
    """A child table, the root tables whose rows own its rows, and the owner's key."""

    table: str
    roots: tuple[str, ...]
    parent_key: tuple[str, ...]
    position: str


def child_lists(edition: str) -> list[ChildList]:
    """The edition's child tables, each with every root table that writes its rows."""
    spec = EDITION_SPECS.get(edition)
    found: dict[str, ChildList] = {}
    for endpoint in spec.endpoints if spec is not None else ():
        for child in endpoint.children:
            known = found.get(child.table)
            roots = (*known.roots, endpoint.table) if known else (endpoint.table,)
            key = (SOURCE, *child.parent_key)  # a parent is known by its source too
            found[child.table] = ChildList(child.table, roots, key, child.position)
    return list(found.values())


@dataclass(frozen=True)
class LakeTables:
    """Where a pipeline's Delta tables are, and how to open them: read from its destination
    client in the thread that may read the pipeline's live schema, opened in any thread."""

    locations: dict[str, str]
    options: dict[str, str]

    def open(self, *names: str) -> dict[str, Any]:
        """The Delta tables of these names that exist."""
        from dlt.common.libs.deltalake import DeltaTable

        found = {}
        for name in names:
            location = self.locations[name]
            if DeltaTable.is_deltatable(location, self.options):
                found[name] = DeltaTable(location, storage_options=self.options)
        return found


def lake_tables(pipeline: dlt.Pipeline, names: Iterable[str]) -> LakeTables:
    """Where the tables of these names are, from the pipeline's destination client (by the
    dataset's layout, not through the pipeline's schema, which knows no table when window
    pipelines did all the loading)."""
    from dlt.common.libs.deltalake import deltalake_storage_options

    client: Any
    with pipeline.destination_client() as client:
        options = deltalake_storage_options(
            client.config.credentials, client.config.deltalake_storage_options
        )
        locations = {name: client.get_open_table_location("delta", name) for name in names}
    return LakeTables(locations, options)


def delta_tables(pipeline: dlt.Pipeline, *names: str) -> dict[str, Any]:
    """The Delta tables of these names that exist."""
    return lake_tables(pipeline, names).open(*names)


def stale_children_pruning(
    pipeline: dlt.Pipeline, edition: str
) -> Callable[[], dict[str, int]] | None:
    """`prune_children` of the edition's child tables, located now, to run later: in a load's
    thread, right after the load (`pipelines/runs/background_load.py`), where a backfill's next
    window is read meanwhile: on the main thread it held up every window, more as the tables
    grew (`docs/decisions/delta-child-pruning.md`). None but on Delta tables."""
    if pipeline.destination.destination_name != "filesystem":
        return None
    lists = child_lists(edition)
    where = lake_tables(pipeline, list_tables(lists))
    return partial(prune_children, where, lists, Path(pipeline.working_dir) / RECORD_FILE)


def prune_children(
    where: LakeTables, lists: Iterable[ChildList], record: Path | None = None
) -> dict[str, int]:
    """Delete the child rows of `lists` that an owner's newer load did not write again: of
    the owner rows written after the load id at `record` where it fits the tables, else of
    all; then record the newest load id the root tables hold."""
    lists = list(lists)
    tables = where.open(*list_tables(lists))
    roots = {n: t for c in lists for n in c.roots if (t := tables.get(n)) and has_load_ids(t)}
    versions = table_versions(where.locations, roots)
    since = read_record(record, versions)
    deleted: dict[str, int] = {}
    # one connection for every query: opening one is not free
    with duckdb.connect() as con:
        sources = {
            name: scan(con, table, f"table_{i}") for i, (name, table) in enumerate(tables.items())
        }
        for child in lists:
            if child.table not in tables or not has_load_ids(tables[child.table]):
                continue
            owners = [sources[name] for name in child.roots if name in roots]
            stale = stale_rows(con, sources[child.table], owners, child, since)
            if stale.num_rows:
                match = " AND ".join(f"t.{c} = s.{c}" for c in (*child.parent_key, child.position))
                (
                    tables[child.table]
                    .merge(source=stale, predicate=match, source_alias="s", target_alias="t")
                    .when_matched_delete()
                    .execute()
                )
                deleted[child.table] = stale.num_rows
        newest = newest_load(con, [sources[name] for name in roots], since)
    write_record(record, PrunedThrough(newest, versions) if newest else None)
    return deleted


def list_tables(lists: Iterable[ChildList]) -> set[str]:
    """The child tables of `lists` and their roots."""
    return {name for c in lists for name in (c.table, *c.roots)}


def newest_load(con: duckdb.DuckDBPyConnection, roots: list[str], since: str | None) -> str | None:
    """The newest load id among the rows of the root tables read from `roots` (those after
    `since` are enough)."""
    if not roots:
        return since
    found = " UNION ALL ".join(f"SELECT max({LOAD_ID}) FROM {root}{after(since)}" for root in roots)
    (newest,) = con.execute(f"SELECT max(m) FROM ({found}) AS t(m)").fetchone() or (None,)
    return since if newest is None else str(newest)


def after(since: str | None) -> str:
    """The filter of owner rows written after load `since` (of dlt's format): as text, which
    DuckDB checks against each file's statistics to skip the older ones."""
    return "" if since is None else f" WHERE {LOAD_ID} > '{since}'"


def has_load_ids(table: Any) -> bool:
    """Tables written before load ids were stamped, or before rows named their source (see
    `pipelines/runs/upgrade.py`), cannot be pruned (nor need to be: they were written with the same
    rule as today's, less this repair)."""
    return {LOAD_ID, SOURCE} <= {f.name for f in table.schema().fields}


def stale_rows(
    con: duckdb.DuckDBPyConnection,
    children: str,
    roots: list[str],
    child: ChildList,
    since: str | None = None,
) -> Any:
    """(owner key, position) of each child row written before its owner's newest load: a
    row some root has its owner in from a newer load, of the owner rows written after load
    `since` if given. `children`, `roots`: what the query reads the tables from (`scan`).
    One root at a time: its keys are the only hash table held, about half the peak of all the
    roots' newest loads grouped in one (`docs/decisions/delta-child-pruning.md`)."""
    key = [*child.parent_key]
    names = ", ".join(f'"{c}"' for c in key)
    picked = ", ".join(f'c."{c}"' for c in (*key, child.position))
    joined = " AND ".join(f'c."{c}" = o."{c}"' for c in key)
    newer = f"CAST(o.{LOAD_ID} AS DOUBLE) > CAST(c.{LOAD_ID} AS DOUBLE)"
    found = [con.sql(f"SELECT {picked} FROM {children} c LIMIT 0").to_arrow_table()]
    for root in roots:
        owners = f"SELECT {names}, {LOAD_ID} FROM {root}{after(since)}"
        found.append(
            con.sql(
                f"SELECT {picked} FROM {children} c SEMI JOIN ({owners}) o ON {joined} AND {newer}"
            ).to_arrow_table()
        )
    stale = pa.concat_tables(found)
    if sum(1 for part in found if part.num_rows) < 2:
        return stale  # a row found by one root only: no repeat
    con.register("stale", stale)
    try:
        return con.sql("SELECT DISTINCT * FROM stale").to_arrow_table()
    finally:
        con.unregister("stale")


def scan(con: duckdb.DuckDBPyConnection, table: Any, name: str) -> str:
    """What a query reads `table` from: `parquet_scan(table)` where it reads the table as Delta
    does, else its Arrow dataset, registered as `name`: Arrow's scanner of the dataset held
    far more than DuckDB's reader (`docs/decisions/delta-child-pruning.md`)."""
    source = parquet_scan(table)
    if source is None:
        con.register(name, table.to_pyarrow_dataset())
        return name
    return source


def parquet_scan(table: Any) -> str | None:
    """DuckDB's own Parquet reader over the Delta table's current files, where that reads it
    as Delta does (local files, no partition columns, no reader feature but zone-less
    timestamps: no deletion vectors, column mapping or type widening); else None."""
    files = table.file_uris()
    metadata = table.metadata()
    features = set(table.protocol().reader_features or ())
    if (
        files
        and all(f.startswith("/") for f in files)
        and not metadata.partition_columns
        and features <= PLAIN_PARQUET_FEATURES
        and metadata.configuration.get("delta.columnMapping.mode", "none") == "none"
    ):
        listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        return f"read_parquet([{listed}], union_by_name = true)"
    return None
