"""The pull-request tables at each level equal the truth."""

from __future__ import annotations

import pytest

from tests.cloud.conftest import Loaded
from tests.cloud.truth import STATES, check_pull_requests
from tests.support.helpers import select


@pytest.mark.parametrize("level", ["repository", "workspace", "user"])
def test_pull_requests_equal_truth(loaded: Loaded, level: str) -> None:
    """Each pull-request table: state (SUPERSEDED too), aware UTC dates, counts."""
    check_pull_requests(loaded.loader, loaded.truth, loaded.window, level)
    table = {
        "repository": "cloud_pull_requests",
        "workspace": "cloud_workspace_pull_requests",
        "user": "cloud_user_pull_requests",
    }[level]
    assert {s for (s,) in select(loaded.loader, table, ("state",))} == set(STATES)
