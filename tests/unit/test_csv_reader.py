"""The CSV exports' reader (issue 11): Arrow parses and types the cells; the result equals
what Python's `csv` module and `convert` make of the same body, value for value, on the
simulator's real exports and on bodies with the shapes a host may send (zone-less
timestamps, padded numbers, quoted newlines, a byte-order mark, blank lines, and rows whose
cells do not match the header, which send the rest of the export through Python's reader).
A small body is read by Python's reader from the start; each test that reads a body reads
it both ways.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest
import requests

from simulator import Simulator
from sources.repo_analytics.reading import csv_exports as csv_export
from sources.repo_analytics.reading.csv_exports import (
    csv_tables,
    normalise,
    python_tables,
    type_of,
    unique,
)
from sources.repo_analytics.reading.origin import SOURCE

CONTEXT = {
    "level": "repository",
    "scope": "CORE/api",
    "window_start": datetime(2026, 1, 1, tzinfo=UTC),
    "window_end": datetime(2026, 2, 1, tzinfo=UTC),
}


@pytest.fixture(params=["arrow", "python"])
def reader(request: pytest.FixtureRequest, monkeypatch: Any) -> str:
    """Which reader reads the bodies of the test: every body is small for Python's, none
    for Arrow's."""
    small = 1 << 40 if request.param == "python" else -1
    monkeypatch.setattr(csv_export, "SMALL_BODY_BYTES", small)
    return str(request.param)


@pytest.fixture
def arrow_reader(monkeypatch: Any) -> None:
    """Arrow reads every body, in blocks of a few rows."""
    monkeypatch.setattr(csv_export, "SMALL_BODY_BYTES", -1)
    monkeypatch.setattr(csv_export, "BLOCK_BYTES", 256)


def read(data: bytes, batch_rows: int = 5_000) -> pa.Table:
    return pa.concat_tables(csv_tables(io.BytesIO(data), dict(CONTEXT), batch_rows))


def reference(data: bytes) -> pa.Table:
    """The body read by Python's `csv` module alone, value by value."""
    body = io.BytesIO(data)
    header = next(csv.reader([body.readline().decode("utf-8-sig")]))
    names = unique([normalise(h) for h in header], (SOURCE, "row_number", *CONTEXT))
    tables = list(python_tables(body, names, [type_of(n) for n in names], dict(CONTEXT), 0, 7))
    return pa.concat_tables(tables)


@pytest.mark.parametrize("kind", ["commits", "pull-requests"])
def test_the_simulators_exports_read_as_pythons_reader_reads_them(
    kind: str, reader: str, make_sim: Callable[..., Simulator]
) -> None:
    sim = make_sim(edition="server")
    answer = requests.get(
        f"{sim.api_base}/{kind}/export/csv",
        params={"sinceDate": "2025-06-01T00:00:00Z", "untilDate": "2026-06-01T00:00:00Z"},
        headers={"Accept": "text/csv"},
        auth=sim.basic_auth,
        timeout=60,
    )
    answer.raise_for_status()
    got, expected = read(answer.content, batch_rows=20), reference(answer.content)
    assert got.num_rows == answer.content.count(b"\n") - 1 > 50
    assert got.schema == expected.schema
    assert got.to_pylist() == expected.to_pylist()
    assert got.column("row_number").to_pylist() == list(range(got.num_rows))


EDGES = (
    "\ufeffCreated date,Lines added,Merge commit,Author name,Time to open (s)\r\n"
    '2026-05-31T23:45:06.980000Z,4,false,"Ann ""A"" Lee",12\r\n'
    "2026-05-31 23:45:06Z,12.7,Yes, Bob ,\r\n"
    "2026-05-31T23:45:06+02:00,,TRUE,,3\r\n"
    "\r\n"
    '2026-05-31T10:00:00,1e3,0,"two\nlines",-3.9\r\n'
    "2026-05-31T10:00:00Z, 12 , yes ,Eve,7\r\n"
)


def test_edge_values_read_as_python_reads_them(reader: str) -> None:
    """Zone-less timestamps and padded numbers fall back to `convert` for their column (in
    Arrow's reader); the blank line is no row; the rest is Arrow's casts."""
    data = EDGES.encode()
    got = read(data)
    assert got.to_pylist() == reference(data).to_pylist()
    rows = got.to_pylist()
    assert [r["lines_added"] for r in rows] == [4, 12, None, 1000, 12]
    assert [r["merge_commit"] for r in rows] == [False, True, True, False, True]
    assert rows[3]["author_name"] == "two\nlines"
    assert rows[0]["author_name"] == 'Ann "A" Lee'
    assert rows[2]["created_date"] == datetime(2026, 5, 31, 21, 45, 6, tzinfo=UTC)
    assert rows[3]["created_date"] == datetime(2026, 5, 31, 10, 0, tzinfo=UTC)  # read as UTC
    assert [r["time_to_open_s"] for r in rows] == [12, None, 3, -3, 7]


