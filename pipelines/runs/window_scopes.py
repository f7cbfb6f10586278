"""Scopes that appeared since a backfill window finished: the rerun reads them for it.

A finished window holds for the scopes it read (its record: `read_scopes`, by level), not for
scopes nobody knew yet: a repository the user was granted afterwards, one imported with its
history, a user added later. A rerun finds, for each finished window, the scopes the window
would read now (the same discovery: the top-level lists of its slice of the range, the
range's users or the user directory; configured scopes as configured) and reads the window
again where some are new:

- a new user: that user's lists alone (its user-level resources);
- a new repository (or project): the whole window. Every level's lists hold it from now on:
  the top level's lists (the self-hosted global lists leave out what the user may not
  read), its project's, and the user-level lists of whoever worked in it; reading only its
  own repository level would leave those tables without its history, and the API's
  statistics of the top level with it. Merge keys make the repeat harmless.

A window finished before its scopes were recorded is taken as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pipelines.runs.load import run_settings
from sources.repo_analytics import RunReport, planned_reads
from sources.repo_analytics.client.api import ApiClient
from sources.repo_analytics.client.transport import HostGate
from sources.repo_analytics.editions import edition_spec
from sources.repo_analytics.reading.context import edition_client
from sources.repo_analytics.reading.plan import build_plan
from sources.repo_analytics.reading.readers import ReadContext
from sources.repo_analytics.reading.scopes import RangeDiscovery, scopes_by_level

# levels whose new scopes are read alone; any other new scope reads the whole window
OWN_LEVELS = frozenset({"user"})


@dataclass
class Appeared:
    """Scopes that appeared since windows finished: by window key, the new scope keys by
    level."""

    windows: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def whole(self, key: str) -> bool:
        """Whether the window is read whole again (a new scope outside `OWN_LEVELS`)."""
        return bool(set(self.windows.get(key, {})) - OWN_LEVELS)

    def only(self, key: str) -> dict[str, list[str]] | None:
        """The scopes to read the window again for, where it is not read whole."""
        new = self.windows.get(key)
        return None if not new or self.whole(key) else new

    def counts(self) -> dict[str, int]:
        """How many distinct scopes are new, by level."""
        keys: dict[str, set[str]] = {}
        for new in self.windows.values():
            for level, found in new.items():
                keys.setdefault(level, set()).update(found)
        return {level: len(found) for level, found in sorted(keys.items())}


@dataclass
class ScopeFinder:
    """The scopes each backfill window reads, found as the window's own run finds them."""

    source_args: dict[str, Any]
    clock: datetime
    gate: HostGate
    discovery: RangeDiscovery
    report: RunReport = field(default_factory=RunReport)
    _client: ApiClient | None = None
    _directories: dict[str, Any] = field(default_factory=dict)  # shared by the windows

    def scopes(
        self, families: Sequence[str], start: datetime, end: datetime
    ) -> dict[str, list[str]]:
        """The scope keys, by level, that a window [start, end) of `families` reads now."""
        settings = run_settings(
            {
                **self.source_args,
                "resources": list(families),
                "start_date": start.isoformat(),
                "end_date": end.isoformat(),
            }
        )
        spec = edition_spec(settings.edition)
        plan = build_plan(spec, {**settings, "backfill": True}, self.clock)
        if self._client is None:
            self._client = edition_client(plan, self.report, self.gate)
        ctx = ReadContext(plan, self._client, self.report, directories=self._directories)
        planned = {
            endpoint.name: {scope.key for scope in scopes}
            for endpoint, scopes in planned_reads(ctx, self.discovery)
            if endpoint.cursor
        }
        return scopes_by_level(planned)


def appeared_scopes(
    finder: ScopeFinder,
    finished: Sequence[tuple[str, Sequence[str], datetime, datetime]],
    read_scopes: dict[str, Any],
) -> Appeared:
    """The scopes that appeared since each of the `finished` windows (key, families, start,
    end) was read, against what it read (`read_scopes`, by window key); windows without a
    record are left out."""
    appeared = Appeared()
    for key, families, start, end in finished:
        recorded = read_scopes.get(key)
        if recorded is None:
            continue
        now = finder.scopes(families, start, end)
        new = {
            level: sorted(set(keys) - set(recorded.get(level, ()))) for level, keys in now.items()
        }
        new = {level: keys for level, keys in new.items() if keys}
        if new:
            appeared.windows[key] = new
    return appeared
