"""Unit tests: config validation, dates, Retry-After, URL sanitising, paginators, Arrow mapping.

Tables of inputs and expected outputs; nothing here talks to a host.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta, timezone
from email.utils import formatdate
from time import time
from typing import Any

import pyarrow as pa
import pytest

from sources.repo_analytics.arrow import export_keys
from sources.repo_analytics.arrow.export_keys import ExportKeys, KeyDigester
from sources.repo_analytics.arrow.mapping import child_rows, series_to_arrow, to_arrow
from sources.repo_analytics.client.transport import retry_after_seconds, sanitise
from sources.repo_analytics.config import RetryConfiguration, retry_keys
from sources.repo_analytics.dates import parse_user_instant, periods, utc_from_iso, wire
from sources.repo_analytics.editions.cloud import (
    CLOUD,
    COMMIT_COLUMNS,
    LINE_COLUMNS,
    PARENTS,
    PR_STATISTICS_COLUMNS,
    PULL_REQUEST_COLUMNS,
    USER_KEY,
)
from sources.repo_analytics.editions.cloud import PAGING as CLOUD_PAGING
from sources.repo_analytics.editions.selfhosted import PAGING as SERVER_PAGING
from sources.repo_analytics.errors import (
    ConfigError,
    FatalApiError,
    SkippableApiError,
    UnsafeLinkError,
)
from sources.repo_analytics.reading import context
from sources.repo_analytics.reading.context import key_texts, may_hold_nul, row_keys
from sources.repo_analytics.reading.plan import build_plan

NOW = datetime(2026, 6, 1, tzinfo=UTC)
VALID: dict[str, Any] = {
    "base_url": "https://analytics.example.com",
    "workspace": "acme",
    "token": "t0ken",
    "start_date": "2026-05-01",
    "end_date": "2026-06-01",
}
LEVELS = ("workspace", "repository", "user")
FAMILIES = ("change_statistics", "commits", "pull_request_statistics", "pull_requests", "users")
RETRY_KEYS = retry_keys()
DATE_FORMS = ("2026-01-31", "ISO-8601")


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


# --- build_plan -------------------------------------------------------------------------------

# (changes to VALID, config key, the bad value as shown, fragments naming the valid values)
BAD_CONFIG: list[tuple[dict[str, Any], str, str, tuple[str, ...]]] = [
    ({"base_url": ""}, "base_url", "(empty)", ("https://analytics.example.com",)),
    ({"base_url": None}, "base_url", "(empty)", ("the host's URL",)),
    (
        {"base_url": "ftp://analytics.example.com"},
        "base_url",
        "ftp://analytics.example.com",
        ("the host's URL",),
    ),
    (
        {"base_url": "analytics.example.com"},
        "base_url",
        "analytics.example.com",
        ("the host's URL",),
    ),
    ({"base_url": "https://"}, "base_url", "https://", ("the host's URL",)),
    ({"api_prefix": "rest/latest"}, "api_prefix", "rest/latest", ("a path starting with /",)),
    ({"workspace": None}, "workspace", "(empty)", ("workspace slug",)),
    ({"workspace": ""}, "workspace", "(empty)", ("workspace slug",)),
    ({"levels": "bogus"}, "levels", "bogus", LEVELS),
    ({"levels": ["workspace", "global"]}, "levels", "global", LEVELS),
    ({"levels": "workspace,,user"}, "levels", "workspace,,user", ("`all` or a list of names",)),
    ({"levels": []}, "levels", "[]", ("`all` or a list of names",)),
    ({"resources": "comits"}, "resources", "comits", FAMILIES),
    ({"resources": ["commits", "pull-requests"]}, "resources", "pull-requests", FAMILIES),
    (
        {"start_date": "2026-06-02"},
        "start_date",
        "2026-06-02",
        ("a date before end_date", "2026-06-01T00:00:00+00:00"),
    ),
    ({"start_date": "2026-06-01"}, "start_date", "2026-06-01", ("a date before end_date",)),
    (
        {"start_date": "2026-06-01T02:00:00+01:00"},
        "start_date",
        "2026-06-01T02:00:00+01:00",
        ("a date before end_date",),
    ),
    ({"start_date": "yesterday"}, "start_date", "yesterday", DATE_FORMS),
    ({"start_date": "31/01/2026"}, "start_date", "31/01/2026", DATE_FORMS),
    ({"start_date": "2026-02-30"}, "start_date", "2026-02-30", DATE_FORMS),
    ({"end_date": "2026-13-01"}, "end_date", "2026-13-01", DATE_FORMS),
    ({"end_date": "2026-06-01T25:00:00Z"}, "end_date", "2026-06-01T25:00:00Z", DATE_FORMS),
    ({"lookback_days": -1}, "lookback_days", "-1", ("a number from 0 to 366",)),
    ({"lookback_days": 367}, "lookback_days", "367", ("a number from 0 to 366",)),
    ({"lookback_days": "three"}, "lookback_days", "three", ("a number from 0 to 366",)),
    ({"page_size": 0}, "page_size", "0", ("a number from 1 to 1000",)),
    ({"page_size": "0"}, "page_size", "0", ("a number from 1 to 1000",)),
    ({"page_size": 1001}, "page_size", "1001", ("a number from 1 to 1000",)),
    ({"page_size": -5}, "page_size", "-5", ("a number from 1 to 1000",)),
    ({"page_size": "big"}, "page_size", "big", ("a number from 1 to 1000",)),
    ({"statistics_period": "year"}, "statistics_period", "year", ("day", "week", "month")),
    ({"concurrency": 0}, "concurrency", "0", ("a number from 1 to 32",)),
    ({"concurrency": 33}, "concurrency", "33", ("a number from 1 to 32",)),
    ({"concurrency": "many"}, "concurrency", "many", ("a number from 1 to 32",)),
    ({"retry": {"max_attemps": 3}}, "retry", "max_attemps", RETRY_KEYS),
    ({"retry": {"max_attempts": 3, "timeout": 5}}, "retry", "timeout", RETRY_KEYS),
    ({"retry": "8"}, "retry", "8", RETRY_KEYS),
    (
        {"retry": {"max_attempts": -1}},
        "retry.max_attempts",
        "-1",
        ("a whole number from 1 to 100000",),
    ),
    (
        {"retry": {"max_attempts": 0}},
        "retry.max_attempts",
        "0",
        ("a whole number from 1 to 100000",),
    ),
    (
        {"retry": {"max_attempts": 2.5}},
        "retry.max_attempts",
        "2.5",
        ("a whole number from 1 to 100000",),
    ),
    (
        {"retry": {"skip_retry_attempts": True}},
        "retry.skip_retry_attempts",
        "True",
        ("a whole number from 1 to 100000",),
    ),
    (
        {"retry": {"read_timeout": "slow"}},
        "retry.read_timeout",
        "slow",
        ("a number above 0, up to 100000",),
    ),
    (
        {"retry": {"connect_timeout": 0}},
        "retry.connect_timeout",
        "0",
        ("a number above 0, up to 100000",),
    ),
    (
        {"retry": {"backoff_base": -0.5}},
        "retry.backoff_base",
        "-0.5",
        ("a number from 0 to 100000",),
    ),
    (
        {"retry": {"total_wait_seconds": "nan"}},
        "retry.total_wait_seconds",
        "nan",
        ("a number from 0 to 100000",),
    ),
    ({"token": None}, "token", "(empty)", ("SOURCES__REPO_ANALYTICS__TOKEN", ".dlt/secrets.toml")),
    ({"token": ""}, "token", "(empty)", ("SOURCES__REPO_ANALYTICS__TOKEN",)),
    (
        {"token": "t0ken\n"},
        "token",
        "(hidden: it holds a line break or another control character)",
        ("the value without them",),
    ),
]


@pytest.mark.parametrize(
    ("changes", "key", "shown", "valid"),
    BAD_CONFIG,
    ids=[f"{row[1]}={row[2]}" for row in BAD_CONFIG],
)
def test_bad_config_names_value_and_valid_ones(
    changes: dict[str, Any], key: str, shown: str, valid: tuple[str, ...]
) -> None:
    """Each bad value raises ConfigError naming the key and value in backticks and the valid."""
    with pytest.raises(ConfigError) as caught:
        build_plan(CLOUD, {**VALID, **changes}, NOW)
    error = caught.value
    message = str(error)
    assert error.key == key
    assert f"config `{key}` has invalid value `{shown}`" in message
    for fragment in valid:
        assert fragment in message
    assert "t0ken" not in message  # the secret is never echoed


def test_unknown_edition_is_a_config_error() -> None:
    """An edition outside the known ones is refused with the valid names."""
    with pytest.raises(
        ConfigError,
        match=r"config `edition` has invalid value `bogus`: "
        r"expected one of cloud, server",
    ):
        build_plan(replace(CLOUD, name="bogus"), VALID, NOW)


def test_valid_config_defaults() -> None:
    """Defaults: every level and family, the maximum page size, a 30-day first window."""
    plan = build_plan(
        CLOUD,
        {
            "base_url": "https://analytics.example.com/",
            "workspace": "acme",
            "token": "t0ken",
            "page_size": "",
        },
        NOW,
    )
    assert plan.api_base == "https://analytics.example.com/rest/latest"
    assert plan.levels == LEVELS
    assert plan.resources == FAMILIES
    assert plan.repositories is None and plan.users is None
    assert plan.page_size is None
    assert plan.until == NOW and plan.start == NOW - timedelta(days=30)
    assert plan.lookback == timedelta(days=3)
    assert plan.statistics_period == "month"
    assert plan.client == RetryConfiguration()
    assert "t0ken" not in repr(plan)


@pytest.mark.parametrize(
    ("levels", "resources", "shared"),
    [
        ("workspace,repository,user", "commits,pull_requests", {"cloud_commit_parents"}),
        ("repository,user", "commits", {"cloud_commit_parents"}),
        ("repository", "commits,pull_requests", set()),
        ("user", "commits", set()),
        ("workspace,repository,user", "pull_requests,users", set()),
    ],
)
def test_shared_children_are_those_several_endpoints_write(
    levels: str, resources: str, shared: set[str]
) -> None:
    """A child table is held for the whole run only where more than one endpoint of the run
    writes it (a commit's parents read at several levels); else per read of a scope."""
    plan = build_plan(CLOUD, {**VALID, "levels": levels, "resources": resources}, NOW)
    assert plan.shared_children == shared
    assert {e.level for e in plan.endpoints} <= set(levels.split(","))
    assert {e.resource for e in plan.endpoints} == set(resources.split(","))


def test_valid_config_values_are_parsed() -> None:
    """Lists from comma strings, numbers from strings, retry settings into the client's."""
    plan = build_plan(
        CLOUD,
        {
            **VALID,
            "levels": "workspace, user",
            "resources": ["commits"],
            "repositories": "a,b",
            "page_size": "50",
            "lookback_days": "1.5",
            "concurrency": "2",
            "statistics_period": "week",
            "retry": {"max_attempts": "3", "read_timeout": 0.5},
            "api_prefix": "/rest/other/",
        },
        NOW,
    )
    assert plan.levels == ("workspace", "user")
    assert plan.resources == ("commits",)
    assert plan.repositories == ("a", "b")
    assert (plan.page_size, plan.concurrency) == (50, 2)
    assert plan.lookback == timedelta(days=1.5)
    assert plan.client.max_attempts == 3 and plan.client.read_timeout == 0.5
    assert plan.api_base == "https://analytics.example.com/rest/other"
    assert (plan.start, plan.until) == (utc(2026, 5, 1), utc(2026, 6, 1))


# --- dates ------------------------------------------------------------------------------------

PARSED: list[tuple[object, datetime]] = [
    ("2026-01-31", utc(2026, 1, 31)),
    (" 2026-01-31 ", utc(2026, 1, 31)),
    ("2026-01-31T10:00:00Z", utc(2026, 1, 31, 10)),
    ("2026-01-31T10:00:00z", utc(2026, 1, 31, 10)),
    ("2026-01-31T10:00:00.250000Z", datetime(2026, 1, 31, 10, 0, 0, 250000, tzinfo=UTC)),
    ("2026-01-31T10:00:00+01:00", utc(2026, 1, 31, 9)),
    ("2026-01-31T10:00:00-05:30", utc(2026, 1, 31, 15, 30)),
    ("2026-01-31T00:30:00+05:45", utc(2026, 1, 30, 18, 45)),
    ("1997-07-16T19:20:30+01:00", utc(1997, 7, 16, 18, 20, 30)),
    ("2026-01-31T10:00:00", utc(2026, 1, 31, 10)),  # naive: UTC
    (date(2026, 1, 31), utc(2026, 1, 31)),
    (datetime(2026, 1, 31, 10), utc(2026, 1, 31, 10)),
    (datetime(2026, 1, 31, 10, tzinfo=timezone(timedelta(hours=-2))), utc(2026, 1, 31, 12)),
]


@pytest.mark.parametrize(("value", "expected"), PARSED, ids=[str(v) for v, _ in PARSED])
def test_parse_user_instant(value: object, expected: datetime) -> None:
    """User dates become aware UTC; date-only is midnight UTC, naive is UTC."""
    parsed = parse_user_instant("start_date", value)
    assert parsed == expected
    assert parsed.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "   ",
        "2026/01/31",
        "31.01.2026",
        "2026-01-31T10:00:00+25:00",
        "2026-01-31 10:00 CET",
        None,
        20260131,
        ["2026-01-31"],
    ],
)
def test_parse_user_instant_rejects(value: object) -> None:
    """Anything else is a ConfigError naming the key, the value and both accepted forms."""
    with pytest.raises(ConfigError) as caught:
        parse_user_instant("end_date", value)
    assert f"config `end_date` has invalid value `{value}`" in str(caught.value)
    assert "2026-01-31" in str(caught.value) and "ISO-8601" in str(caught.value)


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (utc(2026, 1, 31), "2026-01-31T00:00:00+00:00"),
        (datetime(2026, 1, 31, 10, 5, 7, 999999, tzinfo=UTC), "2026-01-31T10:05:07+00:00"),
        (
            datetime(2026, 1, 31, 1, tzinfo=timezone(timedelta(hours=2))),
            "2026-01-30T23:00:00+00:00",
        ),
    ],
)
def test_wire_is_utc_with_explicit_offset(moment: datetime, expected: str) -> None:
    """The wire form: seconds precision, always +00:00 (never Z, never naive)."""
    assert wire(moment) == expected


