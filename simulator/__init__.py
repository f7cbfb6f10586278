"""A simulated Repository Analytics Export API host, both editions, over real HTTP.

It shares no code with the extractor (`sources/`, `pipelines/`): a misreading of the spec has
to be made twice, independently, to pass the tests.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from .config import Conditions, SimConfig
    from .faults import FaultSpecError
    from .server import Simulator

__all__ = ["Conditions", "FaultSpecError", "SimConfig", "Simulator"]
# each name's module, imported when the name is first asked for: `repo-analytics` builds its
# `sim` command's options from `simulator.cli` on every run, which then costs no server
HOMES: Final = {
    "Conditions": "config",
    "SimConfig": "config",
    "FaultSpecError": "faults",
    "Simulator": "server",
}


def __getattr__(name: str) -> Any:
    if name not in HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{HOMES[name]}", __name__), name)
