"""Shared fixtures: simulated hosts on free loopback ports, started and stopped per use, and
real pipeline runs into each destination (`tests/support/loader.py`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from simulator import SimConfig, Simulator
from tests.support import FIXED_NOW
from tests.support.loader import destination, loader, views_destination

__all__ = ["destination", "loader", "views_destination"]  # fixtures of every folder


def pytest_configure(config: pytest.Config) -> None:
    """No test run sends dlt's anonymous telemetry. The commands turn it off by themselves;
    tests that build a pipeline in-process get dlt's default (on) otherwise. A value set
    by whoever runs the suite wins; the telemetry test sets its own per command."""
    os.environ.setdefault("RUNTIME__DLTHUB_TELEMETRY", "false")


@pytest.fixture
def make_sim() -> Iterator[Callable[..., Simulator]]:
    """Start simulators with any SimConfig fields; all are stopped after the test."""
    started: list[Simulator] = []

    def start(**fields: Any) -> Simulator:
        fields.setdefault("size", "tiny")
        fields.setdefault("now", FIXED_NOW)
        sim = Simulator(SimConfig(**fields)).start()
        started.append(sim)
        return sim

    yield start
    for sim in started:
        sim.stop()


@pytest.fixture(scope="module")
def cloud_sim() -> Iterator[Simulator]:
    """A tiny cloud host shared by a module's read-only tests."""
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        yield sim


@pytest.fixture(scope="module")
def server_sim() -> Iterator[Simulator]:
    """A tiny self-hosted host shared by a module's read-only tests."""
    with Simulator(SimConfig(edition="server", size="tiny", now=FIXED_NOW)) as sim:
        yield sim


@pytest.fixture(scope="session")
def postgres() -> Iterator[Any]:
    """A real Postgres server (`tests/scaleout/postgres_server.py`), started the first time a
    test of this session (of this xdist worker) asks for it; each test loads a dataset
    (schema) of its own in its one database."""
    from tests.scaleout.postgres_server import running_postgres

    with running_postgres() as server:
        yield server


@pytest.fixture
def http() -> Iterator[requests.Session]:
    with requests.Session() as session:
        yield session
