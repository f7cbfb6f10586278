"""The tiny self-hosted host's API session and ground truth a module's read-only tests share,
and a small host (~20k commits) for paging and CSV streaming at size."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from simulator import SimConfig, Simulator
from tests.simulator.selfhosted.client import Api
from tests.simulator.selfhosted.truth import Truth, read_truth
from tests.support import FIXED_NOW


@pytest.fixture(scope="module")
def api(server_sim: Simulator) -> Iterator[Api]:
    client = Api(server_sim)
    yield client
    client.session.close()


@pytest.fixture(scope="module")
def truth(server_sim: Simulator) -> Truth:
    return read_truth(server_sim)


@pytest.fixture(scope="module")
def small_sim() -> Iterator[Simulator]:
    """A small self-hosted host (~20k commits, 2k pull requests): paging past the maxima."""
    with Simulator(SimConfig(edition="server", size="small", now=FIXED_NOW)) as sim:
        yield sim
