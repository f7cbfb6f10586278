"""What every reader of one run shares: the run's context, the scope read, and the rows
handed to dlt with their table hints."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import quote

import dlt
import pyarrow as pa
import pyarrow.compute as pc
from dlt.common import logger

from ..arrow.export_keys import KeyDigester
from ..client.api import ApiClient
from ..client.transport import HostGate
from ..editions.spec import FIXED_PER_KEY, REMOVED, Endpoint
from ..report import RunReport
from .origin import SOURCE
from .plan import RunPlan

# one object for every table's source column: Arrow caches a field's fingerprint
SOURCE_FIELD: Final = pa.field(SOURCE, pa.string(), nullable=False)

# Types are frozen (BI never sees a variant column); new columns may arrive (a new release
# of this package, a host's CSV header growing) without breaking existing installations.
SCHEMA_CONTRACT: Any = {"tables": "evolve", "columns": "evolve", "data_type": "freeze"}


@dataclass(frozen=True)
class Scope:
    """Where an endpoint is read: its level, a stable key, and the values for its path."""

    level: str
    key: str
    path_values: Mapping[str, str]
    context: Mapping[str, Any] = field(default_factory=dict)
    # this scope's part of the reading resource's state (its cursor, fetched details); set
    # per endpoint when the resource reads the scope
    state: MutableMapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def path(self, template: str) -> str:
        return template.format(**{k: quote(v, safe="") for k, v in self.path_values.items()})


@dataclass
class ReadContext:
    """What every reader of one run shares."""

    plan: RunPlan
    client: ApiClient
    report: RunReport
    working_paths: dict[str, str] = field(default_factory=dict)
    directories: dict[str, Any] = field(default_factory=dict)  # unpaged answers, read once
    # natural keys yielded so far in this run, per table, or per table and scope where only
    # one read of the scope yields them (see `emit`)
    emitted: dict[str, set[bytes]] = field(default_factory=dict)  # `row_keys`
    # a nightly's discovery pages of the top-level lists, by request, until their resource
    # reads them (see `readers.endpoint_pages`)
    kept_pages: dict[tuple[Any, ...], list[Sequence[Any]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # each table's hints, one object per set of them: pages with the same hints hand over
    # the same object, compared by identity (`source_items`)
    hints: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    # digests of CSV exports' keys (`export_keys`), by a DuckDB opened at first use
    digester: KeyDigester = field(default_factory=KeyDigester)
    # the reads (`resource:scope`) that met rows of another scope, noted once each
    strayed: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Batch:
    """Rows for one table with that table's hints: what the readers yield. The resource
    hands the hints to dlt once per table (`source_items`), not with every page."""

    table: pa.Table
    hints: Any

    @property
    def table_name(self) -> str:
        return str(self.hints["table_name"])


def label_of(endpoint: Endpoint, scope: Scope) -> str:
    return f"{endpoint.name}:{scope.key}"


def table_hints(
    ctx: ReadContext,
    table: str,
    primary_key: tuple[str, ...],
    columns: dict[str, Any],
    merge_key: tuple[str, ...] = (),
    fixed: str | None = None,
) -> Any:
    """Hints for one table of a resource's output; each table gets its own variant.

    Every key is led by the `source` column (`emit` adds it to the rows): the edition's
    keys name a row within one host or workspace, and several may load one dataset.
    `merge_key` (delete-insert only) makes a re-read key replace every row it had: a
    parent's children, a CSV window. Destinations without delete-insert (Delta tables on a
    filesystem) upsert by primary key instead, without that replacement.

    Every table is declared de-duplicated: the run yields each key of it once (`emit`; a
    child table's rows once per parent; an export's rows by `export_keys`), so a
    delete-insert merge inserts the staged rows as they are instead of numbering every row
    by key to keep one (dlt's `deduplicated`): the merge streams, and DuckDB needs far less
    memory for it (`docs/decisions/duckdb-memory.md`). A package whose load
    a crash interrupted may hold a copy twice in staging: its merges de-duplicate again
    (`pipelines/runs/interrupted.py`).

    `fixed`: a column whose value a row's key never changes, hinted as such for the Delta
    merges (`Endpoint.fixed_column`), where the table has it.
    """
    if fixed in columns:
        columns = {**columns, fixed: {**columns[fixed], FIXED_PER_KEY: True}}
    key = (table, primary_key, merge_key, tuple((k, tuple(v.items())) for k, v in columns.items()))
    found = ctx.hints.get(key)
    if found is not None:  # one object per set of hints (`ReadContext.hints`)
        return found
    strategy = ctx.plan.merge_strategy
    disposition: dict[str, Any] = {"disposition": "merge", "strategy": strategy}
    if strategy == "delete-insert":
        disposition["deduplicated"] = True
    hints = dlt.mark.make_hints(
        table_name=table,
        primary_key=[SOURCE, *primary_key],
        write_disposition=disposition,  # type: ignore[arg-type]
        columns={SOURCE: {"data_type": "text", "nullable": False}, **columns},
        schema_contract=SCHEMA_CONTRACT,
    )
    if merge_key and strategy == "delete-insert":
        hints["merge_key"] = [SOURCE, *merge_key]
    return ctx.hints.setdefault(key, hints)


def emit(
    ctx: ReadContext,
    table: pa.Table,
    hints: Any,
    scope: Scope | None = None,
) -> Iterator[Batch]:
    """`table` with its hints, less the rows that must not reach the destination twice.

    Each natural key is yielded once per run: several levels read the same commit (one set
    of child rows, not one per level: see `readers.with_children`), a statistics period can
    be read by its resource and by the refresh, and an item can shift across pages while a
    list is read. A load whose rows repeat a key fails on Delta tables (`MERGE matched a
    target row with multiple source rows`), and the merges elsewhere insert the staged rows as
    they are (`table_hints`). The first copy is kept: a later change is the next run's (its
    look-back reads it again).

    With `scope`, the table's keys name the scope and only one read of it yields them (a
    list of a level's own table): its keys are held apart and forgotten when that read ends
    (`forget`), not kept to the end of the run: a year's backfill window held every level's
    list keys to its end (medium self-hosted: 194k of its 288k keys). A CSV export's keys:
    `export_keys`.
    """
    # the run reads one source: its keys are told apart without it
    names = [c for c in hints["primary_key"] if c != SOURCE]
    keys = row_keys(table, names)
    keep = fresh_keys(ctx, seen_at(hints["table_name"], scope), keys)
    yield from hand_over(ctx, table if keep is None else table.filter(keep), hints)


def within_scope(
    ctx: ReadContext, table: pa.Table, scope: Scope, label: str, key_columns: Sequence[str]
) -> pa.Array | None:
    """Which rows of a list page belong to the scope read: those whose repository columns
    (`EditionSpec.repository_key`) name the scope's repository or project, as its path does
    (case aside); None when all do, or the level names none (the top level, a user). The
    others are dropped, with a warning naming the scope and a key (over `key_columns`).

    A row of repository A in the list of repository B says nothing true of B, and A's own
    read yields it: kept, it would be A's key twice in one load (the per-scope key sets of
    `emit` never meet), or A's data where A was not asked for or may not be read. A commit
    that truly belongs to two repositories (a fork) has two keys anyway: the repository is
    part of them. Seen with a replay of a vendor's sample page, which answers every path."""
    spec = ctx.plan.edition
    named = [
        (column, scope.path_values[name].lower())
        for column, name in zip(spec.repository_key, spec.repository_path, strict=True)
        if name in scope.path_values and column in table.column_names
    ]
    if not named or not table.num_rows:
        return None
    inside: pa.Array | None = None
    for column, value in named:
        same = pc.fill_null(pc.equal(pc.utf8_lower(table.column(column)), value), False)
        inside = same if inside is None else pc.and_(inside, same)
    assert inside is not None
    if pc.all(inside).as_py():
        return None
    strays = table.filter(pc.invert(inside))
    key = "/".join(str(strays.column(c)[0].as_py()) for c in key_columns)
    text = (
        f"{label}: {strays.num_rows} rows outside the scope `{scope.key}` dropped, e.g. the "
        f"key `{key}`: the host answered this scope's list with another scope's items"
    )
    logger.warning(text)
    with ctx.lock:
        first = label not in ctx.strayed
        ctx.strayed.add(label)
    if first:
        ctx.report.note(text)
    return inside


