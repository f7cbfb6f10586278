"""The ground truth of the tiny cloud host a module's read-only tests share."""

from __future__ import annotations

import pytest

from simulator import Simulator
from tests.simulator.cloud.truth import Truth, read_truth


@pytest.fixture(scope="module")
def truth(cloud_sim: Simulator) -> Truth:
    return read_truth(cloud_sim)
