"""The pull-request tables at each level, and their reviewers and participants, equal the
truth."""

from __future__ import annotations

import pytest

from tests.selfhosted.conftest import Loaded
from tests.selfhosted.truth import LEVEL_TABLES, LEVELS, check_list, check_people
from tests.support.helpers import select


@pytest.mark.parametrize("level", LEVELS)
def test_pull_requests_equal_truth(loaded: Loaded, level: str) -> None:
    """Each pull-request table: every field, dates from epoch ms as aware UTC, all states."""
    check_list(loaded.loader, loaded.truth, loaded.window, "pull_requests", level, loaded.scopes)
    table = LEVEL_TABLES["pull_requests"][level]
    assert {s for (s,) in select(loaded.loader, table, ("state",))} == {
        "OPEN",
        "MERGED",
        "DECLINED",
    }
    millis = loaded.loader.rows(
        f'SELECT count(*) FROM "{table}" WHERE microsecond(created_at) % 1000000 <> 0'
    )[0][0]
    assert millis > 0  # sub-second parts were compared, not only whole seconds


@pytest.mark.parametrize("which", ["reviewers", "participants"])
def test_pull_request_people_equal_truth(loaded: Loaded, which: str) -> None:
    check_people(loaded.loader, loaded.truth, loaded.window, which)
    assert loaded.loader.rows(f"SELECT max(position) FROM server_pull_request_{which}")[0][0] >= 1
