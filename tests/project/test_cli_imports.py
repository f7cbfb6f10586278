"""What a run imports: `repo-analytics` builds every command's options on each run, the
`sim` command's too, and the simulator's server, its HTTPS certificate maker and their
libraries (~8 MB of a run's memory, 70 modules) are imported by `sim` and `demo` only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("simulator.server", "simulator.app", "trustme")
PROBE = f"""
import sys
from pipelines.cli.parser import build_parser
argv = ["sim", "--edition", "server"]
assert build_parser(argv).parse_args(argv).edition == "server"
print(sorted(name for name in {HEAVY!r} if name in sys.modules))
"""


def test_building_the_command_line_imports_no_simulator_server() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


LOAD_PROBE = """
import sys
from pipelines.cli.parser import build_parser
argv = ["--duckdb", "sim.duckdb", "load", "--levels", "repository"]
assert build_parser(argv).parse_args(argv).levels == "repository"
print(sorted(name for name in sys.modules if name.split(".")[0] == "simulator"))
"""


def test_a_command_other_than_sim_imports_no_simulator_module() -> None:
    """`load` (its arguments given) builds no `sim` options: not a module of the simulator
    is imported; `sim`'s own arguments still parse (the probe above)."""
    done = subprocess.run(
        [sys.executable, "-c", LOAD_PROBE], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_simulator_names_are_still_there() -> None:
    import simulator

    assert simulator.Simulator.__module__ == "simulator.server"
    assert simulator.SimConfig.__module__ == simulator.Conditions.__module__ == "simulator.config"
    assert issubclass(simulator.FaultSpecError, Exception)
    assert sorted(simulator.__all__) == ["Conditions", "FaultSpecError", "SimConfig", "Simulator"]
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        _ = simulator.Nothing
