"""The pull-request and commit-change statistics equal the truth's counts per period."""

from __future__ import annotations

from tests.cloud.conftest import Loaded
from tests.cloud.truth import check_change_statistics, check_pr_statistics


def test_pull_request_statistics_equal_truth(loaded: Loaded) -> None:
    """One row per level, scope and period (month by default, or day); counts by state of the
    PRs created in it."""
    check_pr_statistics(loaded.loader, loaded.truth, loaded.window, grain=loaded.grain)
    assert {
        p
        for (p,) in loaded.loader.rows("SELECT DISTINCT period FROM cloud_pull_request_statistics")
    } == {loaded.grain}


def test_change_statistics_equal_truth(loaded: Loaded) -> None:
    """Per repository and period: commits, and line totals and distributions of it."""
    check_change_statistics(loaded.loader, loaded.truth, loaded.window, grain=loaded.grain)
