"""A large write of a Delta table with its recent head in a file of its own: a first write
(`pipelines/destinations/delta/first_writes.py`) and rows appended beyond the stored range
(`pipelines/destinations/delta/merges.py`), by our Delta job
(`pipelines/destinations/delta/destination.py`) into real
Delta tables; where a head begins (`pipelines/destinations/delta/heads.py`)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from pipelines.destinations.delta.first_writes import head_start
from pipelines.destinations.delta.heads import HEAD_SPAN, MIN_ROWS, head_begins, head_bound
from tests.destinations import test_lake_merges
from tests.destinations.test_lake_merges import loader, operations

DAYS = 100  # rows on days 0-99: the head is days 67-99 (HEAD_SPAN before day 99)
HEAD_FIRST_DAY = DAYS - 1 - HEAD_SPAN.days
COUNT = MIN_ROWS + 20_000
# day 99 is yesterday: a nightly re-reads the head
TODAY = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
RECENT = TODAY - timedelta(days=DAYS)


@pytest.fixture(autouse=True)
def recent_days(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows and files of `test_lake_merges`' helpers counted in days from `RECENT`."""
    monkeypatch.setattr(test_lake_merges, "DAY", RECENT)


def rows(ids: list[int], days: list[int | None], label: str) -> pa.Table:
    return test_lake_merges.rows(ids, days, label)


def files(tmp_path: Path) -> list[tuple[int, int, int]]:
    return test_lake_merges.files(tmp_path)


def spread(count: int, label: str) -> pa.Table:
    """`count` rows, ids 0.., on days 0-99 in turn (every day in each stretch of 100 ids)."""
    ids = list(range(count))
    return rows(ids, [i % DAYS for i in ids], label)


def on_days(count: int, low: int, high: int) -> int:
    """How many of `spread(count)`'s rows lie on days `low` to `high`."""
    return sum(1 for i in range(count) if low <= i % DAYS <= high)


def file_paths(tmp_path: Path) -> set[str]:
    stored = deltalake.DeltaTable(str(tmp_path / "lake" / "lake" / "items"))
    return set(stored.file_uris())


def test_a_large_first_write_holds_its_head_in_a_file_of_its_own(tmp_path: Path) -> None:
    """A first load of more than MIN_ROWS rows over 100 days: two commits, a file of days
    0-66 and one of days 67-99, every row once."""
    load = loader(tmp_path, hinted=True)
    stored = load(spread(COUNT, "first"))
    assert stored == [(i, i % DAYS, "first") for i in range(COUNT)]
    old = on_days(COUNT, 0, HEAD_FIRST_DAY - 1)
    head = (COUNT - old, HEAD_FIRST_DAY, DAYS - 1)
    assert files(tmp_path) == [head, (old, 0, HEAD_FIRST_DAY - 1)]
    assert operations(tmp_path)[-2:] == ["WRITE", "WRITE"]


def test_a_nightly_merge_into_the_head_leaves_the_older_file_as_it_is(tmp_path: Path) -> None:
    """The look-back's rows loaded again (days 90-99, and a new day 100): only the head's file
    is rewritten; the file of days 0-66 is the same file."""
    load = loader(tmp_path, hinted=True)
    load(spread(COUNT, "first"))
    older = {path for path in file_paths(tmp_path) if path not in head_files(tmp_path)}
    again = [i for i in range(COUNT) if i % DAYS >= 90][:50]
    after = load(rows([*again, COUNT], [*(i % DAYS for i in again), DAYS], "nightly"))
    assert len(older) == 1 and older <= file_paths(tmp_path)
    relabelled = {*again, COUNT}
    assert after == [
        (i, i % DAYS if i < COUNT else DAYS, "nightly" if i in relabelled else "first")
        for i in range(COUNT + 1)
    ]


def head_files(tmp_path: Path) -> set[str]:
    """The table's files whose rows lie on the head's days."""
    stored = deltalake.DeltaTable(str(tmp_path / "lake" / "lake" / "items"))
    actions = pa.table(stored.get_add_actions(flatten=True)).to_pydict()
    first = RECENT + timedelta(days=HEAD_FIRST_DAY)
    return {
        uri
        for uri, path, low in zip(
            stored.file_uris(), actions["path"], actions["min.ts"], strict=True
        )
        if low >= first and uri.endswith(path)
    }


@pytest.mark.parametrize(("hinted", "count"), [(False, COUNT), (True, MIN_ROWS)])
def test_a_first_write_without_the_hint_or_of_few_rows_is_one_file(
    tmp_path: Path, hinted: bool, count: int
) -> None:
    """Without the hint, or with at most MIN_ROWS rows: dlt's one write, one file."""
    load = loader(tmp_path, hinted=hinted)
    assert load(spread(count, "first")) == [(i, i % DAYS, "first") for i in range(count)]
    assert files(tmp_path) == [(count, 0, DAYS - 1)]


