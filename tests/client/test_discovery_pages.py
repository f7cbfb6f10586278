"""A nightly's discovery reads the top-level lists from where the top-level resources read
them, and those resources take its pages instead of asking again: up to `KEPT_PAGES_MOST`
pages a list; a longer list is read again by its resource, and nothing is lost either way."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from sources.repo_analytics.client.transport import HostGate
from sources.repo_analytics.dates import wire
from sources.repo_analytics.editions import EDITION_SPECS
from sources.repo_analytics.reading.context import ReadContext, edition_client
from sources.repo_analytics.reading.plan import build_plan
from sources.repo_analytics.reading.readers import endpoint_pages
from sources.repo_analytics.reading.scopes import RangeDiscovery, discover
from sources.repo_analytics.report import RunReport
from sources.repo_analytics.settings import KEPT_PAGES_MOST
from tests.selfhosted import truth as server_truth
from tests.support.helpers import run_with_log, snapshot

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


def test_a_range_discovery_reads_later_slices_ahead_and_stops_when_closed(
    make_sim: Any, loader: Any
) -> None:
    """A backfill's range discovery: a window's slice, read in parts, finds what one read of
    the slice finds; the later slices are read in the background, never more than the
    host's `concurrency` requests open; closing it stops their parts at their next page
    (with 0.2 s added to every top-level list page, far fewer pages than the later slices
    have are asked after the first window's slice), and for good."""
    sim = make_sim(edition="server", size="small")
    args = loader(sim).source_args(resources="commits,pull_requests", page_size=20)
    plan = build_plan(EDITION_SPECS["server"], args, args["now"])  # the simulator's clock
    client = edition_client(plan, RunReport(), HostGate(plan.concurrency))
    ctx = ReadContext(plan, client, client.report)
    start = plan.until - timedelta(days=60)
    slices = ((start, start + timedelta(days=30)), (start + timedelta(days=30), plan.until))
    slack = plan.cursor_slack(True)
    whole_slices = [discover(ctx, since - slack, until) for since, until in slices]
    assert whole_slices[0].repositories and whole_slices[1].repositories

    in_full = RangeDiscovery(start, plan.until, tuple(plan.resources), slices)
    try:
        found = [in_full.window(ctx, *each, plan.resources) for each in slices]
        everything = in_full.discovered(ctx)
    finally:
        in_full.close()
    # the simulator's ground truth of each slice (from its start less the slack)
    truth = server_truth.Truth.read(sim)
    expected = []
    for since, until in slices:
        active = [
            i
            for i in (*truth.commits, *truth.prs)
            if server_truth.Window(since - slack, until).holds(i)
        ]
        repositories = {server_truth.repo_of(i) for i in active}
        users = {
            i["user"]["name"] if "authorTimestamp" in i else server_truth.user_of(i)
            for i in active
            if "authorTimestamp" not in i or "user" in i
        }
        expected.append((repositories, users))
    for got, whole, (repositories, users) in zip(found, whole_slices, expected, strict=True):
        assert got == whole
        assert {"/".join(names) for names in got.repositories} == repositories
        assert got.users == users
    assert {"/".join(names) for names in everything.repositories} == (
        expected[0][0] | expected[1][0]
    )
    assert everything.users == expected[0][1] | expected[1][1]
    later_pages = sum(
        1
        for e in sim.requests(since=0)["log"]
        if e["endpoint"].endswith(".global") and e["params"].get("untilDate") == wire(plan.until)
    )

    sim.set_faults({"rules": [{"kind": "slow", "rate": 1, "slow_seconds": 0.2, "match": "global"}]})
    before = sim.requests()["total"]
    closed = RangeDiscovery(start, plan.until, tuple(plan.resources), slices)
    try:
        assert closed.window(ctx, *slices[0], plan.resources) == whole_slices[0]
        at_close = sim.requests()["total"]
    finally:
        closed.close()
    after = sim.requests()["total"]
    assert sim.requests()["open_max"] <= plan.concurrency
    # each part under way asks at most the page it is on; the later slice has many more
    assert after - at_close <= plan.concurrency < later_pages / 2, (at_close, after, later_pages)
    assert at_close > before
    with pytest.raises(RuntimeError, match="closed"):  # for good: nothing is asked again
        closed.window(ctx, *slices[1], plan.resources)
    assert sim.requests()["total"] == after


def test_a_short_slice_is_read_whole(make_sim: Any, loader: Any) -> None:
    """A slice shorter than two weeks (from its start less the slack) is one part: each of
    its lists asked once, from the slice's start less the slack to its end; a 30-day slice
    is cut in 4 consecutive parts (`concurrency`); what they find is the same."""
    sim = make_sim(edition="cloud", size="small")
    args = loader(sim).source_args(resources="commits,pull_requests")
    plan = build_plan(EDITION_SPECS["cloud"], args, args["now"])  # the simulator's clock
    client = edition_client(plan, RunReport(), HostGate(plan.concurrency))
    ctx = ReadContext(plan, client, client.report)
    slack = plan.cursor_slack(True)
    for days, count in ((3, 1), (12, 1), (30, 4)):
        start = plan.until - timedelta(days=days)
        before = sim.requests()["total"]
        found = RangeDiscovery(start, plan.until, tuple(plan.resources), ((start, plan.until),))
        try:
            got = found.window(ctx, start, plan.until, plan.resources)
        finally:
            found.close()
        asked = {
            (e["endpoint"], e["params"]["since_date"], e["params"]["until_date"])
            for e in sim.requests(since=before)["log"]
        }
        for endpoint in ("commits.list.workspace", "pull-requests.list.workspace"):
            spans = sorted((a, b) for name, a, b in asked if name == endpoint)
            assert len(spans) == count, (days, spans)
            assert spans[0][0] == wire(start - slack) and spans[-1][1] == wire(plan.until)
            assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False)), spans
        assert got == discover(ctx, start - slack, plan.until)
