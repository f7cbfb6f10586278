"""Constants and defaults of the extractor. No logic."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, NamedTuple

EDITIONS: Final = ("cloud", "server")

RETRYABLE_STATUSES: Final = frozenset({429, 500, 502, 503, 504})

DEFAULT_LOOKBACK_DAYS: Final = 3
# The cloud commit `date` has no zone: it can be up to 14 h either side of the instant the API
# filters by, so its cursor re-reads this much more (26 h: 14 h + 12 h, the widest offsets).
NAIVE_DATE_SLACK_HOURS: Final = 26
DEFAULT_START_DAYS: Final = 30
STATISTICS_PERIODS: Final = ("day", "week", "month")
DEFAULT_CONCURRENCY: Final = 4
# Rows of one table handed to dlt as one Arrow item: dlt computes and checks a table's schema
# for every Arrow item it is given, so pages are gathered (a page holds 100-1,000 rows).
ROWS_PER_ITEM: Final = 20_000


@dataclass(frozen=True)
class ClientSettings:
    """Timeouts and retry limits of the HTTP client (config section `retry`)."""

    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    max_attempts: int = 8
    backoff_base: float = 1.0
    max_wait_seconds: float = 120.0
    total_wait_seconds: float = 900.0
    skip_retry_attempts: int = 3


class RetryLimit(NamedTuple):
    """What a `retry` setting may be: whole or not, and its lowest value (allowed or not)."""

    whole: bool
    low: float
    low_allowed: bool


RETRY_HIGHEST: Final = 100_000
# attempts: at least one; timeouts: above zero (0 would fail every request); waits: from zero
RETRY_LIMITS: Final = MappingProxyType({
    "connect_timeout": RetryLimit(whole=False, low=0, low_allowed=False),
    "read_timeout": RetryLimit(whole=False, low=0, low_allowed=False),
    "max_attempts": RetryLimit(whole=True, low=1, low_allowed=True),
    "backoff_base": RetryLimit(whole=False, low=0, low_allowed=True),
    "max_wait_seconds": RetryLimit(whole=False, low=0, low_allowed=True),
    "total_wait_seconds": RetryLimit(whole=False, low=0, low_allowed=True),
    "skip_retry_attempts": RetryLimit(whole=True, low=1, low_allowed=True),
})