SHORT_ROW = "2026-05-10T00:00:00Z,99\n"  # two cells of four


def ragged_body(count: int, *odd_rows: str) -> bytes:
    """A header of four columns, `count` rows that match it (numbered 0 .. count - 1),
    `odd_rows`, and the `count` rows again."""
    good = "".join(f"2026-05-0{1 + i % 9}T00:00:00Z,{i},false,user{i}\n" for i in range(count))
    header = "Date,Lines added,Merge commit,Author name\n"
    return (header + good + "".join(odd_rows) + good).encode()


def test_a_ragged_row_sends_the_rest_through_python(arrow_reader: None) -> None:
    """Rows before the ragged one come from Arrow, the rest from Python's reader: every row
    once, numbered in order, the short row padded and the long row's extra cell dropped.
    Arrow's blocks are made a few rows long, so its tables gather several blocks, and the
    rows of blocks gathered but not handed on when the ragged row is met come from Python's
    reader, once."""
    data = ragged_body(400, SHORT_ROW, "2026-05-11T00:00:00Z,98,true,long,extra\n")
    tables = list(csv_tables(io.BytesIO(data), dict(CONTEXT), batch_rows=8))
    # Arrow's tables (two blocks of ~7 rows) before the ragged row; Python's have 8 rows
    assert any(t.num_rows > 8 for t in tables) and tables[-1].num_rows <= 8
    got = pa.concat_tables(tables)
    rows = got.to_pylist()
    assert got.num_rows == 802
    assert [r["row_number"] for r in rows] == list(range(802))
    assert rows[400]["lines_added"] == 99 and rows[400]["author_name"] is None
    assert rows[401]["author_name"] == "long" and "extra" not in str(rows[401])
    assert [r["lines_added"] for r in rows[402:]] == list(range(400))
    assert rows == reference(data).to_pylist()


class SlowBody(io.BytesIO):
    """A body whose reads take a while, as a spooled file on a busy disk: Arrow's reader,
    which reads ahead in a thread of its own, is still reading when a parse error reaches
    the caller."""

    def read(self, size: int | None = -1) -> bytes:
        time.sleep(0.002)
        return super().read(size)

    def readinto(self, buffer: Any) -> int:
        time.sleep(0.002)
        return super().readinto(buffer)


def test_arrow_reading_ahead_never_moves_where_python_starts(arrow_reader: None) -> None:
    """After a ragged row, Python's reader reads the body from the rows' start while Arrow's
    read-ahead thread may still be reading blocks: every row is read once, in order, each
    time (the read-ahead once moved the body's position under Python's reader, and rows were
    skipped or cut in two)."""
    data = ragged_body(300, SHORT_ROW)
    expected = reference(data).to_pylist()
    for _ in range(5):
        rows = pa.concat_tables(csv_tables(SlowBody(data), dict(CONTEXT), batch_rows=8))
        assert rows.to_pylist() == expected


@pytest.mark.parametrize("rows", [2, 30, 1000])
def test_a_small_body_is_read_by_python_and_a_large_one_by_arrow(
    rows: int, monkeypatch: Any
) -> None:
    """Rows of up to `SMALL_BODY_BYTES` go to Python's reader, whose tables hold at most
    `batch_rows` rows; a larger body to Arrow's, whose tables gather whole blocks and pass
    `batch_rows`. Both read the same values."""
    monkeypatch.setattr(csv_export, "BLOCK_BYTES", 256)
    data = ragged_body(rows // 2)
    rows_bytes = len(data) - len(data.split(b"\n", 1)[0]) - 1
    assert (rows_bytes <= csv_export.SMALL_BODY_BYTES) == (rows < 1000)
    tables = list(csv_tables(io.BytesIO(data), dict(CONTEXT), batch_rows=8))
    by_arrow = any(t.num_rows > 8 for t in tables)
    assert by_arrow == (rows == 1000)
    assert pa.concat_tables(tables).to_pylist() == reference(data).to_pylist()
