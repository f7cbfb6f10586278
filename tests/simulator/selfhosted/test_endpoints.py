"""The lists, statistics and CSV exports at every target of the four levels equal the truth."""

from __future__ import annotations

import pytest

from tests.simulator.selfhosted.client import Api
from tests.simulator.selfhosted.truth import (
    KINDS,
    LEVELS,
    LIMIT_MAX,
    Truth,
    by_key,
    check_commit_rows,
    check_pr_rows,
    iso,
    item_time,
    key_of,
    statistics_of,
    window_of,
)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("level", LEVELS)
def test_list_at_every_target_of_each_level_equals_truth(
    api: Api, truth: Truth, level: str, kind: str
) -> None:
    """Each project, repository and user (and global) lists exactly its truth items."""
    for target in truth.targets(level):
        items = api.all_pages(
            f"{target.path}/{kind}", limit=LIMIT_MAX[kind], expected_limit=LIMIT_MAX[kind]
        )
        expected = [i for i in truth.items(kind) if target.wants(kind)(i)]
        assert by_key(kind, items) == by_key(kind, expected), target.path
        times = [item_time(kind, i) for i in items]
        assert times == sorted(times, reverse=True), "newest first by default"
    if level != "global":
        assert len(truth.targets(level)) > 1


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("level", LEVELS)
def test_statistics_at_every_target_of_each_level_equal_truth(
    api: Api, truth: Truth, level: str, kind: str
) -> None:
    """Statistics equal the sums over the target's truth items, unfiltered and filtered."""
    since, until = window_of(truth, kind)
    filters: dict[str, str] = {"merges": "exclude"} if kind == "commits" else {"state": "merged"}
    for target in truth.targets(level):
        wants = target.wants(kind)
        path = f"{target.path}/{kind}/statistics"
        assert api.json(path) == statistics_of(kind, truth.select(kind, wants)), path
        filtered = api.json(path, sinceDate=iso(since), untilDate=iso(until), **filters)
        expected = truth.select(kind, wants, since, until, **filters)
        assert filtered == statistics_of(kind, expected), path


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("level", LEVELS)
def test_csv_export_at_every_target_of_each_level_equals_list(
    api: Api, truth: Truth, level: str, kind: str
) -> None:
    """CSV rows are the list's items for the same window, in the same order."""
    since, until = window_of(truth, kind)
    dates = {"sinceDate": iso(since), "untilDate": iso(until)}
    for target in truth.targets(level):
        _, rows = api.csv(f"{target.path}/{kind}/export/csv", **dates)
        listed = api.all_pages(
            f"{target.path}/{kind}", limit=LIMIT_MAX[kind], expected_limit=LIMIT_MAX[kind], **dates
        )
        expected = truth.select(kind, target.wants(kind), since, until)
        assert by_key(kind, listed) == by_key(kind, expected)
        truth_by_key = {key_of(kind, i): i for i in expected}
        in_list_order = [truth_by_key[key_of(kind, i)] for i in listed]
        if kind == "commits":
            check_commit_rows(rows, in_list_order)
        else:
            check_pr_rows(rows, in_list_order)
