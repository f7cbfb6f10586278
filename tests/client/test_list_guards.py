"""Whatever the host sends: lists end, and no table holds a natural key twice.

A list that answers empty pages saying more follow is read for three such pages, then its
scope is skipped like any failing scope (exit 3, its window not finished, one line naming
the request) while the rest of the run loads; the fault gone, the plain rerun completes it. A
host that answers every repository's (and project's, and user's) list with the same page
stores each key once: rows outside the scope read are dropped, with a note naming the scope
and a key. Real simulators over HTTP, the real command line on both destinations.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import tests.selfhosted.truth as server_truth
from tests.runs.test_backfill import CLOCK, EDITIONS, SINCE
from tests.support.loader import Loader
from tests.support.repairs import assert_equals_truth, assert_unique_keys, report_of, run

BACKFILL = (
    "backfill",
    "--since",
    SINCE.date().isoformat(),
    "--until",
    CLOCK.isoformat(),
    "--window-days",
    "30",
    "--page-size",
    "50",
)
WINDOWS = 4  # 2026-03-01 to the clock in 30 days
EMPTY_PAGES_MOST = 3  # docs: Troubleshooting, a list that never ends
# the note of a scope whose list answered rows of another scope (dropped)
OUTSIDE = re.compile(
    r"^  note: commits\.(?P<level>project|repository):(?P<scope>.+?): (?P<rows>\d+) rows "
    r"outside the scope `(?P=scope)` dropped, e\.g\. the key `(?P<key>[^`]+)`"
)


@pytest.mark.parametrize("edition", ["cloud", "server"])
def test_an_endless_list_stops_within_a_bound(
    make_sim: Any, tmp_path: Path, destination: str, edition: str
) -> None:
    """One repository's commit list answers empty pages that say more follow, for ever: each
    window asks it three pages, skips it with one line naming the request (exit 3), and loads
    every other repository whole; the fault gone, the plain rerun reads those windows again,
    exits 0, and every table equals the truth."""
    sim = make_sim(edition=edition)
    repository = min(sim.truth("repositories"), key=lambda r: r["slug"])
    slug = repository["slug"]
    path = f"/repos/{slug}/commits"
    scope = slug if edition == "cloud" else f"{repository['project']['key']}/{slug}"
    sim.set_faults({"rules": [{"kind": "empty_pages", "rate": 1, "path": path}]})
    first = run(tmp_path, sim, destination, *BACKFILL)
    assert first.returncode == 3, first.stdout + first.stderr
    # one line per window naming the request, and the skip in each window's report
    skipped = [line for line in first.stderr.splitlines() if "skipped commits." in line]
    assert len(skipped) == WINDOWS, first.stderr
    assert all(
        f"skipped commits.repository:{scope}: the list at `" in line
        and path.replace(" ", "%20") + "?" in line
        and f"answered {EMPTY_PAGES_MOST} empty pages in a row, each saying more follow" in line
        for line in skipped
    ), skipped
    windows = report_of(tmp_path)["backfill"]
    assert len(windows) == WINDOWS
    assert [[(s["resource"], s["kind"]) for s in w["report"]["skips"]] for w in windows] == [
        [(f"commits.repository:{scope}", "endless_list")]
    ] * WINDOWS
    asked = Counter(e["path"].endswith(path) for e in sim.requests()["log"])
    assert asked[True] == WINDOWS * EMPTY_PAGES_MOST
    # the rest landed: every other repository's commits, exactly
    spec = EDITIONS[edition]
    loader = Loader(sim, tmp_path, destination)
    key = ", ".join(spec.commit_columns[: spec.key_width])
    landed = Counter(
        row[spec.key_width - 2] for row in loader.rows(f"SELECT {key} FROM {spec.commits}")
    )
    expected = Counter(
        spec.commit_row(c)[spec.key_width - 2]
        for c in sim.truth("commits")
        if SINCE <= spec.commit_time(c) < CLOCK
    )
    assert slug not in landed
    assert {k: landed[k] for k in expected if k != slug} == {
        k: v for k, v in expected.items() if k != slug
    }

    sim.clear_faults()
    rerun = run(tmp_path, sim, destination, *BACKFILL)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    # no window was finished: each is read again, and nothing is skipped now
    assert f"backfill done: {WINDOWS} windows, 0 already finished before" in rerun.stdout
    assert [w["report"]["skips"] for w in report_of(tmp_path)["backfill"]] == [[]] * WINDOWS
    assert "skipped commits." not in rerun.stderr
    assert_equals_truth(loader, sim, SINCE)


def test_one_page_for_every_scope_stores_each_key_once(
    make_sim: Any, tmp_path: Path, destination: str
) -> None:
    """A self-hosted host that answers every project's and repository's commit list with the
    first one's page (as a replay of the vendor's published sample page does): each
    table holds each natural key once, the repository table only the rows of the repository
    whose page it is, with a note per other scope naming it and a key of the served one. The
    fault gone, the next nightly reads the range again and every list table equals the
    truth."""
    sim = make_sim(edition="server")
    sim.set_faults(
        {
            "rules": [
                {"kind": "same_page", "rate": 1, "match": f"commits.list.{level}"}
                for level in ("project", "repository")
            ]
        }
    )
    load = (
        "load",
        "--start-date",
        SINCE.isoformat(),
        "--end-date",
        CLOCK.isoformat(),
        "--lookback-days",
        "92",
        "--concurrency",
        "1",
    )
    first = run(tmp_path, sim, destination, *load)
    # the repositories the run meant to read are compared: those of which no row landed differ
    assert first.returncode == 5, first.stdout + first.stderr
    assert "reconciliation with the API's statistics: FAILED" in first.stdout
    loader = Loader(sim, tmp_path, destination)
    assert_unique_keys(loader, server_truth.PRIMARY_KEYS)
    repositories = loader.rows(
        "SELECT DISTINCT project_key || '/' || repository_slug FROM server_commits"
    )
    assert len(repositories) == 1, repositories
    (served,) = repositories[0]
    projects = loader.rows("SELECT DISTINCT project_key FROM server_commits_project")
    assert projects == [(served.split("/")[0],)], projects
    truth = Counter(
        f"{c['repository']['project']['key']}/{c['repository']['slug']}"
        for c in sim.truth("commits")
        if SINCE <= EDITIONS["server"].commit_time(c) < CLOCK
    )
    assert served in truth and len(truth) > 1
    notes = {
        (m["level"], m["scope"]): m
        for m in map(OUTSIDE.match, first.stdout.splitlines())
        if m is not None
    }
    others = {("repository", name) for name in truth if name != served} | {
        ("project", key) for key in {n.split("/")[0] for n in truth} - {served.split("/")[0]}
    }
    assert set(notes) == others, first.stdout
    assert all(m["key"].startswith(f"{served}/") for m in notes.values()), first.stdout
    assert {int(m["rows"]) for (level, _), m in notes.items() if level == "repository"} == {
        truth[served]
    }

    sim.clear_faults()
    second = run(tmp_path, sim, destination, *load)
    assert second.returncode == 0, second.stdout + second.stderr
    assert_equals_truth(loader, sim, SINCE, statistics=False)
