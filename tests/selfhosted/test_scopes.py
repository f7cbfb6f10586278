"""Discovered scopes: the levels agree with each other, and the users read are those seen."""

from __future__ import annotations

from tests.selfhosted.conftest import Loaded
from tests.selfhosted.truth import (
    KINDS,
    LEVEL_TABLES,
    LIST_COLUMNS,
    commit_row,
    pr_row,
    user_of,
)
from tests.support.helpers import select


def test_levels_agree(loaded: Loaded) -> None:
    """Global = union of projects = union of repositories; each user's rows are global rows
    whose truth owner is that user, alias commits (no `user` object) included."""
    loader = loaded.loader
    for kind in KINDS:
        columns = LIST_COLUMNS[kind]
        tables = LEVEL_TABLES[kind]
        top = sorted(select(loader, tables["global"], columns))
        assert sorted(select(loader, tables["project"], columns)) == top, kind
        assert sorted(select(loader, tables["repository"], columns)) == top, kind
        global_rows = set(top)
        owner = {
            commit_row(i)[:3] if kind == "commits" else pr_row(i)[:3]: user_of(i)
            for i in loaded.truth.items(kind)
        }
        user_rows = select(loader, tables["user"], ("read_for_user", *columns))
        assert {row[1:] for row in user_rows} <= global_rows, kind
        assert all(owner[row[1:4]] == row[0] for row in user_rows), kind
    aliases = loader.rows("SELECT count(*) FROM server_commits_user WHERE user_name IS NULL")
    assert aliases[0][0] > 0  # alias commits are counted for their user


def test_users_are_those_seen_in_user_objects(loaded: Loaded) -> None:
    """User scopes are the users of the `user` objects (commits) and PR authors seen in the
    global lists. Here every truth user has such an object, so all are read; a user with only
    alias commits and no pull request in the window would not be (see the README)."""
    scopes = loaded.scopes["user"]
    for kind in KINDS:
        got = {
            u
            for (u,) in loaded.loader.rows(
                f'SELECT DISTINCT read_for_user FROM "{LEVEL_TABLES[kind]["user"]}"'
            )
        }
        assert got <= scopes, kind
    stats = {
        s
        for (s,) in loaded.loader.rows(
            "SELECT DISTINCT scope FROM server_commit_statistics WHERE level = 'user'"
        )
    }
    assert stats == scopes
    assert scopes == {u["name"] for u in loaded.truth.users}
