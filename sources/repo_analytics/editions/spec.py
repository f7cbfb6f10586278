"""The shape of an edition's endpoint table (the mapper from items to Arrow: `mapping.py`).

An edition module fills these records with data; nothing here knows about an edition.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

import pyarrow as pa

from ..client.rules import ErrorEnvelope, ErrorRule

if TYPE_CHECKING:
    from ..typing import Paging

Context = Mapping[str, Any]
LIST_OF_ANY: Final = pa.list_(pa.struct([]))  # a list whose entries are not read
UTC_TS: Final = pa.timestamp("us", tz="UTC")  # every instant the editions and exports hold
Kind = Literal["list", "statistics", "directory", "csv"]


@dataclass(frozen=True)
class Column:
    """One output column: read at `path` of an item (or of the context when it starts `@`)."""

    name: str
    path: tuple[str, ...]
    type: pa.DataType
    convert: Callable[[Any], Any] | None = None
    nullable: bool = True

    def __post_init__(self) -> None:
        # hashed on every page (the mapper's cache of struct types by column set): once
        object.__setattr__(self, "_hash", hash((self.name, self.path, self.type, self.convert)))

    def __hash__(self) -> int:
        return int(self.__dict__["_hash"])

    @property
    def from_context(self) -> bool:
        """Read from the context (the scope, a period), the same for every item read with it."""
        return bool(self.path) and self.path[0].startswith("@")

    def read(self, item: Any, context: Context) -> Any:
        if self.from_context:
            value = context.get(self.path[0][1:])
        else:
            value = item
            for key in self.path:
                if value is None:
                    break
                value = value.get(key) if isinstance(value, dict) else None
        return self.convert(value) if self.convert is not None and value is not None else value


def count_of(values: Any) -> int:
    """A list's length (the parents of a commit)."""
    return len(values)


def is_merge(values: Any) -> bool:
    """More than one parent."""
    return len(values) > 1


def first_href(links: Any) -> str | None:
    """The `href` of the first `self` link of a links object (`{"self": [{"href": ...}]}`);
    None for a value that is not one."""
    if not isinstance(links, dict):
        return None
    found = links.get("self")
    entries = found if isinstance(found, list) else ()
    hrefs = [link.get("href") for link in entries if isinstance(link, dict)]
    return hrefs[0] if hrefs else None


def column(
    name: str,
    path: str,
    type_: pa.DataType,
    convert: Callable[[Any], Any] | None = None,
    nullable: bool = True,
) -> Column:
    """`path` is dotted (`author.display_name`), `@key` for a context value, `` for the item."""
    return Column(name, tuple(path.split(".")) if path else (), type_, convert, nullable)


@dataclass(frozen=True)
class ChildTable:
    """A list inside each item, as its own table keyed by the parent's natural key."""

    table: str
    list_path: tuple[str, ...]
    parent_key: tuple[str, ...]  # the parent's natural key, copied into every child row
    columns: tuple[Column, ...]
    carry: tuple[str, ...] = ()  # further parent columns to copy (the cursor column)
    position: str = "position"

    @property
    def primary_key(self) -> tuple[str, ...]:
        return (*self.parent_key, self.position)

    @property
    def parent_columns(self) -> tuple[str, ...]:
        return (*self.parent_key, *self.carry)


@dataclass(frozen=True)
class DetailSpec:
    """GET `path` (with `{id}`) for each item; the list at `list_path` becomes `table`."""

    path: str
    params: dict[str, str]
    table: str
    id_column: str
    parent_key: tuple[str, ...]  # columns of the list row copied into every detail row
    time_column: str  # the item's cursor column, for pruning the fetched set
    list_path: tuple[str, ...]
    columns: tuple[Column, ...]  # read from each element of the list
    element_key: str  # the element column completing the primary key (the file path)

    @property
    def copied(self) -> tuple[str, ...]:
        """List columns every detail row carries: the key, and the cursor column (dlt's
        incremental filter reads it on every table the list resource yields)."""
        return (*self.parent_key, self.time_column)


