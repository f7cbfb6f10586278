"""The commit tables at each level, and the commits' parents, equal the truth."""

from __future__ import annotations

from datetime import timedelta

from tests.cloud.conftest import Loaded
from tests.cloud.truth import (
    check_parents,
    check_repository_commits,
    check_user_commits,
    check_workspace_commits,
    instant,
)
from tests.support.helpers import select


def test_repository_commits_equal_truth(loaded: Loaded) -> None:
    """cloud_commits: every commit of the window with author, local date, parents and lines."""
    check_repository_commits(loaded.loader, loaded.truth, loaded.window)
    merges = loaded.loader.rows("SELECT count(*) FROM cloud_commits WHERE is_merge")[0][0]
    roots = loaded.loader.rows("SELECT count(*) FROM cloud_commits WHERE parent_count = 0")[0][0]
    assert merges > 0 and roots > 0  # both edge shapes were compared


def test_local_date_is_the_wall_time_not_the_instant(loaded: Loaded) -> None:
    """date_local is the author's wall time: instant + offset, never the UTC instant."""
    rows = dict(
        ((s, h), d)
        for s, h, d in select(
            loaded.loader, "cloud_commits", ("repository_slug", "hash", "date_local")
        )
    )
    shifted = 0
    for c in loaded.truth.commits:
        offset = timedelta(minutes=c["_sim"]["offset_minutes"])
        local = rows[(c["repository"]["slug"], c["hash"])]
        assert local == (instant(c) + offset).replace(tzinfo=None)
        shifted += offset != timedelta(0)
    assert shifted > 0


def test_workspace_commits_equal_truth(loaded: Loaded) -> None:
    check_workspace_commits(loaded.loader, loaded.truth, loaded.window)


def test_user_commits_equal_truth(loaded: Loaded) -> None:
    """cloud_user_commits: each user's truth commits (alias e-mails included), no one else's."""
    check_user_commits(loaded.loader, loaded.truth, loaded.window)
    users = {
        u
        for (u,) in loaded.loader.rows("SELECT DISTINCT read_for_user_uuid FROM cloud_user_commits")
    }
    assert len(users) == len(loaded.truth.users)


def test_commit_parents_equal_truth(loaded: Loaded) -> None:
    """cloud_commit_parents: exactly the truth parents of every commit, in order."""
    check_parents(loaded.loader, loaded.truth, loaded.window)
    assert loaded.loader.rows("SELECT max(position) FROM cloud_commit_parents")[0][0] >= 1
