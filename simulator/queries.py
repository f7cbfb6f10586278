"""Filtered, ordered item lists (cached per data version) and the statistics built on them.

Lists and statistics read the same `Store.commits` / `Store.pull_requests` results, so the
statistics always equal what the lists sum to.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from .data.model import Commit, PullRequest
from .data.world import Scope, World

CACHE_ENTRIES = 256


@dataclass(frozen=True)
class CommitQuery:
    scope: Scope
    since: int | None  # epoch seconds
    until: int | None
    merges: str  # exclude | include | only
    newest_first: bool
    readable: frozenset[str] | None  # repository slugs the caller may read; None = all


@dataclass(frozen=True)
class PullRequestQuery:
    scope: Scope
    since: int | None  # epoch milliseconds
    until: int | None
    date_type: str  # created | updated
    state: str  # all | open | merged | declined | superseded
    readable: frozenset[str] | None


class Store:
    """Query results and serialised items of one world, cached by data version."""

    def __init__(
        self,
        world: World,
        render_commit: Callable[[World, Commit], bytes],
        render_pull_request: Callable[[World, PullRequest], bytes],
        until_inclusive: Callable[[], bool],
    ) -> None:
        self.world = world
        self._render_commit = render_commit
        self._render_pull_request = render_pull_request
        self._until_inclusive = until_inclusive
        self._results: OrderedDict[tuple[object, ...], list[int]] = OrderedDict()
        self._lock = threading.Lock()
        self._commit_bytes: dict[int, bytes] = {}
        self._pr_bytes: dict[int, tuple[int, bytes]] = {}

    def _cached(self, key: tuple[object, ...], compute: Callable[[], list[int]]) -> list[int]:
        with self._lock:
            found = self._results.get(key)
            if found is not None:
                self._results.move_to_end(key)
                return found
        result = compute()
        with self._lock:
            self._results[key] = result
            if len(self._results) > CACHE_ENTRIES:
                self._results.popitem(last=False)
        return result

    def commits(self, query: CommitQuery) -> list[int]:
        """Indexes of visible commits matching `query`, in the requested order."""
        world = self.world
        key = ("c", query, world.version, world.now_s, self._until_inclusive())
        return self._cached(key, lambda: self._commits(query))

    def _commits(self, query: CommitQuery) -> list[int]:
        world = self.world
        with world.lock:
            found = world.commit_index[query.scope].between(
                query.since, query.until, self._until_inclusive()
            )
            commits = world.commits
            now = world.now_s
            merges, readable = query.merges, query.readable
            result = [
                idx
                for idx in found
                if commits[idx].pushed <= now
                and (readable is None or commits[idx].repo in readable)
                and (merges == "include" or (len(commits[idx].parents) > 1) == (merges == "only"))
            ]
        if query.newest_first:
            result.reverse()
        return result

    def pull_requests(self, query: PullRequestQuery) -> list[int]:
        """Indexes of pull requests matching `query`, newest first by the selected date."""
        world = self.world
        key = ("p", query, world.version, world.now_s, self._until_inclusive())
        return self._cached(key, lambda: self._pull_requests(query))

    def _pull_requests(self, query: PullRequestQuery) -> list[int]:
        world = self.world
        index = world.pr_created_index if query.date_type == "created" else world.pr_updated_index
        with world.lock:
            found = index[query.scope].between(query.since, query.until, self._until_inclusive())
            prs = world.prs
            state, readable = query.state.upper(), query.readable
            result = [
                idx
                for idx in found
                if (state == "ALL" or prs[idx].state == state)
                and (readable is None or prs[idx].repo in readable)
            ]
        result.reverse()
        return result

    def commit_item(self, idx: int) -> bytes:
        item = self._commit_bytes.get(idx)
        if item is None:
            item = compact(self._render_commit(self.world, self.world.commits[idx]))
            self._commit_bytes[idx] = item
        return item

    def pull_request_item(self, idx: int) -> bytes:
        pr = self.world.prs[idx]
        cached = self._pr_bytes.get(idx)
        if cached is None or cached[0] != pr.version:
            cached = (pr.version, compact(self._render_pull_request(self.world, pr)))
            self._pr_bytes[idx] = cached
        return cached[1]

    def forget_rendering(self) -> None:
        """Drop serialised items after a change of how they are rendered (conditions)."""
        self._commit_bytes.clear()
        self._pr_bytes.clear()


def compact(data: bytes) -> bytes:
    """A right-sized copy for caching. orjson (3.12+; measured with 3.13) returns bytes holding
    a buffer of about 4 KiB however short the JSON: cached as they are, the medium dataset's
    commits took ~900 MB instead of ~100 MB."""
    return bytes(memoryview(data))


def percentile(sorted_values: list[int], fraction: float) -> float:
    """Linear interpolation between closest ranks (numpy's default, R type 7)."""
    if not sorted_values:
        return 0.0
    position = (len(sorted_values) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def distribution(values: list[int]) -> dict[str, float | int]:
    ordered = sorted(values)
    total = sum(ordered)
    return {
        "average": total / len(ordered) if ordered else 0.0,
        "median": percentile(ordered, 0.5),
        "p75": percentile(ordered, 0.75),
        "p95": percentile(ordered, 0.95),
        "p99": percentile(ordered, 0.99),
        "total": total,
    }


def state_counts(world: World, indexes: list[int], states: tuple[str, ...]) -> dict[str, int]:
    counts = dict.fromkeys(states, 0)
    for idx in indexes:
        key = world.prs[idx].state.lower()
        if key in counts:
            counts[key] += 1
    return counts
