"""Where a row came from: the `source` column that leads every table's key, and the check
that a pipeline's state belongs to the source a run reads.

Several hosts or workspaces may load one dataset, each on a pipeline of its own: the same
repository slug from two of them are two rows, told apart by `source`. The column is
declared here once; the shared machinery (`context.table_hints`, `context.emit`) adds it to
every table and to the front of every primary and merge key, so an edition's endpoint table
never names it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from ..errors import ConfigError

SOURCE: Final = "source"  # the column, first in every table's natural key
SOURCE_STATE_KEY: Final = "source"  # the source state's record of the source it belongs to
DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def source_identity(base_url: str, workspace: str | None = None) -> str:
    """`host[:port][/path]` of the base URL, plus `/<workspace>` when given: no scheme, no
    credentials, no query, no trailing slash (a default port is left out), never a secret.

    >>> source_identity("https://user:secret@Analytics.Example.com:443/bb/?x=1", "acme")
    'analytics.example.com/bb/acme'
    """
    parts = urlsplit(base_url)
    host = (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(
            "base_url", base_url, "the host's URL, e.g. https://analytics.example.com"
        ) from None
    if port is not None and port != DEFAULT_PORTS.get(parts.scheme):
        host += f":{port}"
    identity = host + parts.path.rstrip("/")
    return f"{identity}/{workspace}" if workspace else identity


class SourceMismatchError(ConfigError):
    """A pipeline's state was made for another source: its cursors would skip this one's
    data. Raised before anything is requested or written."""

    def __init__(self, pipeline_name: str, stored: str, source: str) -> None:
        super().__init__(
            "pipeline_name",
            pipeline_name,
            f"a pipeline of its own for source `{source}`: this one's state (cursors, "
            f"backfill windows) is that of `{stored}`. Pass --pipeline-name NAME, one per "
            "host or workspace (same --duckdb and --dataset)",
        )


def check_state_source(
    state: Mapping[str, Any], source: str, pipeline_name: Callable[[], str]
) -> None:
    """Stop when the source state `state` records another source than `source`. A state
    without a record (new, or written before sources were recorded) is this source's."""
    stored = state.get(SOURCE_STATE_KEY)
    if stored and stored != source:
        raise SourceMismatchError(pipeline_name(), str(stored), source)


def is_legacy_state(state: Mapping[str, Any]) -> bool:
    """State written before sources were recorded: resources read, no source named. Its
    dataset was loaded from one source, this pipeline's (pipelines/runs/upgrade.py)."""
    return bool(state.get("resources")) and not state.get(SOURCE_STATE_KEY)