def test_wire_of_parsed_user_input() -> None:
    """Date-only user input goes out as midnight with an explicit offset."""
    assert wire(parse_user_instant("start_date", "2026-03-01")) == "2026-03-01T00:00:00+00:00"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-05-31T23:12:43.043000Z", datetime(2026, 5, 31, 23, 12, 43, 43000, tzinfo=UTC)),
        ("2026-05-31T23:12:43+02:00", utc(2026, 5, 31, 21, 12, 43)),
        (None, None),
        ("", None),
    ],
)
def test_utc_from_iso(text: str | None, expected: datetime | None) -> None:
    """API timestamps with a zone become aware UTC; missing ones stay None."""
    assert utc_from_iso(text) == expected


PERIODS: list[tuple[datetime, datetime, str, list[tuple[datetime, datetime]]]] = [
    (
        utc(2026, 5, 30, 10),
        utc(2026, 6, 1, 12),
        "day",
        [
            (utc(2026, 5, 30), utc(2026, 5, 31)),
            (utc(2026, 5, 31), utc(2026, 6, 1)),
            (utc(2026, 6, 1), utc(2026, 6, 1, 12)),
        ],
    ),
    (
        utc(2026, 5, 30),
        utc(2026, 6, 1),
        "day",
        [(utc(2026, 5, 30), utc(2026, 5, 31)), (utc(2026, 5, 31), utc(2026, 6, 1))],
    ),
    (
        datetime(2026, 5, 30, 1, tzinfo=timezone(timedelta(hours=2))),
        utc(2026, 5, 30, 6),
        "day",
        [(utc(2026, 5, 29), utc(2026, 5, 30)), (utc(2026, 5, 30), utc(2026, 5, 30, 6))],
    ),
    # 2026-05-27 is a Wednesday: weeks start on the Monday before.
    (
        utc(2026, 5, 27, 8),
        utc(2026, 6, 3, 9),
        "week",
        [(utc(2026, 5, 25), utc(2026, 6, 1)), (utc(2026, 6, 1), utc(2026, 6, 3, 9))],
    ),
    (utc(2026, 6, 1), utc(2026, 6, 8), "week", [(utc(2026, 6, 1), utc(2026, 6, 8))]),
    (
        utc(2026, 1, 15),
        utc(2026, 3, 10),
        "month",
        [
            (utc(2026, 1, 1), utc(2026, 2, 1)),
            (utc(2026, 2, 1), utc(2026, 3, 1)),
            (utc(2026, 3, 1), utc(2026, 3, 10)),
        ],
    ),
    (
        utc(2025, 12, 31, 23),
        utc(2026, 1, 2),
        "month",
        [(utc(2025, 12, 1), utc(2026, 1, 1)), (utc(2026, 1, 1), utc(2026, 1, 2))],
    ),
    (utc(2024, 2, 29), utc(2024, 3, 1), "month", [(utc(2024, 2, 1), utc(2024, 3, 1))]),
    (utc(2026, 6, 1), utc(2026, 6, 1), "day", []),
]


