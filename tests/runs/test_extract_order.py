"""A run has dlt extract resources one after another, not an item of each in turn, and
poll for items every millisecond, not every 10 ms; pipelines of other names in the same
process keep dlt's defaults.

Each of our resources reads its scopes in `concurrency` threads and hands their pages over
through a bounded queue; taken an item of each resource in turn (dlt's default), every
started resource kept its threads and its full queue alive (three resources at once in a
year's backfill of the medium host, whose resources yield many items). The tiny host's
resources each yield once, so the order is read from dlt itself: two plain resources
extracted by a pipeline under the settings our runs extract with (`load.run_config`). dlt's
extract sleeps one poll interval once its last resource is done (twice a window: the package,
then its state); the interval is read as dlt's pipe iterator resolves it for a pipeline.
"""

from __future__ import annotations

from pathlib import Path

import dlt
import pytest
from dlt.common.configuration import inject_section
from dlt.common.configuration.resolve import resolve_configuration
from dlt.common.configuration.specs.config_section_context import ConfigSectionContext
from dlt.extract.pipe_iterator import PipeIterator

from pipelines.runs.load import EXTRACT_POLL_SECONDS, run_config
from simulator import SimConfig, Simulator
from tests.runs.test_backfill import CLOCK, SINCE, SLACK, assert_tables_equal_truth
from tests.support import FIXED_NOW
from tests.support.loader import Loader

DLT_POLL_SECONDS = 0.01  # dlt's default


def extraction_order(pipeline: dlt.Pipeline) -> list[str]:
    """The resource of each item, in the order dlt took them, of two resources of 3 items
    extracted by `pipeline`."""
    taken: list[str] = []

    def items(name: str) -> object:
        for number in range(3):
            taken.append(name)
            yield {"number": number}

    first = dlt.resource(items("first"), name="first")
    second = dlt.resource(items("second"), name="second")
    pipeline.extract([first, second])
    return taken


def extract_poll_seconds(pipeline_name: str) -> float:
    """The interval dlt's extract polls for items at, resolved as its pipe iterator does in
    a step of the pipeline `pipeline_name`."""
    spec = PipeIterator.PipeIteratorConfiguration
    with inject_section(ConfigSectionContext(pipeline_name=pipeline_name)):
        resolved = resolve_configuration(spec(), sections=(spec.__section__,))
    return float(resolved.futures_poll_interval)


def switches(order: list[str]) -> int:
    return sum(a != b for a, b in zip(order, order[1:], strict=False))


def test_a_run_extracts_one_resource_after_another(tmp_path: Path) -> None:
    """A load of every level and resource (default settings) lands the tables equal to the
    truth; under the settings its steps run with, dlt takes all of one resource's items
    before the next resource's and polls every millisecond, for the pipeline's name only: a
    pipeline of another name keeps dlt's defaults, and nothing is left set afterwards."""
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        loader = Loader(sim, tmp_path / "run")
        result = loader.load()
        assert_tables_equal_truth(
            loader.db_file, sim, "cloud", required=(SINCE, CLOCK), allowed=(SINCE - SLACK, CLOCK)
        )
    assert len(result.load_ids) == 1
    ours = dlt.pipeline(pipeline_name=loader.pipeline_name, pipelines_dir=str(tmp_path / "o"))
    other = dlt.pipeline(pipeline_name="another", pipelines_dir=str(tmp_path / "a"))
    with run_config(ours):
        order = extraction_order(ours)
        assert sorted(order) == ["first"] * 3 + ["second"] * 3
        assert switches(order) == 1, order
        assert extract_poll_seconds(ours.pipeline_name) == EXTRACT_POLL_SECONDS == 0.001
        assert switches(extraction_order(other)) == 5
        assert extract_poll_seconds(other.pipeline_name) == DLT_POLL_SECONDS
    assert switches(extraction_order(ours)) == 5
    assert extract_poll_seconds(ours.pipeline_name) == DLT_POLL_SECONDS


def test_a_configured_order_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """dlt's own settings, set by their variables, are kept: round robin takes turns, and
    the extract polls at the interval configured."""
    monkeypatch.setenv("EXTRACT__NEXT_ITEM_MODE", "round_robin")
    monkeypatch.setenv("EXTRACT__FUTURES_POLL_INTERVAL", "0.05")
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        loader = Loader(sim, tmp_path / "run")
        loader.load(levels=["workspace"], resources=["users"])
    ours = dlt.pipeline(pipeline_name=loader.pipeline_name, pipelines_dir=str(tmp_path / "o"))
    with run_config(ours):
        assert switches(extraction_order(ours)) == 5
        assert extract_poll_seconds(ours.pipeline_name) == 0.05
