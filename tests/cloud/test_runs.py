"""Both runs of the shared load: clean, every table with its column types and unique keys,
the users table, and every request with the spec's parameters."""

from __future__ import annotations

from tests.cloud.conftest import Loaded
from tests.cloud.request_log import assert_request_parameters
from tests.cloud.truth import ALL_TABLES, check_primary_keys, check_users
from tests.support.helpers import column_types


def test_first_run_is_clean(loaded: Loaded) -> None:
    """Both runs read every table, with no skip and no note."""
    for result in (loaded.first, loaded.second):
        assert not result.report.skips and not result.report.notes
        assert not result.report.partial
    assert set(loaded.first_tables) == ALL_TABLES


def test_column_types(loaded: Loaded) -> None:
    """The commit date stays zone-less (TIMESTAMP); pull-request and period dates are aware."""
    for table in (
        "cloud_commits",
        "cloud_workspace_commits",
        "cloud_user_commits",
        "cloud_commit_parents",
    ):
        assert column_types(loaded.loader, table)["date_local"] == "TIMESTAMP", table
    for table in (
        "cloud_pull_requests",
        "cloud_workspace_pull_requests",
        "cloud_user_pull_requests",
    ):
        types = column_types(loaded.loader, table)
        for name in ("created_at", "updated_at", "closed_at"):
            assert types[name] == "TIMESTAMP WITH TIME ZONE", (table, name)
    types = column_types(loaded.loader, "cloud_commits")
    assert (types["lines_added"], types["parent_count"], types["is_merge"]) == (
        "BIGINT",
        "INTEGER",
        "BOOLEAN",
    )


def test_users_equal_truth(loaded: Loaded) -> None:
    check_users(loaded.loader, loaded.truth)


def test_no_duplicate_keys(loaded: Loaded) -> None:
    check_primary_keys(loaded.loader)


def test_requests_carry_expected_parameters(loaded: Loaded) -> None:
    """Both runs: auth, explicit offsets, frozen until, page size, list and statistics params."""
    assert_request_parameters(loaded.first_log, loaded.truth.clock, loaded.grain)
    assert_request_parameters(loaded.second_log, loaded.truth.clock, loaded.grain)