@pytest.mark.parametrize(
    ("since", "until", "period", "expected"),
    PERIODS,
    ids=[f"{p}-{s:%m%d}-{u:%m%d}" for s, u, p, _ in PERIODS],
)
def test_periods(
    since: datetime, until: datetime, period: str, expected: list[tuple[datetime, datetime]]
) -> None:
    """Calendar periods in UTC from the one holding `since`; the last is cut at `until`."""
    assert list(periods(since, until, period)) == expected


# --- Retry-After, sanitise --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", 0.0),
        ("5", 5.0),
        (" 7 ", 7.0),
        ("1.5", 1.5),
        ("-3", 0.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),  # a date in the past: no wait
        ("soon", None),
        ("", None),
        (None, None),
        ("Someday, 99 Foo 2026", None),
    ],
)
def test_retry_after_seconds(value: str | None, expected: float | None) -> None:
    """Delay-seconds, past HTTP dates (0) and garbage (None: use the back-off)."""
    assert retry_after_seconds(value) == expected


def test_retry_after_http_date_in_the_future() -> None:
    """An HTTP date is read relative to now."""
    seconds = retry_after_seconds(formatdate(time() + 30, usegmt=True))
    assert seconds is not None and 27 <= seconds <= 30


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "https://user:secret@host.example:8443/rest/latest?page=2#frag",
            "https://host.example:8443/rest/latest?page=2",
        ),
        (
            "http://sim-cloud-token@127.0.0.1:4000/rest/latest/x",
            "http://127.0.0.1:4000/rest/latest/x",
        ),
        ("https://user:pa%40ss@host.example/p", "https://host.example/p"),
        ("https://host.example/rest/latest", "https://host.example/rest/latest"),
        ("http://admin:pw@[::1]:8080/x", "http://[::1]:8080/x"),
    ],
)
def test_sanitise_strips_user_info(url: str, expected: str) -> None:
    """User info never reaches logs or messages; host, port, path and query stay."""
    assert sanitise(url) == expected


