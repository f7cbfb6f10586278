"""How much memory DuckDB may take while a run works on the file: `duckdb_memory_limit`.

DuckDB's own default is 80 % of the machine's memory, and a merge takes what it is given: a
year's CSV exports merged into their tables doubled the run's memory while it loaded. Under a
limit DuckDB spills what does not fit to a temporary folder next to the file (`<file>.tmp`)
and removes it afterwards, at about the same speed. The merges insert the staged rows as they
are (no numbering by key: `context.table_hints`), so the default limit is the lowest that
keeps a year of a million commits under the memory target without its merges spilling much
more (`docs/decisions/duckdb-memory.md`).

The limit reaches dlt's connections as DuckDB's `memory_limit` in the credentials'
`global_config` (dlt's own setting, which wins where it names `memory_limit`), and our own
connections (reconciliation) as their `config`.

The destination's credentials are resolved here, once, from the same settings and sections
dlt reads (`[destination.duckdb.credentials]`, the pipeline's own section first), and dlt
keeps a resolved instance as it is. Left to dlt, they were resolved again for every job, load
and normalize, each time on the interpreter. They also print themselves (dlt's trace of every
load) with dlt's own URL class: dlt's class does it with SQLAlchemy's, imported wherever it is
installed (`docs/decisions/dlt-run-overheads.md`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import dlt
from dlt.common.configuration import inject_section, known_sections, resolve_configuration
from dlt.common.configuration.specs import ConfigSectionContext, configspec
from dlt.common.configuration.utils import serialize_value
from dlt.common.libs.sql_alchemy_shims import URL
from dlt.destinations.impl.duckdb.configuration import DuckDbCredentials

from pipelines.destinations.duckdb.file import MEMORY_KEY
from pipelines.destinations.duckdb.merges import duckdb
from sources.repo_analytics.config import SECTION, default_of
from sources.repo_analytics.errors import ConfigError

DUCKDB_DEFAULT: Final = "default"  # DuckDB's own limit: 80 % of the machine's memory
SIZE: Final = re.compile(r"(?i)^\s*\d+(\.\d+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*$")
VALID: Final = "a size such as 256MB or 2GB (KB, MB, GB, TB, KiB, MiB, GiB, TiB), or `default`"
# No order kept among rows a statement inserts without ORDER BY (no query of dlt's or ours
# reads one): the merges' INSERT ... SELECT need not keep the staged order, and are faster
# for it (`docs/decisions/duckdb-merges.md`).
LOAD_SETTINGS: Final = {"preserve_insertion_order": False}


def memory_limit(values: Mapping[str, Any]) -> str | None:
    """`duckdb_memory_limit` of resolved settings (the default when unset), checked; None for
    DuckDB's own limit."""
    value = values.get(MEMORY_KEY)
    text = str(default_of(MEMORY_KEY) if value is None else value).strip()
    if text.lower() == DUCKDB_DEFAULT:
        return None
    if not SIZE.match(text) or float(re.sub(r"[^\d.]", "", text)) <= 0:
        raise ConfigError(MEMORY_KEY, value, VALID)
    return text.replace(" ", "")


def configured_memory_limit(explicit: Mapping[str, Any]) -> str | None:
    """The limit from `explicit` settings (flags), else as configured (its variable or
    `.dlt/config.toml`): for commands that resolve no other setting."""
    value = explicit.get(MEMORY_KEY)
    if value is None:
        value = dlt.config.get(".".join((*SECTION, MEMORY_KEY)))
    return memory_limit({MEMORY_KEY: value})


@configspec(init=False)
class FileCredentials(DuckDbCredentials):
    """dlt's DuckDB credentials, printed with dlt's own URL class, not SQLAlchemy's."""

    def to_url(self) -> URL:  # type: ignore[override]
        query = {k: serialize_value(v) for k, v in self.get_query().items() if v is not None}
        return URL.create(
            self.drivername,
            self.username,
            self.password,
            self.host,
            self.port,
            self.database,
            query,
        )


def duckdb_destination(path: str, limit: str | None, pipeline_name: str) -> Any:
    """dlt's DuckDB destination for the file at `path`, DuckDB held to `limit` (None: its
    own), with `LOAD_SETTINGS`; dlt's `global_config` wins for each setting it names. The
    credentials come resolved, as dlt would resolve them for the pipeline `pipeline_name`."""
    with inject_section(ConfigSectionContext(pipeline_name=pipeline_name)):
        credentials = resolve_configuration(
            FileCredentials(),
            sections=(known_sections.DESTINATION, "duckdb"),
            explicit_value={"database": path, "session_timezone": "UTC"},
        )
    ours = {**LOAD_SETTINGS, **({} if limit is None else {"memory_limit": limit})}
    credentials.global_config = {**ours, **(credentials.global_config or {})}
    return duckdb(credentials)  # ours: its merges read the load's files (duckdb_merges)


def connection_config(limit: str | None) -> dict[str, Any]:
    """`duckdb.connect(..., config=...)` for our own connections to the file."""
    return {} if limit is None else {"memory_limit": limit}
