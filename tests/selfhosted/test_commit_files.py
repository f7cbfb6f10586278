"""Per-file details (with_files): each new commit fetched once; unindexed repositories skipped,
then fetched on a later run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pipelines.runs.load import LoadResult
from simulator import SimConfig, Simulator
from sources.repo_analytics.editions.spec import FIXED_PER_KEY
from tests.selfhosted.request_log import single_commit_ids
from tests.selfhosted.truth import LATE_START, LOOKBACK, check_primary_keys, contents
from tests.support import FIXED_NOW
from tests.support.helpers import run_with_log, select
from tests.support.loader import FAST_RETRY, Loader

FILES_ARGS: dict[str, Any] = dict(
    levels=["repository"], resources=["commits"], with_files=True, start_date=LATE_START.isoformat()
)


def check_files(loader: Loader, sim: Simulator) -> int:
    """server_commit_files: for every loaded repository-level commit, the truth's files."""
    truth = {f["id"]: f["files"] for f in sim.truth("files")}
    expected = sorted(
        (p, s, i, f["path"], f["linesOfCode"]["added"], f["linesOfCode"]["deleted"], when)
        for p, s, i, when in select(
            loader, "server_commits", ("project_key", "repository_slug", "id", "author_timestamp")
        )
        for f in truth[i]
    )
    got = select(
        loader,
        "server_commit_files",
        (
            "project_key",
            "repository_slug",
            "id",
            "path",
            "lines_added",
            "lines_deleted",
            "author_timestamp",
        ),
        "ORDER BY ALL",
    )
    assert got == expected
    return len(got)


def test_with_files_fetches_each_new_commit_once(
    make_sim: Callable[..., Simulator], tmp_path: Path, destination: str
) -> None:
    """Each repository-level commit is fetched once with withFiles=true; a rerun fetches
    none; after a day only the new (and late) commits are fetched; files equal the truth,
    in DuckDB and in Delta tables (whose merges read only the range of the commits' time,
    hinted as fixed per key)."""
    sim = make_sim(edition="server")
    loader = Loader(sim, tmp_path, destination)
    first, log = run_with_log(sim, loader, **FILES_ARGS)
    assert not first.report.skips
    files = first.pipeline.default_schema.tables["server_commit_files"]["columns"]
    assert files["author_timestamp"].get(FIXED_PER_KEY) is True
    ids = single_commit_ids(log)
    loaded = {i for (i,) in select(loader, "server_commits", ("id",))}
    assert sorted(ids) == sorted(loaded) and len(ids) == len(set(ids))
    assert all(
        e["params"] == {"withFiles": "true"}
        for e in log
        if e["endpoint"] == "commits.single.repository"
    )
    assert check_files(loader, sim) > len(loaded) / 2
    before = contents(loader, ["server_commit_files"])

    second, log = run_with_log(sim, loader, **FILES_ARGS)
    assert not second.report.skips
    assert single_commit_ids(log) == []
    assert contents(loader, ["server_commit_files"]) == before

    answer = sim.advance(days=1)
    third, log = run_with_log(
        sim, loader, now=datetime.fromtimestamp(sim.info()["now"], UTC), **FILES_ARGS
    )
    assert not third.report.skips
    new = {i for (i,) in select(loader, "server_commits", ("id",))} - loaded
    assert set(answer["late_commits"]) <= new
    ids = single_commit_ids(log)
    assert sorted(ids) == sorted(new)
    check_files(loader, sim)
    check_primary_keys(loader)


@dataclass
class Unindexed:
    sim: Simulator
    loader: Loader
    key: str  # the unindexed repository, `KEY/slug`
    slug: str
    skipped: set[str]  # its commit ids
    first: LoadResult
    first_log: list[dict[str, Any]]
    again: LoadResult
    again_log: list[dict[str, Any]]
    cursor: datetime  # the repository's newest commit after the first run


