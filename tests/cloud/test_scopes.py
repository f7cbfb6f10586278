"""Configured scopes: chosen repositories, users, levels and resources; repositories read
before stay read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.cloud.request_log import path_part, wire_time
from tests.cloud.truth import (
    COMMIT_COLUMNS,
    SLACK,
    Truth,
    Window,
    check_change_statistics,
    check_parents,
    check_pr_statistics,
    check_primary_keys,
    check_pull_requests,
    check_repository_commits,
    check_user_commits,
    check_workspace_commits,
    instant,
)
from tests.support.helpers import data_tables, from_ms, run_with_log, select
from tests.support.loader import Loader

SCOPES_START = datetime(2026, 5, 20, tzinfo=UTC)


def test_configured_repository_and_user_only(make_sim: Any, tmp_path: Path) -> None:
    """repositories=[slug] and users=[uuid]: only those are read at their levels, and a late
    start_date bounds every table (commits from start - 26 h at the earliest)."""
    sim = make_sim(edition="cloud")
    truth = Truth.read(sim)
    slug = "Ui Api 3"  # spaces in the slug: quoted in the path
    assert slug in {r["slug"] for r in truth.repos}
    user = max(
        truth.users,
        key=lambda u: sum(1 for c in truth.commits if c["_sim"]["user"] == u["_sim"]["slug"]),
    )["uuid"]
    loader = Loader(sim, tmp_path)
    result, log = run_with_log(
        sim, loader, repositories=[slug], users=[user], start_date=SCOPES_START.date().isoformat()
    )
    assert not result.report.skips
    window = Window(SCOPES_START, truth.clock, frozenset({slug}), frozenset({user}))
    # the window's lower edge is exercised: older commits of the repository exist
    assert any(
        instant(c) < SCOPES_START - SLACK for c in truth.commits if c["repository"]["slug"] == slug
    )
    for entry in log:
        if entry["endpoint"].endswith(".repository"):
            assert path_part(entry["path"], "repos") == slug, entry
        if ".user" in entry["endpoint"]:
            assert path_part(entry["path"], "users") == user, entry
    endpoints = {e["endpoint"] for e in log}
    assert {"commits.list.repository", "commits.list.user"} <= endpoints
    check_repository_commits(loader, truth, window)
    check_user_commits(loader, truth, window)
    check_workspace_commits(loader, truth, window)
    check_pull_requests(loader, truth, window, "repository")
    check_pull_requests(loader, truth, window, "user")
    check_pull_requests(loader, truth, window, "workspace")
    check_pr_statistics(loader, truth, window)
    check_change_statistics(loader, truth, window)
    check_primary_keys(loader)


def test_repository_level_only(make_sim: Any, tmp_path: Path) -> None:
    """levels=["repository"]: no workspace or user table, no user or statistics request above
    the repository level (the workspace lists are read only to discover repositories)."""
    sim = make_sim(edition="cloud")
    truth = Truth.read(sim)
    loader = Loader(sim, tmp_path)
    result, log = run_with_log(
        sim, loader, levels=["repository"], start_date=SCOPES_START.date().isoformat()
    )
    assert not result.report.skips
    assert data_tables(loader) == {
        "cloud_commits",
        "cloud_commit_parents",
        "cloud_pull_requests",
        "cloud_pull_request_statistics",
        "cloud_commit_change_statistics",
    }
    endpoints = {e["endpoint"] for e in log}
    assert {e for e in endpoints if not e.endswith(".repository")} <= {
        "commits.list.workspace",
        "pull-requests.list.workspace",
    }
    assert {
        path_part(e["path"], "repos") for e in log if e["endpoint"] == "commits.list.repository"
    } == {r["slug"] for r in truth.repos}
    window = Window(SCOPES_START, truth.clock)
    check_repository_commits(loader, truth, window)
    check_pr_statistics(loader, truth, window, levels=("repository",))


def test_commit_resources_only(make_sim: Any, tmp_path: Path) -> None:
    """resources=["commits"]: the three commit tables and their parents, nothing else."""
    sim = make_sim(edition="cloud")
    truth = Truth.read(sim)
    loader = Loader(sim, tmp_path)
    result, log = run_with_log(
        sim, loader, resources=["commits"], start_date=SCOPES_START.date().isoformat()
    )
    assert not result.report.skips
    assert data_tables(loader) == {
        "cloud_commits",
        "cloud_workspace_commits",
        "cloud_user_commits",
        "cloud_commit_parents",
    }
    endpoints = {e["endpoint"] for e in log}
    assert not {e for e in endpoints if "statistics" in e}
    assert {e for e in endpoints if e.startswith("pull-requests")} <= {
        "pull-requests.list.workspace"
    }  # repository discovery only
    window = Window(SCOPES_START, truth.clock)
    check_repository_commits(loader, truth, window)
    check_user_commits(loader, truth, window)
    check_parents(loader, truth, window)


def test_quiet_repository_read_before_is_still_read(make_sim: Any, tmp_path: Path) -> None:
    """A repository read in an earlier run is read again when the discovery window shows no
    activity for it (README: discovered repositories plus every repository seen before)."""
    sim = make_sim(edition="cloud")
    truth = Truth.read(sim)
    activity: dict[str, list[datetime]] = {}
    for c in truth.commits:
        activity.setdefault(c["repository"]["slug"], []).append(instant(c))
    for pr in truth.prs:
        activity.setdefault(pr["destination"]["repository"]["slug"], []).extend(
            from_ms(pr["_sim"][k]) for k in ("created_ms", "updated_ms")
        )
    gap, low, high, slug = max(
        (b - a, a, b, slug)
        for slug, times in activity.items()
        for a, b in zip(sorted(times), sorted(times)[1:], strict=False)
    )
    first = (low + timedelta(days=5, hours=2)).replace(minute=0, second=0, microsecond=0)
    second = first + timedelta(hours=6)
    assert second < high, f"no quiet gap long enough ({gap})"
    loader = Loader(sim, tmp_path)
    args: dict[str, Any] = dict(
        levels=["repository"],
        resources=["commits"],
        start_date=(low - timedelta(days=5)).isoformat(),
    )
    loader.load(now=first, **args)
    quiet = f"WHERE repository_slug = '{slug}' ORDER BY ALL"
    rows = select(loader, "cloud_commits", COMMIT_COLUMNS, quiet)
    assert rows
    result, log = run_with_log(sim, loader, now=second, **args)
    assert not result.report.skips
    discovery = [
        wire_time(e["params"]["since_date"])
        for e in log
        if e["endpoint"] in ("commits.list.workspace", "pull-requests.list.workspace")
    ]
    assert discovery and min(discovery) > low  # the quiet repository is not discoverable
    assert slug in {
        path_part(e["path"], "repos") for e in log if e["endpoint"] == "commits.list.repository"
    }
    assert select(loader, "cloud_commits", COMMIT_COLUMNS, quiet) == rows
    start = datetime.fromisoformat(args["start_date"])
    check_repository_commits(loader, truth, Window(start, second))
    check_parents(loader, truth, Window(start, second))
    check_primary_keys(loader)
