"""A nightly's discovery reads the top-level lists from where the top-level resources read
them, and those resources take its pages instead of asking again: up to `KEPT_PAGES_MOST`
pages a list; a longer list is read again by its resource, and nothing is lost either way."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from sources.repo_analytics.client import edition_client
from sources.repo_analytics.context import ReadContext
from sources.repo_analytics.editions import EDITION_SPECS
from sources.repo_analytics.plan import build_plan
from sources.repo_analytics.readers import endpoint_pages
from sources.repo_analytics.report import RunReport
from sources.repo_analytics.scopes import discover
from sources.repo_analytics.settings import KEPT_PAGES_MOST
from tests.extractor.helpers import run_with_log, snapshot
from tests.extractor.server_load import truth as server_truth

SCOPES = {"levels": "global,repository", "resources": "commits,pull_requests"}


def global_pages(log: list[dict[str, Any]], endpoint: str) -> Counter[tuple[Any, ...]]:
    """How often each page of a global list was asked in `log`."""
    return Counter(
        tuple(sorted(entry["params"].items())) for entry in log if entry["endpoint"] == endpoint
    )


@pytest.mark.parametrize(("page_size", "kept"), [(None, True), (2, False)])
def test_nightly_discovery_pages_serve_the_global_lists(
    make_sim: Any, loader: Any, page_size: int | None, kept: bool
) -> None:
    sim = make_sim(edition="server", size="small")
    run = loader(sim)
    run.load(**SCOPES)
    first = snapshot(run)
    _, log = run_with_log(sim, run, **SCOPES, page_size=page_size)
    assert snapshot(run) == first  # the same clock: nothing new, nothing lost
    commits = global_pages(log, "commits.list.global")
    # with page size 2, the look-back of the global commit list is longer than what is kept
    assert (len(commits) <= KEPT_PAGES_MOST) is kept, len(commits)
    for endpoint in ("commits.list.global", "pull-requests.list.global"):
        pages = global_pages(log, endpoint)
        # discovery reads the range the resource reads, with the run's page size
        assert len({dict(page)["sinceDate"] for page in pages}) == 1, (endpoint, pages)
        if page_size is not None:
            assert {dict(page)["limit"] for page in pages} == {str(page_size)}, (endpoint, pages)
        if len(pages) <= KEPT_PAGES_MOST:  # discovery's pages served the resource
            assert set(pages.values()) == {1}, (endpoint, pages)
        else:  # discovery kept none; the resource read every page again
            assert set(pages.values()) == {2}, (endpoint, pages)


@pytest.mark.parametrize("edition", ["cloud", "server"])
def test_a_discovery_of_keys_alone_finds_what_whole_pages_show(
    make_sim: Any, loader: Any, edition: str
) -> None:
    """A backfill's discovery decodes only the key columns of the top-level lists; it finds
    the same repositories and users as reading every column of the same pages (a nightly's
    discovery, which keeps them for the resources); on the self-hosted host, exactly the
    repositories and users of the simulator's items in the range."""
    sim = make_sim(edition=edition, size="small")
    args = loader(sim).source_args(resources="commits,pull_requests")
    plan = build_plan(EDITION_SPECS[edition], args)
    client = edition_client(plan, RunReport())
    keys_only = discover(ReadContext(plan, client, client.report), plan.start)
    whole = discover(ReadContext(plan, client, client.report), plan.start, keep=True)
    assert keys_only == whole
    assert keys_only.repositories
    # the cloud's top-level lists name no user (its users come from the members' list)
    assert bool(keys_only.users) is (edition == "server")
    if edition == "server":  # exact instants (the cloud's commit dates are zone-less)
        truth = server_truth.Truth.read(sim)
        window = server_truth.Window(plan.start, truth.clock)
        active = [i for i in (*truth.commits, *truth.prs) if window.holds(i)]
        assert {"/".join(names) for names in keys_only.repositories} == {
            server_truth.repo_of(i) for i in active
        }
        assert keys_only.users == {
            i["user"]["name"] if "authorTimestamp" in i else server_truth.user_of(i)
            for i in active
            if "authorTimestamp" not in i or "user" in i
        }
    with pytest.raises(ValueError, match="not kept"):
        endpoint = next(e for e in plan.edition.endpoints if e.paging is not None)
        ctx = ReadContext(plan, client, client.report)
        next(iter(endpoint_pages(ctx, endpoint, "/x", {}, 10, "x", True, endpoint.columns)))
