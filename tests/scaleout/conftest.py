"""A real Postgres server for the scale-out tests: one per test session (per xdist worker),
on loopback TCP with password authentication (`postgres_server.py`). Each test loads a
dataset (schema) of its own in the one database."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest

from tests.scaleout.postgres_server import PASSWORD, PostgresServer, running_postgres


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


@pytest.fixture
def dataset(request: pytest.FixtureRequest) -> str:
    """A dataset name of this test's own (a plain lower-case name, as dlt keeps it)."""
    name = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower()).strip("_")
    return f"t_{name}"[:40].rstrip("_")


@pytest.fixture
def warehouse_env(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> Callable[[], dict[str, str]]:
    """The destination's credentials as dlt reads them (this process and subprocesses)."""
    monkeypatch.setenv("DESTINATION__POSTGRES__CREDENTIALS", postgres.uri())

    def env() -> dict[str, str]:
        return {"DESTINATION__POSTGRES__CREDENTIALS": postgres.uri()}

    return env


__all__ = ["PASSWORD", "PostgresServer"]
