"""The commit tables at each level, and the commits' parents, equal the truth."""

from __future__ import annotations

import pytest

from tests.selfhosted.conftest import Loaded
from tests.selfhosted.truth import LEVEL_TABLES, LEVELS, check_list, check_parents
from tests.support.helpers import select


@pytest.mark.parametrize("level", LEVELS)
def test_commits_equal_truth(loaded: Loaded, level: str) -> None:
    """Each commit table: author, user (NULL for non-users and aliases), UTC time, lines,
    parent count and merge flag of every commit of its scopes."""
    check_list(loaded.loader, loaded.truth, loaded.window, "commits", level, loaded.scopes)
    table = LEVEL_TABLES["commits"][level]
    shapes = loaded.loader.rows(
        f"SELECT count(*) FILTER (is_merge), count(*) FILTER (parent_count = 0), "
        f'count(*) FILTER (user_name IS NULL) FROM "{table}"'
    )[0]
    assert all(shapes), f"{table}: merges, roots, commits without a user: {shapes}"


def test_commit_parents_equal_truth(loaded: Loaded) -> None:
    """Parent ids exactly as served: abbreviated (20 characters here), each a prefix of the
    real parent, in order."""
    check_parents(loaded.loader, loaded.truth, loaded.window)
    full = {c["id"]: c["_sim"]["parents"] for c in loaded.truth.commits}
    rows = select(loaded.loader, "server_commit_parents", ("id", "position", "parent_id"))
    assert rows and {len(p) for _, _, p in rows} == {20}
    assert all(full[i][pos].startswith(p) and len(full[i][pos]) == 40 for i, pos, p in rows)
    assert max(pos for _, pos, _ in rows) >= 1
