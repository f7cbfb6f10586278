"""The scale-out tests' datasets and credentials on the session's real Postgres server (the
`postgres` fixture of tests/conftest.py: loopback TCP with password authentication,
`postgres_server.py`). Each test loads a dataset (schema) of its own in the one database."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tests.scaleout.postgres_server import PASSWORD, PostgresServer


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
