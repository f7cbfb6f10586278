"""The canonical views on Postgres equal DuckDB's, row by row: a tiny cloud workspace and a
tiny self-hosted host loaded with the default settings into one dataset of each destination
(two pipelines, as several hosts share a dataset), every view compared whole, with its
columns in the same order, read in UTC and in a zone far from it (the days are UTC days, or
the cloud authors' local days, whatever the reading session's zone). The views' values are
checked against the simulators' truth by their own tests, which run on both destinations
(test_views.py, test_daily_activity.py, test_canonical_views.py, test_statistics_grain.py)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from pipelines.destinations.views import COLUMNS, DERIVED
from pipelines.destinations.warehouse import WarehouseError
from simulator import SimConfig, Simulator
from tests.scaleout.conftest import PostgresServer
from tests.support import FIXED_NOW
from tests.support.loader import Loader

VIEWS = (*COLUMNS, *DERIVED)
ZONES = ("UTC", "Pacific/Kiritimati")


def loaders(sims: list[Simulator], folder: Path, destination: str, uri: str | None) -> list[Loader]:
    """A loader per simulator, all into one dataset (each on a pipeline of its own)."""
    return [
        Loader(sim, folder, destination, uri, pipeline_name=f"repo_analytics_{sim.config.edition}")
        for sim in sims
    ]


@pytest.fixture(scope="module")
def both(
    postgres: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Loader, Loader]]:
    """(DuckDB's loader, Postgres's) of the same two simulators' default loads."""
    with (
        Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as cloud,
        Simulator(SimConfig(edition="server", size="tiny", now=FIXED_NOW)) as server,
    ):
        found = []
        for destination, uri in (("duckdb", None), ("postgres", postgres.uri())):
            folder = tmp_path_factory.mktemp(f"views_{destination}")
            runs = loaders([cloud, server], folder, destination, uri)
            for loader in runs:
                assert not loader.load().report.partial
            found.append(runs[-1])
        yield found[0], found[1]


def comparable(value: Any) -> Any:
    """A value as both drivers' answers can be compared: instants in UTC, whole decimals
    (Postgres's numeric sums) as integers, floats to 9 places."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC)
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, float):
        return round(value, 9) if math.isfinite(value) else value
    return value


def ordered(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The rows made comparable and sorted (NULLs last in each column)."""
    made = [tuple(comparable(v) for v in row) for row in rows]
    return sorted(made, key=lambda row: tuple((v is None, v if v is not None else 0) for v in row))


def columns(loader: Loader, view: str) -> list[str]:
    return [
        name
        for (name,) in loader.rows(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = "
            f"'{loader.dataset}' AND table_name = '{view}' ORDER BY ordinal_position"
        )
    ]


def test_every_view_exists_on_both_with_the_same_columns(both: tuple[Loader, Loader]) -> None:
    duck, pg = both
    for view in VIEWS:
        assert columns(duck, view), view
        assert columns(pg, view) == columns(duck, view), view
    editions = pg.rows("SELECT DISTINCT edition FROM commits ORDER BY edition")
    assert editions == [("cloud",), ("server",)]  # not vacuous: both editions in the views


@pytest.mark.parametrize("zone", ZONES)
def test_every_view_has_the_same_rows_on_both(both: tuple[Loader, Loader], zone: str) -> None:
    duck, pg = both
    for view in VIEWS:
        listed = ", ".join(columns(duck, view))
        sql = f"SET TimeZone = '{zone}'; SELECT {listed} FROM {view}"
        on_duckdb, on_postgres = ordered(duck.rows(sql)), ordered(pg.rows(sql))
        assert on_duckdb, view
        assert len(on_postgres) == len(on_duckdb), view
        differ = [(a, b) for a, b in zip(on_duckdb, on_postgres, strict=True) if a != b]
        assert not differ, (view, len(differ), differ[:2])


def test_views_of_the_users_on_ours_survive_a_second_edition(
    make_sim: Any, postgres: PostgresServer, tmp_path: Path
) -> None:
    """Postgres keeps what depends on a view: a view of the user's over `commits` stays when
    the self-hosted tables join the cloud's (some views' columns change type, text beside
    varchar, and are made again); one over a view whose column changes type stops the run
    with one line saying what to do."""
    cloud, server = make_sim(edition="cloud"), make_sim(edition="server")
    first, second = loaders([cloud, server], tmp_path, "postgres", postgres.uri())
    only = {"levels": ["repository"], "resources": ["commits", "change_statistics"]}
    assert not first.load(**only).report.partial
    only["resources"] = ["commits", "commit_statistics"]
    first.rows("CREATE VIEW mine AS SELECT edition, count(*) AS n FROM commits GROUP BY edition")
    first.rows("CREATE VIEW levels AS SELECT DISTINCT level FROM commit_statistics")
    with pytest.raises(WarehouseError, match=r"commit_statistics changed .* drop the views"):
        second.load(**only)
    first.rows("DROP VIEW levels")
    assert not second.load(**only).report.partial
    assert first.rows("SELECT edition FROM mine ORDER BY edition") == [("cloud",), ("server",)]
    assert first.rows("SELECT DISTINCT edition FROM commit_statistics ORDER BY 1") == [
        ("cloud",),
        ("server",),
    ]
