"""The commit and pull-request statistics equal the truth's counts per period."""

from __future__ import annotations

from tests.selfhosted.conftest import Loaded
from tests.selfhosted.truth import (
    check_statistics,
    expected_commit_statistics,
    expected_pr_statistics,
)


def test_commit_statistics_equal_truth(loaded: Loaded) -> None:
    """One row per level, scope and UTC period (month by default, or day): its commits and
    line totals (merges included), recomputed from the truth commits of the scope."""
    check_statistics(
        loaded.loader,
        "server_commit_statistics",
        expected_commit_statistics(loaded.truth, loaded.window, loaded.scopes, loaded.grain),
    )


def test_pull_request_statistics_equal_truth(loaded: Loaded) -> None:
    """One row per level, scope and UTC period: PRs created in it by their state."""
    check_statistics(
        loaded.loader,
        "server_pull_request_statistics",
        expected_pr_statistics(loaded.truth, loaded.window, loaded.scopes, loaded.grain),
    )