def hand_over(ctx: ReadContext, table: pa.Table, hints: Any) -> Iterator[Batch]:
    """`table` led by the source column, with its hints, unless empty. Where the destination
    upserts (Delta tables), hard-delete marker rows are dropped: a Delta table stores them on
    its first load, and an emptied list is pruned after the load instead
    (`pipelines/destinations/delta/children.py`)."""
    if ctx.plan.merge_strategy == "upsert" and REMOVED in table.column_names:
        table = table.filter(pc.invert(table.column(REMOVED)))
    if table.num_rows:
        yield Batch(with_source(table, ctx.plan.source), hints)


def fresh_keys(ctx: ReadContext, held_at: str, keys: list[bytes]) -> pa.Array | None:
    """Which of `keys` the run has not held at `held_at` yet (each is held from now on): a
    mask, or None when all are new."""
    with ctx.lock:
        seen = ctx.emitted.setdefault(held_at, set())
        if seen.isdisjoint(keys):
            before = len(seen)
            seen.update(keys)
            if len(seen) - before == len(keys):
                return None
            seen = set()  # a key repeats within `keys`: its first copy is kept
        keep = []
        for key in keys:
            keep.append(key not in seen)
            seen.add(key)
    return pa.array(keep, type=pa.bool_())


def seen_at(table: str, scope: Scope | None) -> str:
    """Where the keys of `table` are held: the run's, or one read's of `scope` (`emit`)."""
    return table if scope is None else scoped(table, scope)