@dataclass(frozen=True)
class Endpoint:
    """One endpoint of an edition at one level, as data."""

    resource: str  # resource family, e.g. "commits" (selectable by that name)
    level: str
    kind: Kind
    path: str  # below the API prefix, with {workspace}, {repository}, {user}, {project}
    table: str
    primary_key: tuple[str, ...]
    columns: tuple[Column, ...]
    children: tuple[ChildTable, ...] = ()
    cursor: str | None = None  # the column the incremental cursor follows
    cursor_naive: bool = False  # the cursor column is a zone-less local time
    params: Mapping[str, str] = field(default_factory=dict)
    page_size: int | None = None  # the maximum page size; None for unpaged answers
    paging: Paging | None = None  # the paging scheme of a paged list, with its names
    alt_paths: tuple[str, ...] = ()  # tried in order when the path answers an HTML 404
    dated: bool = True  # requests carry since and until bounds
    # On a skip of this kind, drop these parameters and read again (noted in the report):
    # the cloud repository commit list without lines when indexing is disabled.
    degrade_on: str | None = None
    degrade_drops: tuple[str, ...] = ()
    # Skips of these kinds mean the host keeps no such data for the scope (a setting, e.g.
    # lines-of-code indexing off): a note, not a partial run that would recur every night.
    absent_on: tuple[str, ...] = ()
    # (statistics resource family, creation-time column): the statistics counted by the
    # items' creation period change when an item changes; the periods of changed items older
    # than the statistics' own look-back are read again.
    refreshes: tuple[str, str] | None = None
    csv_key: tuple[str, ...] = ()  # CSV exports: normalised header names of the natural key
    details: DetailSpec | None = None  # per-item requests (opt-in with_files)
    # A column whose value a row's key never changes (a commit's time, a pull request's
    # creation), declared to dlt with the `FIXED_PER_KEY` hint, on the children that carry it
    # too: a Delta merge then reads only the target rows within the load's range of it
    # (`pipelines/destinations/delta/merges.py`). An export's, only where its rows have their
    # natural key.
    fixed_column: str | None = None

    @property
    def name(self) -> str:
        return f"{self.resource}.{self.level}"

    def fixed_in(self, columns: Sequence[str]) -> str | None:
        """The endpoint's fixed column where a table of its items' children or details
        carries it among `columns`; else None."""
        return self.fixed_column if self.fixed_column in columns else None


@dataclass(frozen=True)
class StatisticsCheck:
    """A repository-level statistics table, compared row by row with the API. The table, its
    request and the JSON path of each measure come from the edition's endpoint table."""

    resource: str  # the statistics resource family
    scope_column: str  # the column holding the repository's scope key (`KEY/slug`, `slug`)
    measures: tuple[str, ...]  # the columns compared
    level_column: str | None = "level"  # None: a table of the repository level only


@dataclass(frozen=True)
class ReconcileSpec:
    """What the reconciliation compares with the API's statistics. The tables, their time
    columns, the requests and the JSON paths come from the repository-level endpoints."""

    commit_statistics: str  # resource family of the repository-level commit statistics
    commit_measures: tuple[str, str]  # its columns of the commit count and the lines added
    pr_states: tuple[str, ...]  # pull-request statistics columns, one per (lower-case) state
    statistics: tuple[StatisticsCheck, ...] = ()


ViewParts = tuple[tuple[str, str], ...]  # (table that must exist, SELECT of the view's columns)


@dataclass(frozen=True)
class EditionSpec:
    """What differs between editions, gathered in one record per edition."""

    name: str
    default_prefix: str
    since_param: str
    until_param: str
    error_message: Callable[[Any], str]
    error_rules: tuple[ErrorRule, ...]
    error_envelope: ErrorEnvelope  # an answer with this body is an error, never data
    endpoints: tuple[Endpoint, ...]
    auth_headers: Callable[[Mapping[str, Any]], dict[str, str]]
    top_level: str  # the level with one scope: cloud `workspace`, self-hosted `global`
    repository_key: tuple[str, ...]  # columns naming a repository in list rows
    repository_path: tuple[str, ...]  # the path placeholders they fill, in the same order
    user_key: str  # the column of the user directory that names a user in paths
    user_columns: tuple[str, ...] = ()  # list columns naming users, without a user directory
    # Accepted credentials: the first form whose settings are all set is used; the message
    # says what is expected when none is.
    credential_forms: tuple[tuple[str, ...], ...] = (("token",),)
    credentials_expected: str = "a token, in .dlt/secrets.toml or SOURCES__REPO_ANALYTICS__TOKEN"
    needs_workspace: bool = False  # paths name a workspace: the `workspace` setting is required
    reconcile: ReconcileSpec | None = None  # None: nothing to reconcile with
    # The canonical views (pipelines/destinations/views.py): view -> this edition's SELECTs; and the
    # tables read through `{optional:name}`, with the columns and types they must have.
    views: Mapping[str, ViewParts] = field(default_factory=dict)
    optional_tables: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # The demo and `sim`'s load command against a simulated host of this edition: its
    # levels, and the credential form (the simulator's settings of the same names).
    demo_levels: tuple[str, ...] = ()
    demo_credentials: tuple[str, ...] = ("token",)


REMOVED: Final = "removed"  # child tables: true on a marker row that empties a parent's list
# the column hint of a column whose value a row's key never changes (`Endpoint.fixed_column`)
FIXED_PER_KEY: Final = "x-fixed-per-key"
