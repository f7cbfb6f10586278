"""One tiny cloud host loaded twice at the same clock, shared by the read-only tests of this
package."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pipelines.runs.load import LoadResult
from simulator import SimConfig, Simulator
from tests.cloud.request_log import Cursors
from tests.cloud.truth import START, Truth, Window
from tests.support import FIXED_NOW
from tests.support.helpers import GRAIN, run_with_log, snapshot
from tests.support.loader import DESTINATIONS, Loader


@dataclass
class Loaded:
    sim: Simulator
    loader: Loader
    truth: Truth
    window: Window
    first: LoadResult
    first_log: list[dict[str, Any]]
    first_tables: dict[str, list[tuple]]
    cursors: Cursors
    second: LoadResult
    second_log: list[dict[str, Any]]
    second_tables: dict[str, list[tuple]]
    grain: str  # the statistics_period of both runs


# Each destination with its default settings; and DuckDB with daily statistics, the explicit
# choice whose look-back and refresh edges fall on days.
LOADS = [pytest.param((destination, GRAIN), id=destination) for destination in DESTINATIONS]
LOADS.append(pytest.param(("duckdb", "day"), id="duckdb-day"))


@pytest.fixture(scope="package", params=LOADS)
def loaded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Loaded]:
    """A tiny cloud host loaded from 2026-03-01 to its clock, then loaded again unchanged,
    into each destination with its default settings (and into DuckDB by day)."""
    destination, grain = request.param
    grained = {} if grain == GRAIN else {"statistics_period": grain}
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        loader = Loader(sim, Path(tmp_path_factory.mktemp("cloud_load")), destination)
        truth = Truth.read(sim)
        first, first_log = run_with_log(sim, loader, **grained)
        first_tables = snapshot(loader)
        cursors = Cursors.read(loader, truth.clock, truth.workspace)
        second, second_log = run_with_log(sim, loader, **grained)
        yield Loaded(
            sim,
            loader,
            truth,
            Window(START, truth.clock),
            first,
            first_log,
            first_tables,
            cursors,
            second,
            second_log,
            snapshot(loader),
            grain,
        )
