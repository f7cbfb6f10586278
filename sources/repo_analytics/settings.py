"""Constants and defaults of the extractor. No logic."""

from __future__ import annotations

from datetime import timedelta
from typing import Final

RETRYABLE_STATUSES: Final = frozenset({429, 500, 502, 503, 504})

DEFAULT_LOOKBACK_DAYS: Final = 3
# The cloud commit `date` has no zone: it can be up to 14 h either side of the instant the API
# filters by, so its cursor re-reads this much more (26 h: 14 h + 12 h, the widest offsets).
NAIVE_DATE_SLACK_HOURS: Final = 26
DEFAULT_START_DAYS: Final = 30
STATISTICS_PERIODS: Final = ("day", "week", "month")
DEFAULT_CONCURRENCY: Final = 4
# Rows of one table handed to dlt as one Arrow item: dlt computes and checks a table's schema
# for every Arrow item it is given, so pages (each an edition's page size) are gathered.
ROWS_PER_ITEM: Final = 20_000
# A nightly's discovery keeps the top-level lists' pages it read for the top-level resources,
# which read the same requests next: at most this many pages a list (a few days' worth), so a
# long gap between runs holds no month of the lists.
KEPT_PAGES_MOST: Final = 10
# A backfill reads each window's slice of the top-level lists in up to `concurrency` parts at
# once, none shorter than this (a part costs a request even where it holds nothing): a year in
# 1-day windows asks one request chain a slice and family, a quarter's slice 4 parts.
DISCOVERY_PART_SHORTEST: Final = timedelta(days=7)


# A list whose pages come back empty while they say more follow is read for this many such
# pages in a row, then its read stops and its scope is skipped (a host or proxy answering so
# would be asked for ever: issue 58).
EMPTY_PAGES_MOST: Final = 3


# the highest value of any `retry` setting (config.RetryConfiguration holds the others)
RETRY_HIGHEST: Final = 100_000
