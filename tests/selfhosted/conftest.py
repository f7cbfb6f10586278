"""One tiny self-hosted host loaded twice at the same clock, shared by the read-only tests of
this package."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pipelines.runs.load import LoadResult
from simulator import SimConfig, Simulator
from tests.selfhosted.truth import (
    LEVEL_TABLES,
    LEVELS,
    START,
    Truth,
    Window,
    contents,
    expected_scopes,
)
from tests.support import FIXED_NOW
from tests.support.helpers import GRAIN, run_with_log
from tests.support.loader import DESTINATIONS, Loader


@pytest.fixture(scope="package")
def server_sim() -> Iterator[Simulator]:
    """The tiny self-hosted host of the shared load, kept for the whole package (the root
    conftest's is per module): the load's read-only tests sit in several modules."""
    with Simulator(SimConfig(edition="server", size="tiny", now=FIXED_NOW)) as sim:
        yield sim


@dataclass
class Loaded:
    sim: Simulator
    loader: Loader
    truth: Truth
    window: Window
    scopes: dict[str, set[str]]
    first: LoadResult
    first_log: list[dict[str, Any]]
    first_tables: dict[str, list[tuple]]
    second: LoadResult
    second_log: list[dict[str, Any]]
    second_tables: dict[str, list[tuple]]
    cursors: dict[tuple[str, str, str], datetime]
    grain: str  # the statistics_period of both runs


def read_cursors(loader: Loader) -> dict[tuple[str, str, str], datetime]:
    """(kind, level, scope) -> the newest cursor value loaded for that list scope."""
    scope_sql = {
        "global": "'global'",
        "project": "project_key",
        "repository": "project_key || '/' || repository_slug",
        "user": "read_for_user",
    }
    cursors = {}
    for kind, column in (("commits", "author_timestamp"), ("pull_requests", "updated_at")):
        for level in LEVELS:
            for scope, newest in loader.rows(
                f"SELECT {scope_sql[level]}, max({column}) FROM "
                f'"{LEVEL_TABLES[kind][level]}" GROUP BY 1'
            ):
                cursors[(kind.replace("_", "-"), level, scope)] = newest
    return cursors


# Each destination with its default settings; and DuckDB with daily statistics, the explicit
# choice whose look-back and refresh edges fall on days.
LOADS = [pytest.param((destination, GRAIN), id=destination) for destination in DESTINATIONS]
LOADS.append(pytest.param(("duckdb", "day"), id="duckdb-day"))


@pytest.fixture(scope="package", params=LOADS)
def loaded(
    request: pytest.FixtureRequest, server_sim: Simulator, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Loaded]:
    """A tiny self-hosted host, every level and resource, from 2026-03-01 to its clock, then
    loaded again with nothing new, into each destination with its default settings (and into
    DuckDB by day)."""
    destination, grain = request.param
    grained = {} if grain == GRAIN else {"statistics_period": grain}
    sim = server_sim
    # Postgres: the canonical views' tests ask for it (the session's server)
    uri = request.getfixturevalue("postgres").uri() if destination == "postgres" else None
    loader = Loader(sim, Path(tmp_path_factory.mktemp("server_load")), destination, uri)
    truth = Truth.read(sim)
    window = Window(START, truth.clock)
    first, first_log = run_with_log(sim, loader, **grained)
    first_tables = contents(loader)
    cursors = read_cursors(loader)
    second, second_log = run_with_log(sim, loader, **grained)
    yield Loaded(
        sim,
        loader,
        truth,
        window,
        expected_scopes(truth, window),
        first,
        first_log,
        first_tables,
        second,
        second_log,
        contents(loader),
        cursors,
        grain,
    )
