"""The report's tables as a reader sees them, back into values; and the numbers every table
should hold, from the test's own SQL over the canonical views (queries written here, not the
report's: the views themselves are checked against the simulators' truth elsewhere)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from html.parser import HTMLParser
from typing import Any

Rows = list[tuple[Any, ...]]
Query = Callable[[str], Rows]
AGES = ((90, "90 days or more"), (30, "30-90 days"), (7, "7-30 days"), (1, "1-7 days"))
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def value_of(text: str) -> Any:
    """A cell's text as a value: `–` None, `1,234` 1234, `12.5` 12.5, else the text."""
    text = text.strip()
    if text == "–":
        return None
    plain = text.replace(",", "")
    for kind in (int, float):
        try:
            return kind(plain)
        except ValueError:
            pass
    return text


def shown(value: Any) -> Any:
    """An expected value as its cell reads back: numbers to one decimal, days as ISO."""
    if isinstance(value, Decimal):
        value = float(value)
    if isinstance(value, float):
        return round(value, 1)
    if isinstance(value, datetime):
        return value.date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return value


def read_back(rows: list[list[str]]) -> Rows:
    return [tuple(value_of(cell) for cell in row) for row in rows]


def as_shown(rows: Rows) -> Rows:
    return [tuple(shown(v) for v in row) for row in rows]


class TablesParser(HTMLParser):
    """`<table data-table="key">` -> its body rows' cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.key: str | None = None
        self.row: list[str] | None = None
        self.cell: list[str] | None = None
        self.body = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.key = dict(attrs).get("data-table")
            self.tables[str(self.key)] = []
        elif tag == "tbody":
            self.body = True
        elif tag == "tr" and self.body:
            self.row = []
        elif tag in ("td", "th") and self.row is not None:
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.cell is not None and self.row is not None:
            self.row.append("".join(self.cell))
            self.cell = None
        elif tag == "tr" and self.row is not None:
            self.tables[str(self.key)].append(self.row)
            self.row = None
        elif tag == "tbody":
            self.body = False

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def html_tables(text: str) -> dict[str, Rows]:
    parser = TablesParser()
    parser.feed(text)
    return {key: read_back(rows) for key, rows in parser.tables.items()}


def expected_tables(query: Query) -> dict[str, Rows]:
    """Every chart table of an unfiltered report, from the base views `pull_requests` and
    `commits` (the report reads the derived ones)."""
    week = "CAST(date_trunc('week', timezone('UTC', resolved_at)) AS DATE)"
    resolved = "(epoch(resolved_at) - epoch(created_at)) / 3600"
    tables = {
        "outcomes": query(
            f"SELECT {week} AS w, count(*) FILTER (WHERE state = 'MERGED'), "
            "count(*) FILTER (WHERE state = 'DECLINED'), "
            "count(*) FILTER (WHERE state = 'SUPERSEDED'), "
            "count(*) FILTER (WHERE resolved_at_source = 'updated_at') "
            "FROM pull_requests WHERE resolved_at IS NOT NULL GROUP BY w ORDER BY w"
        ),
        "resolution": query(
            f"SELECT {week} AS w, count(*), median({resolved}), quantile_cont({resolved}, 0.9), "
            "count(*) FILTER (WHERE resolved_at_source = 'updated_at') "
            "FROM pull_requests WHERE resolved_at IS NOT NULL GROUP BY w ORDER BY w"
        ),
        "reviewers": reviewer_rows(query),
        "open-age": age_rows(query),
    }
    day = "CAST(coalesce(timezone('UTC', authored_at_utc), authored_at_local) AS DATE)"
    tables["commits"] = query(
        f"SELECT CAST(date_trunc('week', {day}) AS DATE) AS w, count(*), sum(lines_added), "
        "sum(lines_deleted) FROM commits GROUP BY w ORDER BY w"
    )
    name = "coalesce(project_key || '/', '') || repository_slug"
    tables["repositories"] = query(
        f"SELECT {name} AS r, count(*) AS n, sum(lines_added), sum(lines_deleted), "
        "count(DISTINCT author_name) FROM commits GROUP BY r ORDER BY n DESC, r LIMIT 10"
    )
    tables["authors"] = query(
        "SELECT coalesce(author_name, '(no name)') AS a, count(*) AS n, sum(lines_added), "
        f"sum(lines_deleted), count(DISTINCT {name}) FROM commits GROUP BY a "
        "ORDER BY n DESC, a LIMIT 10"
    )
    clocks = (("utc", "timezone('UTC', authored_at_utc)"), ("local", "authored_at_local"))
    for basis, column in clocks:
        moments = [t for (t,) in query(f"SELECT {column} FROM commits WHERE {column} IS NOT NULL")]
        if moments:
            counts = Counter((t.isoweekday(), t.hour) for t in moments)
            tables[f"activity-{basis}"] = [
                (WEEKDAYS[d - 1], *(counts[(d, h)] for h in range(24))) for d in range(1, 8)
            ]
    return {key: as_shown(rows) for key, rows in tables.items()}


def reviewer_rows(query: Query) -> Rows:
    counted = Counter(
        min(n, 5)
        for (n,) in query("SELECT reviewer_count FROM pull_requests WHERE reviewer_count >= 0")
    )
    if not counted:
        return []
    return [("5 or more" if n == 5 else n, counted[n]) for n in range(6)]


def age_rows(query: Query) -> Rows:
    ((as_of,),) = query("SELECT max(greatest(created_at, updated_at)) FROM pull_requests")
    ages = Counter()
    for (created,) in query("SELECT created_at FROM pull_requests WHERE state = 'OPEN'"):
        days = (as_of - created).total_seconds() / 86400
        ages[next((label for low, label in AGES if days >= low), "under 1 day")] += 1
    if not ages:
        return []
    labels = ("under 1 day", "1-7 days", "7-30 days", "30-90 days", "90 days or more")
    return [(label, ages[label]) for label in labels]
