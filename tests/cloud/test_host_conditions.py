"""Host conditions: indexing disabled, unindexed changes, a forbidden repository."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pipelines.runs.load import LoadResult
from simulator import SimConfig, Simulator
from tests.cloud.request_log import path_part
from tests.cloud.truth import (
    Truth,
    Window,
    check_change_statistics,
    check_parents,
    check_primary_keys,
    check_pull_requests,
    check_repository_commits,
    check_user_commits,
    check_workspace_commits,
)
from tests.support import FIXED_NOW
from tests.support.helpers import count, run_with_log
from tests.support.loader import FAST_RETRY, Loader


@dataclass
class Conditioned:
    loader: Loader
    truth: Truth
    window: Window
    result: LoadResult
    log: list[dict[str, Any]]
    loc_disabled: str
    unindexed: str
    forbidden: str


CONDITIONS_START = datetime(2026, 5, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def conditioned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Conditioned]:
    """One load of a host where one repository has indexing disabled, one has unindexed
    changes on every request, and one is forbidden to the token."""
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        slugs = sorted(r["slug"] for r in sim.truth("repositories"))
        loc, unindexed, forbidden = slugs[0], slugs[1], slugs[2]
        sim.set_conditions(loc_disabled=[loc], unindexed={unindexed: -1}, forbidden=[forbidden])
        loader = Loader(sim, Path(tmp_path_factory.mktemp("cloud_conditions")))
        truth = Truth.read(sim)
        result, log = run_with_log(sim, loader, start_date=CONDITIONS_START.date().isoformat())
        yield Conditioned(
            loader,
            truth,
            Window(CONDITIONS_START, truth.clock, hidden=frozenset({forbidden})),
            result,
            log,
            loc,
            unindexed,
            forbidden,
        )


def repo_requests(c: Conditioned, endpoint: str, slug: str) -> list[dict[str, Any]]:
    return [e for e in c.log if e["endpoint"] == endpoint and path_part(e["path"], "repos") == slug]


def test_conditions_are_reported_precisely(conditioned: Conditioned) -> None:
    """Skips name each refused scope and its kind; the lines fallback and the changes
    statistics of a repository without lines-of-code indexing are notes (a setting, not a
    failure: no partial run every night); the run is partial (the CLI's exit code 3) because
    other scopes were skipped."""
    c = conditioned
    skips = {(s.resource, s.kind) for s in c.result.report.skips}
    assert skips == {
        (f"commits.repository:{c.unindexed}", "unindexed"),
        (f"change_statistics.repository:{c.unindexed}", "unindexed"),
        (f"commits.repository:{c.forbidden}", "forbidden"),
        (f"change_statistics.repository:{c.forbidden}", "forbidden"),
    }
    assert c.result.report.partial
    notes = sorted(c.result.report.notes)
    assert len(notes) == 2
    assert notes[0].startswith(f"change_statistics.repository:{c.loc_disabled}:")
    assert notes[0].endswith("nothing to read")
    assert notes[1].startswith(f"commits.repository:{c.loc_disabled}:")
    assert all("indexing is disabled" in note for note in notes)


def test_indexing_disabled_loads_commits_without_lines(conditioned: Conditioned) -> None:
    """The repository's commits are read again without with_lines: NULL lines, all else equal;
    the other readable repositories keep their lines."""
    c = conditioned
    readable = {r["slug"] for r in c.truth.repos} - {c.unindexed, c.forbidden}
    check_repository_commits(
        c.loader, c.truth, replace_repos(c.window, readable), no_lines=[c.loc_disabled]
    )
    assert count(c.loader, "cloud_commits", f"WHERE repository_slug = '{c.loc_disabled}'") > 0
    assert count(c.loader, "cloud_commits", "WHERE lines_added IS NOT NULL") > 0
    requests = repo_requests(c, "commits.list.repository", c.loc_disabled)
    assert [(e["params"].get("with_lines"), e["status"]) for e in requests] == [
        ("true", 400),
        (None, 200),
    ]
    assert not count(
        c.loader, "cloud_commit_change_statistics", f"WHERE repository_slug = '{c.loc_disabled}'"
    )


def test_unindexed_repository_is_skipped_after_retries(conditioned: Conditioned) -> None:
    """Endpoints 9 and 10 are retried (retry.skip_retry_attempts) then skipped; the workspace
    list still has the repository's commits."""
    c = conditioned
    for endpoint, label in (
        ("commits.list.repository", "commits.repository"),
        ("commits.changes-statistics.repository", "change_statistics.repository"),
    ):
        statuses = [e["status"] for e in repo_requests(c, endpoint, c.unindexed)]
        attempts = int(FAST_RETRY["skip_retry_attempts"])
        assert statuses == [409] * attempts, endpoint
        assert c.result.report.counts[f"{label}:{c.unindexed}"].retries == attempts - 1
    for table in ("cloud_commits", "cloud_commit_change_statistics"):
        assert not count(c.loader, table, f"WHERE repository_slug = '{c.unindexed}'")
    check_workspace_commits(c.loader, c.truth, c.window)
    assert (
        count(c.loader, "cloud_workspace_commits", f"WHERE repository_slug = '{c.unindexed}'") > 0
    )


def test_forbidden_repository_is_skipped_and_absent(conditioned: Conditioned) -> None:
    """Its commits are in no commit table; its pull requests (not refused) are loaded."""
    c = conditioned
    for table in (
        "cloud_commits",
        "cloud_workspace_commits",
        "cloud_user_commits",
        "cloud_commit_parents",
        "cloud_commit_change_statistics",
    ):
        assert not count(c.loader, table, f"WHERE repository_slug = '{c.forbidden}'")
    assert [e["status"] for e in repo_requests(c, "commits.list.repository", c.forbidden)] == [403]
    check_user_commits(c.loader, c.truth, c.window)
    check_pull_requests(c.loader, c.truth, c.window, "repository")
    assert count(c.loader, "cloud_pull_requests", f"WHERE repository_slug = '{c.forbidden}'") > 0


def test_other_repositories_load_fully_under_conditions(conditioned: Conditioned) -> None:
    """Parents and change statistics of every readable repository, and every key unique."""
    c = conditioned
    others = {r["slug"] for r in c.truth.repos} - {c.loc_disabled, c.unindexed, c.forbidden}
    assert len(others) == 2
    # parents come from all three commit lists: the unindexed repository's via 8 and 11
    check_parents(c.loader, c.truth, c.window, repos=others | {c.loc_disabled, c.unindexed})
    check_change_statistics(
        c.loader, c.truth, c.window, skipped={c.loc_disabled, c.unindexed, c.forbidden}
    )
    check_primary_keys(c.loader)


def replace_repos(window: Window, repos: Iterable[str]) -> Window:
    return Window(window.start, window.clock, frozenset(repos), window.users, window.hidden)
