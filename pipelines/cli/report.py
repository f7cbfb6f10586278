"""`repo-analytics report`: its arguments checked (one line naming a bad value and the valid
ones), then the dashboard written."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any

from pipelines.cli.options import cli_destination
from pipelines.integrations.report import write_report
from pipelines.integrations.report.queries import Filters, known_values
from pipelines.integrations.report.reader import (
    Reader,
    check_views,
    duckdb_reader,
    warehouse_reader,
)
from sources.repo_analytics.errors import ConfigError

SHOWN_VALUES = 10  # valid values named in a message, at most


def report_command(args: argparse.Namespace) -> int:
    from pipelines.runs.load import check_dataset_name

    since = parse_since(args.since)
    out = Path(args.out)
    if out.is_dir():
        raise ConfigError("out", args.out, "the path of an HTML file: pass --out FILE")
    check_dataset_name(args.dataset)
    with open_reader(args) as reader:
        filters = Filters(since, args.source, args.repository)
        check_filter(reader, "source", filters.source)
        check_filter(reader, "repository", filters.repository)
        path = write_report(reader, filters, out)
    print(f"report: {path.absolute()}")
    print(f"open it in a browser: {path.absolute().as_uri()}")
    return 0


def parse_since(text: str | None) -> date | None:
    if text is None:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ConfigError("since", text, "a date such as 2026-01-31") from None


def check_filter(reader: Reader, name: str, value: str | None) -> None:
    """A `--source` or `--repository` the dataset has (a filter matching nothing would draw
    an empty report without saying why)."""
    if value is None:
        return
    valid = known_values(reader, name)
    if value in valid:
        return
    shown = ", ".join(valid[:SHOWN_VALUES]) + (", ..." if len(valid) > SHOWN_VALUES else "")
    raise ConfigError(name, value, f"one of the dataset's: {shown or 'none loaded'}")


@contextmanager
def open_reader(args: Any) -> Iterator[Reader]:
    """The reader of `--destination`, `--duckdb` and `--dataset`, checked: a DuckDB file that
    exists, or a SQL destination dlt reaches (its credentials as a load's); the dataset must
    have the canonical views."""
    if args.destination == "duckdb":
        with duckdb_reader(args.duckdb, args.dataset) as reader:
            yield check_views(reader)
    else:
        destination = cli_destination(args)
        with warehouse_reader(destination, args.destination, args.dataset) as reader:
            yield check_views(reader)
