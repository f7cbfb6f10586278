"""A simulated Repository Analytics Export API host, both editions, over real HTTP.

It shares no code with the extractor (`sources/`, `pipelines/`): a misreading of the spec has
to be made twice, independently, to pass the tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import Conditions, SimConfig
    from .faults import FaultSpecError
    from .server import Simulator

__all__ = ["Conditions", "FaultSpecError", "SimConfig", "Simulator"]


def __getattr__(name: str) -> Any:
    """The package's names, imported when first asked for: `repo-analytics` builds its `sim`
    command's options from `simulator.cli` on every run, which then costs no server."""
    if name in ("Conditions", "SimConfig"):
        from . import config

        return getattr(config, name)
    if name == "FaultSpecError":
        from .faults import FaultSpecError

        return FaultSpecError
    if name == "Simulator":
        from .server import Simulator

        return Simulator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