@pytest.fixture(scope="module")
def unindexed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Unindexed]:
    """with_files while one repository has unindexed changes (every single-commit request
    answers 409), then once more at the same clock after it was indexed."""
    with Simulator(SimConfig(edition="server", size="tiny", now=FIXED_NOW)) as sim:
        target = sorted(sim.truth("repositories"), key=lambda r: r["slug"])[0]
        slug, key = target["slug"], f"{target['project']['key']}/{target['slug']}"
        sim.set_conditions(unindexed={slug: -1})
        loader = Loader(sim, Path(tmp_path_factory.mktemp("server_unindexed")))
        first, first_log = run_with_log(sim, loader, **FILES_ARGS)
        where = f"WHERE repository_slug = '{slug}'"
        skipped = {i for (i,) in select(loader, "server_commits", ("id",), where)}
        cursor = loader.rows(f"SELECT max(author_timestamp) FROM server_commits {where}")[0][0]
        sim.set_conditions(unindexed={})
        again, again_log = run_with_log(sim, loader, **FILES_ARGS)
        yield Unindexed(sim, loader, key, slug, skipped, first, first_log, again, again_log, cursor)


def test_unindexed_repository_skips_its_commits_files(unindexed: Unindexed) -> None:
    """Single commits of a repository with unindexed changes answer 409: each is retried,
    then reported as skipped; its commits and every other repository's files still load."""
    u = unindexed
    assert u.skipped
    assert {(s.resource, s.kind) for s in u.first.report.skips} == {
        (f"server_commit_files:{u.key}/{i}", "unindexed") for i in u.skipped
    }
    assert u.first.report.partial
    attempts = Counter(
        e["path"].rsplit("/", 1)[1]
        for e in u.first_log
        if e["endpoint"] == "commits.single.repository" and e["status"] == 409
    )
    assert attempts == dict.fromkeys(u.skipped, FAST_RETRY["skip_retry_attempts"])
    others = {
        e["path"].rsplit("/", 1)[1]
        for e in u.first_log
        if e["endpoint"] == "commits.single.repository" and e["status"] == 200
    }
    assert others and not others & u.skipped
    truth = {f["id"]: f["files"] for f in u.sim.truth("files")}
    # the second run's fetches are read from the first log's ids only
    first_files = {(i, f["path"]) for i in others for f in truth[i]}
    got = {(i, path) for i, path in select(u.loader, "server_commit_files", ("id", "path"))}
    assert first_files <= got and not {i for i, _ in got - first_files} - u.skipped


def test_unindexed_commits_in_the_look_back_are_fetched_next_run(unindexed: Unindexed) -> None:
    """Once indexed, the next run fetches the skipped commits it re-reads (its look-back),
    and every loaded commit's files then equal the truth except older skipped ones."""
    u = unindexed
    assert not u.again.report.skips
    recent = {
        i
        for (i,) in select(
            u.loader,
            "server_commits",
            ("id",),
            f"WHERE repository_slug = '{u.slug}' AND "
            f"author_timestamp >= TIMESTAMPTZ '{(u.cursor - LOOKBACK).isoformat()}'",
        )
    }
    assert recent
    fetched = set(single_commit_ids(u.again_log))
    assert recent <= fetched <= u.skipped
    truth = {f["id"]: f["files"] for f in u.sim.truth("files")}
    never = u.skipped - fetched
    expected = sorted(
        (i, f["path"], f["linesOfCode"]["added"], f["linesOfCode"]["deleted"])
        for (i,) in select(u.loader, "server_commits", ("id",))
        if i not in never
        for f in truth[i]
    )
    assert (
        select(
            u.loader,
            "server_commit_files",
            ("id", "path", "lines_added", "lines_deleted"),
            "ORDER BY ALL",
        )
        == expected
    )


def test_unindexed_commits_are_all_fetched_next_run(unindexed: Unindexed) -> None:
    """Once indexed, the next run fetches every commit skipped before, also those older than
    its look-back (remembered as pending), and every commit's files equal the truth; nothing
    is left pending."""
    u = unindexed
    assert set(single_commit_ids(u.again_log)) == u.skipped
    check_files(u.loader, u.sim)
    resources = u.loader.pipeline().state["sources"]["repo_analytics"]["resources"]
    states = {
        f"{name}:{key}": scope
        for name, value in resources.items()
        for key, scope in value.get("scopes", {}).items()
    }
    assert any("details_fetched" in state for state in states.values())
    assert not [name for name, state in states.items() if state.get("details_pending")]
