"""A simulated Repository Analytics Export API host, both editions, over real HTTP.

It shares no code with the extractor (`sources/`, `pipelines/`): a misreading of the spec has
to be made twice, independently, to pass the tests.
"""

from .config import Conditions, SimConfig
from .faults import FaultSpecError
from .server import Simulator

__all__ = ["Conditions", "FaultSpecError", "SimConfig", "Simulator"]