def test_the_rerun_after_a_crash_between_the_parts_holds_each_row_once(tmp_path: Path) -> None:
    """A kill after the first part's commit leaves the table with the rows before the head;
    the rerun loads the same rows again, now into a table that exists: the head's rows are
    appended (beyond the stored range), the rest merged, each row once."""
    load = loader(tmp_path, hinted=True)
    whole = spread(COUNT, "first")
    # the rows before the head, as the first commit left them: days 0-66 of each 100 ids
    older = pa.concat_tables(
        [whole.slice(start, HEAD_FIRST_DAY) for start in range(0, COUNT, DAYS)]
    )
    assert {day for _, day, _ in load(older)} == set(range(HEAD_FIRST_DAY))
    rerun = load(spread(COUNT, "rerun"))
    assert rerun == [(i, i % DAYS, "rerun") for i in range(COUNT)]


def test_a_first_write_whose_head_no_nightly_re_reads_is_one_file(tmp_path: Path) -> None:
    """A backfill's oldest window (days 0-99 ending 100 days ago): dlt's one write."""
    load = loader(tmp_path, hinted=True)
    old = rows(list(range(COUNT)), [i % DAYS - DAYS for i in range(COUNT)], "old")
    assert len(load(old)) == COUNT
    assert files(tmp_path) == [(COUNT, -DAYS, -1)]


@pytest.mark.parametrize(
    ("value", "bound"),
    [
        (datetime(2026, 5, 1, tzinfo=UTC), datetime(2026, 4, 28, tzinfo=UTC)),
        (datetime(2026, 5, 1), datetime(2026, 4, 28)),
        (date(2026, 5, 1), date(2026, 4, 28)),
    ],
)
def test_the_head_bound_takes_the_values_flavour(value: Any, bound: Any) -> None:
    """Twice HEAD_SPAN (64 days) before the clock, zoned, zone-less or a date as the value."""
    now = datetime(2026, 7, 1, tzinfo=UTC)
    assert head_bound(value, now) == bound
    assert type(head_bound(value, now)) is type(bound)


def test_head_start_is_head_span_before_the_largest_value(tmp_path: Path) -> None:
    """The dataset's largest day 99: the head starts on day 67; with a clock 100 days
    later, no head."""
    import pyarrow.dataset as pa_dataset
    import pyarrow.parquet as pq

    pq.write_table(rows(list(range(COUNT)), [i % DAYS for i in range(COUNT)], "x"), tmp_path / "f")
    files = pa_dataset.dataset([str(tmp_path / "f")])
    start = head_start(files, "ts")
    assert start is not None and start.as_py() == RECENT + timedelta(days=HEAD_FIRST_DAY)
    assert head_start(files, "ts", now=TODAY + timedelta(days=DAYS)) is None


def test_rows_appended_beyond_the_stored_range_hold_their_head_apart(tmp_path: Path) -> None:
    """Days 0-9 stored; more than MIN_ROWS rows of days 20-99 loaded (a backfill's last
    window): appended as a file of days 20-66 and one of days 67-99, each row once."""
    load = loader(tmp_path, hinted=True)
    load(rows(list(range(10)), list(range(10)), "first"))
    ids = list(range(100, 100 + COUNT))
    days = [20 + i % (DAYS - 20) for i in range(COUNT)]
    after = load(rows(ids, days, "window"))
    stored = [(i, i, "first") for i in range(10)]
    assert after == stored + [(i, day, "window") for i, day in zip(ids, days, strict=True)]
    head = sum(1 for day in days if day >= HEAD_FIRST_DAY)
    assert files(tmp_path) == sorted(
        [(10, 0, 9), (COUNT - head, 20, HEAD_FIRST_DAY - 1), (head, HEAD_FIRST_DAY, DAYS - 1)]
    )
    assert operations(tmp_path)[-2:] == ["WRITE", "WRITE"]


@pytest.mark.parametrize(
    ("rows_", "low", "high", "begins"),
    [
        (MIN_ROWS + 1, 0, 99, 67),  # the head: days 67-99
        (MIN_ROWS, 0, 99, None),  # too few rows
        (MIN_ROWS + 1, 70, 99, None),  # every row in the head
        (MIN_ROWS + 1, -200, -40, None),  # a head no nightly re-reads (ends 140 days ago)
    ],
)
def test_head_begins_where_a_nightly_re_reads(
    rows_: int, low: int, high: int, begins: int | None
) -> None:
    """HEAD_SPAN before the largest value, only where it is worth a file and recent."""

    def day(n: int) -> datetime:
        return RECENT + timedelta(days=n)

    found = head_begins(rows_, day(low), day(high))
    assert found == (None if begins is None else day(begins))