# --- paginators -------------------------------------------------------------------------------

BASE = "https://host.example/rest/latest"
PAGES = f"{BASE}/workspace/acme/commits"


def cloud_page(next_link: str | None, values: list[Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "values": values if values is not None else [{"hash": "a"}],
        "page": 1,
        "pagelen": 2,
    }
    if next_link is not None:
        body["next"] = next_link
    return body


def test_next_link_paginator_follows_links() -> None:
    """pagelen on the first request; then the link's own URL and parameters; stop at no link."""
    paginator = CLOUD_PAGING.paginator(2, BASE + "/")
    params: dict[str, Any] = {"order": "oldest"}
    paginator.init_request(params)
    assert params == {"order": "oldest", "pagelen": 2}
    paginator.update_state(
        cloud_page(
            f"{PAGES}?order=oldest&since_date=2026-03-01T00%3A00%3A00%2B00%3A00&page=2&pagelen=2"
        )
    )
    assert paginator.has_next
    assert paginator.update_request(params) == PAGES
    assert params == {
        "order": "oldest",
        "since_date": "2026-03-01T00:00:00+00:00",
        "page": "2",
        "pagelen": "2",
    }
    paginator.update_state(cloud_page(None, [{"hash": "b"}]))
    assert not paginator.has_next
    assert paginator.update_request(params) is None
    assert paginator.items(cloud_page(None, [{"hash": "b"}])) == [{"hash": "b"}]
    assert paginator.items({"page": 1}) == []


def test_next_link_with_explicit_default_port_is_same_origin() -> None:
    """`https://host:443/` is the same origin as `https://host/`."""
    paginator = CLOUD_PAGING.paginator(2, BASE)
    paginator.update_state(cloud_page("https://host.example:443/rest/latest/x?page=2"))
    assert paginator.has_next


UNSAFE_LINKS = [
    "https://evil.example/rest/latest/workspace/acme/commits?page=2",
    "https://host.example.evil.example/rest/latest/workspace/acme/commits?page=2",
    "https://host.example:8443/rest/latest/workspace/acme/commits?page=2",
    "http://host.example/rest/latest/workspace/acme/commits?page=2",
    "https://host.example@evil.example/rest/latest/workspace/acme/commits?page=2",
    "https://host.example/other/workspace/acme/commits?page=2",
    "https://host.example/rest/latestX/workspace/acme/commits?page=2",
    "https://host.example/rest/latest?page=2",
    "https://host.example/rest/latest/../../admin?page=2",
    "https://host.example/rest/latest/%2e%2e/admin?page=2",
    "https://host.example:99999/rest/latest/x?page=2",
    "/rest/latest/workspace/acme/commits?page=2",
    "//evil.example/rest/latest/workspace/acme/commits?page=2",
]


@pytest.mark.parametrize("link", UNSAFE_LINKS)
def test_next_link_paginator_refuses_other_origins_and_paths(link: str) -> None:
    """Another host, port or scheme, or a path outside the prefix: UnsafeLinkError, not followed."""
    paginator = CLOUD_PAGING.paginator(2, BASE)
    with pytest.raises(UnsafeLinkError) as caught:
        paginator.update_state(cloud_page(link))
    assert caught.value.kind == "unsafe_link"
    assert isinstance(caught.value, FatalApiError)
    assert f"`{BASE}`" in str(caught.value)
    assert paginator.update_request({}) is None


def test_next_link_paginator_refuses_a_repeating_link() -> None:
    """The same next link twice: a fatal error instead of a loop."""
    paginator = CLOUD_PAGING.paginator(2, BASE)
    link = f"{PAGES}?page=2&pagelen=2"
    paginator.update_state(cloud_page(link))
    paginator.update_request({})
    with pytest.raises(FatalApiError) as caught:
        paginator.update_state(cloud_page(link))
    assert caught.value.kind == "repeating_page"
    assert link in str(caught.value)


def test_start_limit_paginator_pages_until_last() -> None:
    """start/limit from 0; nextPageStart while isLastPage is false; stop at isLastPage."""
    paginator = SERVER_PAGING.paginator(25, BASE)
    params: dict[str, Any] = {}
    paginator.init_request(params)
    assert params == {"start": 0, "limit": 25}
    paginator.update_state({"values": [1] * 25, "isLastPage": False, "nextPageStart": 25})
    assert paginator.has_next
    assert paginator.update_request(params) == ""  # the same path
    assert params == {"start": 25, "limit": 25}
    paginator.update_state({"values": [1], "isLastPage": True, "start": 25})
    assert not paginator.has_next
    assert paginator.update_request(params) is None
    assert paginator.items({"values": [1, 2]}) == [1, 2]


@pytest.mark.parametrize(
    "pages",
    [
        [0],  # the first page (start=0) pointing at itself
        [25, 25],
        [25, 50, 25],
        ["25"],
        [None],
    ],
    ids=["first-page-zero", "repeat", "backwards", "string", "missing"],
)
def test_start_limit_paginator_refuses_non_advancing_start(pages: list[Any]) -> None:
    """A nextPageStart that does not move forward is a fatal error, never a loop."""
    paginator = SERVER_PAGING.paginator(25, BASE)
    params: dict[str, Any] = {}
    paginator.init_request(params)
    *good, bad = pages
    for start in good:
        paginator.update_state({"isLastPage": False, "nextPageStart": start})
        paginator.update_request(params)
    body: dict[str, Any] = {"isLastPage": False}
    if bad is not None:
        body["nextPageStart"] = bad
    with pytest.raises(FatalApiError) as caught:
        paginator.update_state(body)
    assert caught.value.kind == "repeating_page"
    assert f"nextPageStart={bad!r}" in str(caught.value)


@pytest.mark.parametrize(
    ("items", "start", "plausible"),
    [(25, 25, True), (10, 25, True), (40, 40, True), (25, 26, False), (0, 50, False)],
)
def test_start_limit_paginator_refuses_a_start_no_page_made_plausible(
    items: int, start: int, plausible: bool
) -> None:
    """A next start beyond the page size asked (or the items of a larger page) would skip
    items or page on for ever: the read stops with a skippable error naming the values."""
    paginator = SERVER_PAGING.paginator(25, BASE)
    paginator.init_request({})
    body = {"isLastPage": False, "nextPageStart": start, "values": [{}] * items}
    if plausible:
        paginator.update_state(body)
        return
    with pytest.raises(SkippableApiError) as caught:
        paginator.update_state(body)
    assert caught.value.kind == "endless_list"
    assert f"nextPageStart={start} after a page of {items} items at start=0" in str(caught.value)


# --- Arrow mapping ----------------------------------------------------------------------------

COMMITS = [
    {
        "hash": "a" * 40,
        "repository": {"slug": "core-api"},
        "author": {"display_name": "Zoë Ñandú", "uuid": "{u-1}"},
        "date": "2026-05-01T10:00:00",
        "parents": [{"hash": "p" * 40}, {"hash": "q" * 20}],
        "lines": {"added": 7, "deleted": 0},
    },
    {
        "hash": "b" * 40,
        "repository": {"slug": "core-api"},
        "author": {"display_name": "contractor", "uuid": None},
        "date": "2026-05-02T23:30:05",
        "parents": [],
    },
    {
        "hash": "c" * 40,
        "repository": {"slug": "Web App"},
        "author": None,
        "date": "2026-05-03T00:00:00",
        "parents": [{"hash": "a" * 40}],
    },
]


def test_to_arrow_commit_rows() -> None:
    """Declared types; nulls for absent or null fields; counts and flags from parents."""
    table = to_arrow(COMMITS, (USER_KEY, *COMMIT_COLUMNS, *LINE_COLUMNS), {"user": "{u-9}"})
    assert table.schema.field("date_local").type == pa.timestamp("us")  # zone-less
    assert table.schema.field("parent_count").type == pa.int32()
    assert table.schema.field("lines_added").type == pa.int64()
    assert not table.schema.field("hash").nullable and table.schema.field("author_uuid").nullable
    assert table.to_pylist() == [
        {
            "read_for_user_uuid": "{u-9}",
            "repository_slug": "core-api",
            "hash": "a" * 40,
            "author_display_name": "Zoë Ñandú",
            "author_uuid": "{u-1}",
            "date_local": datetime(2026, 5, 1, 10),
            "parent_count": 2,
            "is_merge": True,
            "lines_added": 7,
            "lines_deleted": 0,
        },
        {
            "read_for_user_uuid": "{u-9}",
            "repository_slug": "core-api",
            "hash": "b" * 40,
            "author_display_name": "contractor",
            "author_uuid": None,
            "date_local": datetime(2026, 5, 2, 23, 30, 5),
            "parent_count": 0,
            "is_merge": False,
            "lines_added": None,
            "lines_deleted": None,
        },
        {
            "read_for_user_uuid": "{u-9}",
            "repository_slug": "Web App",
            "hash": "c" * 40,
            "author_display_name": None,
            "author_uuid": None,
            "date_local": datetime(2026, 5, 3),
            "parent_count": 1,
            "is_merge": False,
            "lines_added": None,
            "lines_deleted": None,
        },
    ]


def test_child_rows_copy_parent_keys_and_positions() -> None:
    """One row per parent, in order, with the commit's key and cursor copied; a root commit
    gets one `removed` marker row (position -1) that empties its stored list."""
    table = to_arrow(COMMITS, COMMIT_COLUMNS, {})
    rows = child_rows(COMMITS, table, PARENTS, {})
    assert rows.schema.names == [
        "repository_slug",
        "hash",
        "date_local",
        "position",
        "parent_hash",
        "removed",
    ]
    assert rows.schema.field("position").type == pa.int32()
    assert rows.schema.field("date_local").type == pa.timestamp("us")
    root = COMMITS[1]
    assert [tuple(r.values()) for r in rows.to_pylist()] == [
        ("core-api", "a" * 40, datetime(2026, 5, 1, 10), 0, "p" * 40, False),
        ("core-api", "a" * 40, datetime(2026, 5, 1, 10), 1, "q" * 20, False),
        (
            root["repository"]["slug"],
            root["hash"],
            datetime.fromisoformat(root["date"]),
            -1,
            None,
            True,
        ),
        ("Web App", "c" * 40, datetime(2026, 5, 3), 0, "a" * 40, False),
    ]
    assert PARENTS.primary_key == ("repository_slug", "hash", "position")


def test_child_rows_of_items_without_lists() -> None:
    """No parents: only the marker row that empties the stored list, flagged `removed`."""
    items = [COMMITS[1]]
    rows = child_rows(items, to_arrow(items, COMMIT_COLUMNS, {}), PARENTS, {})
    assert rows.num_rows == 1
    assert rows.column("removed").to_pylist() == [True]
    assert rows.column("position").to_pylist() == [-1]
    assert rows.schema.names == [
        "repository_slug",
        "hash",
        "date_local",
        "position",
        "parent_hash",
        "removed",
    ]


def test_to_arrow_pull_requests_are_aware_utc() -> None:
    """Pull-request timestamps become UTC-aware; a null closed date stays null."""
    item = {
        "id": 9,
        "title": "Fix",
        "state": "OPEN",
        "closed": False,
        "author": {"display_name": "Ana", "uuid": "{u-1}"},
        "destination": {"branch": {"name": "main"}, "repository": {"slug": "core-api"}},
        "created_date": "2026-05-31T23:12:43.043000Z",
        "closed_date": None,
        "updated_date": "2026-06-01T00:00:00.000000Z",
        "comment_count": 0,
        "task_count": 2,
    }
    table = to_arrow([item], PULL_REQUEST_COLUMNS, {})
    assert table.schema.field("created_at").type == pa.timestamp("us", tz="UTC")
    row = table.to_pylist()[0]
    assert row["repository_slug"] == "core-api" and row["destination_branch"] == "main"
    assert row["created_at"] == datetime(2026, 5, 31, 23, 12, 43, 43000, tzinfo=UTC)
    assert row["closed_at"] is None and row["task_count"] == 2


def test_to_arrow_statistics_from_context() -> None:
    """Statistics rows take scope and period from the context, numbers from the body."""
    body = {"pull_requests": 5, "state": {"declined": 1, "merged": 2, "open": 2, "superseded": 0}}
    context = {
        "level": "repository",
        "scope": "core-api",
        "period_start": utc(2026, 5, 1),
        "period_end": utc(2026, 5, 2),
        "period": "day",
        "state": "all",
        "date_type": "created",
    }
    row = to_arrow([body], PR_STATISTICS_COLUMNS, context).to_pylist()[0]
    assert row == {
        "level": "repository",
        "scope": "core-api",
        "period_start": utc(2026, 5, 1),
        "period": "day",
        "period_end": utc(2026, 5, 2),
        "state_filter": "all",
        "date_type": "created",
        "pull_requests": 5,
        "declined": 1,
        "merged": 2,
        "open": 2,
        "superseded": 0,
    }


def test_series_to_arrow_equals_each_row_alone() -> None:
    """A statistics series (three periods, each answer its own context) as one table equals
    each row built alone and concatenated: values, period columns and types alike, also with
    a missing member and a null count."""
    bodies = [
        {"pull_requests": 5, "state": {"declined": 1, "merged": 2, "open": 2, "superseded": 0}},
        {"pull_requests": 0, "state": {"declined": 0, "merged": 0, "open": 0}},
        {"pull_requests": None, "state": None},
    ]
    contexts = [
        {
            "level": "repository",
            "scope": "core-api",
            "period_start": utc(2026, 5, day),
            "period_end": utc(2026, 5, day + 1),
            "period": "day",
            "state": "all",
            "date_type": "created",
        }
        for day in (1, 2, 3)
    ]
    series = series_to_arrow(bodies, PR_STATISTICS_COLUMNS, contexts)
    alone = pa.concat_tables(
        to_arrow([body], PR_STATISTICS_COLUMNS, context)
        for body, context in zip(bodies, contexts, strict=True)
    )
    assert series.schema == alone.schema
    assert series.to_pylist() == alone.to_pylist()
    assert [row["period_start"] for row in series.to_pylist()] == [
        utc(2026, 5, d) for d in (1, 2, 3)
    ]
    assert [row["superseded"] for row in series.to_pylist()] == [0, None, None]
    with pytest.raises(ValueError, match="3 items with 2 contexts"):
        series_to_arrow(bodies, PR_STATISTICS_COLUMNS, contexts[:2])


@pytest.fixture(params=["python", "arrow"])
def key_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Keys of every table joined in Python where its columns allow (`python`), or of none
    (`arrow`): both ways must make the same bytes (a small table's keys meet a large one's)."""
    rows = 10**9 if request.param == "python" else -1
    monkeypatch.setattr(context, "SMALL_KEY_ROWS", rows)
    return str(request.param)


@pytest.fixture(params=["python", "duckdb", "both"])
def digest_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Digests of every batch made in Python (`python`), by DuckDB (`duckdb`), or of batches
    of up to 2 keys in Python and larger ones by DuckDB (`both`): the same bytes every way."""
    rows = {"python": 10**9, "duckdb": -1, "both": 2}[request.param]
    monkeypatch.setattr(export_keys, "SMALL_DIGEST_ROWS", rows)
    return str(request.param)


def test_digests_are_the_same_bytes_either_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key's digest is its text's MD5 whichever way it is made: non-ASCII text, an empty
    key, an escaped NUL, a large string, a chunked array, one key and many."""
    texts = ["a", "", "ümlaut\x1f123", "x\x00\x01y", "z" * 300, *(f"k{i}" for i in range(50))]
    shapes = [
        pa.array(texts),
        pa.array(texts, pa.large_string()),
        pa.chunked_array([texts[:3], texts[3:]]),
        pa.array(texts[:1]),
    ]
    made = {}
    for path, rows in (("python", 10**9), ("duckdb", -1)):
        monkeypatch.setattr(export_keys, "SMALL_DIGEST_ROWS", rows)
        made[path] = [KeyDigester().digests(shape).to_pylist() for shape in shapes]
    assert made["python"] == made["duckdb"]
    assert made["python"][0] == [hashlib.md5(t.encode()).digest() for t in texts]
    assert made["python"][1] == made["python"][2] == made["python"][0]


def test_export_keys_keep_the_first_row_of_each_key_over_the_batches(digest_path: str) -> None:
    """A scope's export: a key repeated inside a batch, one a later batch repeats, and the
    rest kept; the held digests are those of the rows kept (16 bytes a key)."""
    keys = ExportKeys(KeyDigester())
    first = pa.array(["a", "b", "a", "c", "b"])
    assert keys.fresh(first).to_pylist() == [True, True, False, True, False]
    assert keys.fresh(pa.array(["d", "e"])) is None
    assert keys.fresh(pa.array(["e", "f", "a", "f"])).to_pylist() == [False, True, False, False]
    assert keys.fresh(pa.array(["g"])) is None
    held = [d for batch in keys.seen for d in batch.to_pylist()]
    assert len(held) == len(set(held)) == 7 and {len(d) for d in held} == {16}
    assert ExportKeys(KeyDigester()).fresh(pa.array([], pa.string())) is None


def test_row_keys_tell_every_row_apart_and_match_equal_rows(key_path: str) -> None:
    """One string per row (its bytes the key a list read holds), and one digest of it (what
    a CSV export's read holds, `export_keys`): a NUL inside a value, a missing value, an
    empty one and the null marker's own text never make two different rows one key; equal
    values make one key whatever the column's integer width. `key_texts` is Arrow's; the
    keys, by either path (`key_path`), are its bytes."""
    table = pa.table(
        {
            "a": ["x\x00", "x", None, "", "\x00\x02", "1", "x\x00"],
            "b": ["y", "\x00y", "z", "z", "z", "z", "y"],
            "n": pa.array([1, 1, 1, 1, 1, None, 2], pa.int64()),
        }
    )
    texts = key_texts(table, ["a", "b", "n"]).to_pylist()
    keys = row_keys(table, ["a", "b", "n"])
    digests = KeyDigester().digests(key_texts(table, ["a", "b", "n"])).to_pylist()
    assert len(set(texts)) == len(texts) == 7
    assert keys == [text.encode() for text in texts]
    assert len(set(digests)) == len(digests) == 7 and {len(k) for k in digests} == {16}
    narrow = pa.table({"a": ["x\x00"], "b": ["y"], "n": pa.array([1], pa.int32())})
    assert key_texts(narrow, ["a", "b", "n"]).to_pylist() == texts[:1]
    assert row_keys(narrow, ["a", "b", "n"]) == keys[:1]
    assert KeyDigester().digests(key_texts(narrow, ["a", "b", "n"])).to_pylist() == digests[:1]
    large = table.cast(
        pa.schema([("a", pa.large_string()), ("b", pa.large_string()), ("n", pa.int64())])
    )
    assert key_texts(large, ["a", "b", "n"]).to_pylist() == texts  # NULs escaped there too
    instants = pa.table({"t": pa.array([utc(2026, 5, 1), None], pa.timestamp("us", tz="UTC"))})
    assert key_texts(instants, ["t"]).to_pylist() == ["2026-05-01 00:00:00.000000Z", "\x00\x02"]
    for other in (instants, pa.table({"f": [True, None]}), pa.table({"x": [0.5, 2.0]})):
        name = other.column_names[0]  # an instant, a truth, a float: Arrow's text, not Python's
        assert row_keys(other, [name]) == [t.encode() for t in key_texts(other, [name]).to_pylist()]
    assert row_keys(large, ["a", "b", "n"]) == keys
    mixed = pa.table(
        {"n": pa.array([-7, None, 2**40], pa.int64()), "u": pa.array([1, 2, 3], pa.uint8())}
    )
    assert row_keys(mixed, ["n", "u"]) == [
        t.encode() for t in key_texts(mixed, ["n", "u"]).to_pylist()
    ]
    assert key_texts(table, ["b"]).to_pylist().count("z") == 4  # a value without NUL is itself
    assert len(set(row_keys(table, ["b"]))) == 3  # y, \x00y, z
    assert len(set(KeyDigester().digests(key_texts(table, ["b"])).to_pylist())) == 3


def test_a_nul_is_found_in_any_chunk_and_a_slice_keeps_its_text() -> None:
    """The NUL check reads each chunk's bytes: a NUL in a later chunk is escaped; a slice
    whose buffer holds a NUL of a row outside it may be told it has one, and its texts stay
    the same."""
    chunked = pa.chunked_array([["a", "b"], ["c\x00", "d"]])
    assert may_hold_nul(chunked) and not may_hold_nul(pa.chunked_array([["a"], ["b"]]))
    table = pa.table({"k": chunked})
    assert key_texts(table, ["k"]).to_pylist() == ["a", "b", "c\x00\x01", "d"]
    sliced = pa.array(["x\x00", "y", "z"]).slice(1)
    assert may_hold_nul(sliced)  # the buffer's first row: a needless escape, nothing else
    assert key_texts(pa.table({"k": sliced}), ["k"]).to_pylist() == ["y", "z"]
