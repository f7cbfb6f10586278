"""A self-hosted backfill reads every user in every window, alias-only activity included.

The global lists name a user only through a commit's `user` object (absent when the author
e-mail is one of the user's aliases) and a pull request's author, while the user-level lists
count alias commits too. A user whose only activity in a window is alias commits is invisible
in that window's global lists: here user0006 at the end of the tiny host's history (clock
2026-11-13T03:00Z). The backfill knows the users active anywhere in its range, so every
window reads them all.

Real simulator over HTTP, real DuckDB under tmp_path; expected rows from `sim.truth`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from simulator import SimConfig, Simulator
from tests.runs.test_backfill import backfill, dated
from tests.selfhosted.request_log import scope_of_path
from tests.selfhosted.truth import (
    COMMIT_STAT_COLUMNS,
    DISCOVERY_SLACK,
    KINDS,
    LEVEL_TABLES,
    Truth,
    Window,
    at,
    check_list,
    user_of,
)
from tests.support.helpers import GRAIN, by_key, period_next, periods, select
from tests.support.loader import Loader

NOW = 1_794_538_800  # 2026-11-13T03:00Z: user0006's last activity is alias commits only
SINCE = datetime(2026, 8, 12, tzinfo=UTC)
WINDOW_DAYS = 30


@dataclass(frozen=True)
class Backfilled:
    loader: Loader
    truth: Truth
    window: Window
    users: frozenset[str]  # every user the global lists show anywhere in the range
    windows: list[tuple[datetime, datetime]]
    log: list[dict[str, Any]]  # the backfill's requests
    prefix: str  # the API path prefix


def seen_users(truth: Truth, low: datetime, high: datetime) -> set[str]:
    """Users the global lists show in [low, high): `user` objects of commits (primary e-mail)
    and pull-request authors (README: self-hosted scopes)."""
    commits = {c["user"]["name"] for c in truth.commits if "user" in c and low <= at(c) < high}
    return commits | {str(user_of(p)) for p in truth.prs if low <= at(p) < high}


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backfilled]:
    """A clean backfill from 2026-08-12 in 30-day windows, every level and resource."""
    with Simulator(SimConfig(edition="server", size="tiny", now=NOW)) as sim:
        loader = Loader(sim, Path(tmp_path_factory.mktemp("backfill_users")))
        result, log = backfill(loader, SINCE.date().isoformat(), None, WINDOW_DAYS)
        truth = Truth.read(sim)
        users = frozenset(seen_users(truth, SINCE - DISCOVERY_SLACK, truth.clock))
        yield Backfilled(
            loader,
            truth,
            Window(SINCE, truth.clock),
            users,
            [(w.start, w.end) for w in result.windows],
            log,
            sim.info()["api_prefix"],
        )


def test_the_host_has_a_user_seen_only_through_aliases_in_a_window(backfilled: Backfilled) -> None:
    """The case this module is about exists: in the last window some user's only activity is
    alias commits, and that user has a `user` object or pull request earlier in the range."""
    truth, last = backfilled.truth, datetime(2026, 11, 10, tzinfo=UTC)
    active = {user_of(c) for c in truth.commits if last <= at(c) < truth.clock} - {None}
    hidden = active - seen_users(truth, last - DISCOVERY_SLACK, truth.clock)
    assert hidden and hidden <= backfilled.users


@pytest.mark.parametrize("kind", KINDS)
def test_user_lists_equal_truth(backfilled: Backfilled, kind: str) -> None:
    """server_commits_user and server_pull_requests_user: every item of the range for each
    user (commits under alias e-mails included), no other row, values as the truth."""
    b = backfilled
    check_list(b.loader, b.truth, b.window, kind, "user", {"user": set(b.users)})
    table = LEVEL_TABLES[kind]["user"]
    assert {u for (u,) in select(b.loader, table, ("read_for_user",))} <= b.users


def test_user_commit_statistics_equal_truth(backfilled: Backfilled) -> None:
    """Every user of the range has one row per complete UTC period (month, the default) from
    the one holding the range's start (a backfill loads complete periods only), with the
    truth's count and lines of that user's commits (alias ones included)."""
    b = backfilled
    got = by_key(
        select(b.loader, "server_commit_statistics", COMMIT_STAT_COLUMNS, "WHERE level = 'user'"), 3
    )
    expected = {}
    for user in b.users:
        mine = [c for c in b.truth.commits if user_of(c) == user]
        for low, high in periods(SINCE, b.truth.clock):
            if high < period_next(low):
                continue
            lines = [c["linesOfCode"] for c in mine if low <= at(c) < high]
            expected[("user", user, low)] = (
                "user",
                user,
                low,
                GRAIN,
                high,
                "include",
                len(lines),
                sum(x["added"] for x in lines),
                sum(x["deleted"] for x in lines),
            )
    assert set(got) == set(expected), (
        f"missing {sorted(set(expected) - set(got))[:3]}, "
        f"extra {sorted(set(got) - set(expected))[:3]}"
    )
    wrong = [(got[k], expected[k]) for k in expected if got[k] != expected[k]]
    assert not wrong, f"{len(wrong)} rows differ from truth, e.g. {wrong[:2]}"
    per_user = Counter(k[1] for k, row in expected.items() if row[6])
    assert per_user and set(per_user) <= b.users


def test_every_window_reads_every_user(backfilled: Backfilled) -> None:
    """Each window asks for the user-level commit and pull-request lists of every user of the
    range, the last window (three hours long, with alias-only activity) too."""
    b = backfilled
    read: dict[tuple[str, datetime], set[str]] = {}
    for entry in b.log:
        span = dated(entry)
        level, scope = scope_of_path(entry["path"], b.prefix)
        if span is not None and level == "user" and ".list." in entry["endpoint"]:
            read.setdefault((entry["endpoint"], span[1]), set()).add(scope)
    assert len(b.windows) == 4 and b.windows[-1][1] == b.truth.clock
    for endpoint in ("commits.list.user", "pull-requests.list.user"):
        for _, end in b.windows:
            assert read.get((endpoint, end)) == set(b.users), (endpoint, end)
