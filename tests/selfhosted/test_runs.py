"""Both runs of the shared load: clean, every table with its column types and unique keys,
and every request with the spec's parameters."""

from __future__ import annotations

from tests.selfhosted.conftest import Loaded
from tests.selfhosted.request_log import assert_request_parameters
from tests.selfhosted.truth import (
    ALL_TABLES,
    CLOCK,
    LEVEL_TABLES,
    LEVELS,
    check_primary_keys,
)
from tests.support.helpers import column_types


def test_runs_are_clean(loaded: Loaded) -> None:
    """Both runs: no skip, no note; every table of the edition (no files: opt-in)."""
    for result in (loaded.first, loaded.second):
        assert not result.report.skips and not result.report.notes
    assert set(loaded.first_tables) == ALL_TABLES
    assert loaded.truth.clock == CLOCK


def test_column_types(loaded: Loaded) -> None:
    """Instants are aware (TIMESTAMP WITH TIME ZONE); counts are integers; flags booleans;
    CSV columns typed by name."""
    tz, big = "TIMESTAMP WITH TIME ZONE", "BIGINT"
    for level in LEVELS:
        types = column_types(loaded.loader, LEVEL_TABLES["commits"][level])
        assert (
            types["author_timestamp"],
            types["lines_added"],
            types["lines_deleted"],
            types["parent_count"],
            types["is_merge"],
        ) == (tz, big, big, "INTEGER", "BOOLEAN"), level
        types = column_types(loaded.loader, LEVEL_TABLES["pull_requests"][level])
        assert (
            types["created_at"],
            types["updated_at"],
            types["id"],
            types["version"],
            types["open"],
            types["closed"],
            types["locked"],
        ) == (tz, tz, big, big, "BOOLEAN", "BOOLEAN", "BOOLEAN"), level
    for table in ("server_commit_statistics", "server_pull_request_statistics"):
        types = column_types(loaded.loader, table)
        assert types["period_start"] == types["period_end"] == tz, table
    commits = column_types(loaded.loader, "server_commit_exports")
    assert {
        k: commits[k]
        for k in (
            "date",
            "merge_commit",
            "lines_added",
            "lines_deleted",
            "commit_hash",
            "author_email",
            "window_start",
            "row_number",
        )
    } == {
        "date": tz,
        "merge_commit": "BOOLEAN",
        "lines_added": big,
        "lines_deleted": big,
        "commit_hash": "VARCHAR",
        "author_email": "VARCHAR",
        "window_start": tz,
        "row_number": big,
    }
    prs = column_types(loaded.loader, "server_pull_request_exports")
    assert {
        k: prs[k]
        for k in (
            "created_date",
            "last_updated_date",
            "pull_request_id",
            "time_to_open_s",
            "pickup_time_s",
            "review_time_s",
            "time_to_resolve_s",
            "state",
            "reviewers",
        )
    } == {
        "created_date": tz,
        "last_updated_date": tz,
        "pull_request_id": big,
        "time_to_open_s": big,
        "pickup_time_s": big,
        "review_time_s": big,
        "time_to_resolve_s": big,
        "state": "VARCHAR",
        "reviewers": "VARCHAR",
    }


def test_no_duplicate_keys(loaded: Loaded) -> None:
    check_primary_keys(loaded.loader)


def test_requests_carry_expected_parameters(loaded: Loaded) -> None:
    assert_request_parameters(loaded.first_log, loaded.truth.clock, grain=loaded.grain)
    assert_request_parameters(loaded.second_log, loaded.truth.clock, grain=loaded.grain)
    endpoints = {e["endpoint"] for e in loaded.first_log}
    assert endpoints == {
        f"{kind}.{op}.{level}"
        for kind in ("commits", "pull-requests")
        for op in ("list", "statistics", "csv")
        for level in LEVELS
    }