def scoped(table: str, scope: Scope) -> str:
    return f"{table} {scope.level}:{scope.key}"


def forget(ctx: ReadContext, table: str, scope: Scope) -> None:
    """The keys `emit` held for one read of `scope` (its last row is yielded)."""
    with ctx.lock:
        ctx.emitted.pop(scoped(table, scope), None)


# A row's natural key as one string: its values (as text) joined by a separator no value has;
# a NUL in a value is written as NUL + 0x01, a missing value as NUL + 0x02, so the form is
# one-to-one and a value without NUL is itself.
KEY_SEPARATOR = "\x00\x00"
ESCAPED_NUL = "\x00\x01"
NULL_VALUE = "\x00\x02"


def nul_free(kind: pa.DataType) -> bool:
    """Whether a value of `kind` as text never has a NUL: a number, an instant, a truth."""
    return bool(
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_temporal(kind)
        or pa.types.is_boolean(kind)
    )


def may_hold_nul(column: pa.ChunkedArray | pa.Array) -> bool:
    """Whether a text column's bytes hold a NUL: its data buffers searched whole, far cheaper
    than Arrow's `match_substring` per page (`docs/decisions/reading-costs.md`); a
    slice's buffer may hold a NUL of another row, which only costs a needless replace."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    for chunk in chunks:
        data = chunk.buffers()[-1]
        if data is not None and b"\x00" in data.to_pybytes():
            return True
    return False


def key_texts(table: pa.Table, names: list[str]) -> pa.Array:
    """Each row's key over the columns `names`, as one string (see `KEY_SEPARATOR`)."""
    columns = []
    for name in names:
        column = table.column(name)
        kind = column.type
        if kind != pa.string():
            column = pc.cast(column, pa.string())
        if not nul_free(kind) and may_hold_nul(column):
            column = pc.replace_substring(column, "\x00", ESCAPED_NUL)
        columns.append(column)
    return pc.binary_join_element_wise(
        *columns, KEY_SEPARATOR, null_handling="replace", null_replacement=NULL_VALUE
    )


# Up to this many rows, keys of text and integer columns are joined in Python: Arrow's
# compute calls cost the same whatever a table's rows, and a nightly run keys thousands of
# tables of a few rows (one user's or repository's page): `docs/decisions/reading-costs.md`.
SMALL_KEY_ROWS = 100


def text_as_is(kind: pa.DataType) -> bool:
    """Whether Python's text of a `kind` value is Arrow's (its cast to string): a text, an
    integer. Not an instant, a float or a truth, whose Arrow text differs."""
    return bool(
        pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_integer(kind)
    )


def row_keys(table: pa.Table, names: list[str]) -> list[bytes]:
    """Each row's key over the columns `names`: its one string (`key_texts`), as bytes; a
    small table of text and integer columns joined in Python (`SMALL_KEY_ROWS`), the same
    bytes.

    What a list read holds: a page's keys against its scope's (the level's own table, held
    for one read of the scope) and its parents' against the run's or, where one endpoint
    writes the child table, the read's (one key per parent, see `readers.with_children`).
    Python's digests of them took ~60 % more of the keys' cost for ~45 bytes less a key; a
    CSV export's millions of keys are held as Arrow arrays of digests instead
    (`export_keys`).
    """
    if table.num_rows > SMALL_KEY_ROWS or not all(
        text_as_is(table.schema.field(name).type) for name in names
    ):
        texts: list[bytes] = key_texts(table, names).cast(pa.binary()).to_pylist()
        return texts
    columns = [
        [
            NULL_VALUE
            if value is None
            else (value.replace("\x00", ESCAPED_NUL) if isinstance(value, str) else str(value))
            for value in table.column(name).to_pylist()
        ]
        for name in names
    ]
    return [KEY_SEPARATOR.join(parts).encode() for parts in zip(*columns, strict=True)]


def with_source(table: pa.Table, source: str) -> pa.Table:
    """`table` led by the `source` column, the same value on every row."""
    if SOURCE in table.column_names:
        return table
    values = pa.repeat(pa.scalar(source, type=pa.string()), table.num_rows)
    return table.add_column(0, SOURCE_FIELD, values)


def nullability(schema: pa.Schema) -> dict[str, Any]:
    """Column hints from an Arrow schema; zone-less timestamps stay zone-less in the table."""
    hints: dict[str, Any] = {f.name: {"nullable": f.nullable} for f in schema}
    for f in schema:
        if pa.types.is_timestamp(f.type) and f.type.tz is None:
            hints[f.name].update(data_type="timestamp", timezone=False)
    return hints


def edition_client(plan: RunPlan, report: RunReport, gate: HostGate | None = None) -> ApiClient:
    """The client of a run: the plan's host and settings, its edition's auth and errors."""
    spec = plan.edition
    return ApiClient(
        plan.api_base,
        spec.auth_headers(plan.credentials),
        spec.error_rules,
        spec.error_message,
        spec.error_envelope,
        plan.client,
        report,
        gate,
        plan.ca_bundle,
    )
