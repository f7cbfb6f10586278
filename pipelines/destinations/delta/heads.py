"""The recent head of rows written to a Delta table: the part a nightly's merge re-reads.

A merge rewrites every file holding a row it matches
(`pipelines/destinations/delta/merges.py`), and a nightly re-reads its look-back: the recent
end of a table's fixed column (`FIXED_PER_KEY`). Rows written as one file that reaches back
further make each nightly rewrite all of them: a table's first write (the self-hosted year's
CSV exports: `pipelines/destinations/delta/first_writes.py`) and a backfill's last window
appended beyond the stored range (`merges.RangedTable`). Such a write is cut where its
head begins, `HEAD_SPAN` before its largest value, when it holds more than `MIN_ROWS` rows,
reaches back beyond the head, and its head is recent enough for a nightly to re-read it
(`head_bound`): the older rows are one file, the head another.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Final

# the nightly's look-back (3 days by default; the cloud's commit dates 26 hours more), with
# room for a look-back of up to a month
HEAD_SPAN: Final = timedelta(days=32)
# a write of fewer rows stays one file: its head would spare a nightly little
MIN_ROWS: Final = 32_768


def head_begins(
    rows: int, low: datetime | date, high: datetime | date, now: datetime | None = None
) -> datetime | date | None:
    """Where the head of a write of `rows` rows whose fixed column spans `low` to `high`
    begins: `HEAD_SPAN` before `high`; None for at most `MIN_ROWS` rows, when every row lies
    in the head, or when the head begins before `head_bound` (a backfill's older window: no
    nightly re-reads it)."""
    if rows <= MIN_ROWS:
        return None
    start = high - HEAD_SPAN
    if start <= low or start < head_bound(start, now):
        return None
    return start


def head_bound(value: datetime | date, now: datetime | None = None) -> datetime | date:
    """The earliest start of a head that a nightly can still re-read (its rows' largest value
    within `HEAD_SPAN` of `now`, the clock's in UTC): twice `HEAD_SPAN` before `now`, in the
    flavour of `value` (a date, a zoned or zone-less timestamp)."""
    bound = (now or datetime.now(UTC)) - 2 * HEAD_SPAN
    if isinstance(value, datetime):
        return bound if value.tzinfo is not None else bound.replace(tzinfo=None)
    return bound.date()
