"""dlt's schema validation with each TypedDict's type hints read once, not at every check.

dlt validates a table's schema (`validate_dict`) each time an Arrow item is written (its
extractor keeps no contract cache for Arrow tables), each column of it as a nested TypedDict,
and its normalizer's config at each table's update: every check calls `get_type_hints` on the
TypedDict, which walks its annotations anew (dlt's own comment there: "get_type_hints is very
slow and we possibly should cache the result"). A 20-column table's check took 2.9 ms, 0.6 ms
with the hints read once. A TypedDict's hints do not change once it is defined, so they are
kept per class here; each caller gets its own copy.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

_LOCK = threading.Lock()


def cache_validation_hints() -> None:
    """Have dlt's `validate_dict` read each TypedDict's type hints once a process. Idempotent;
    a dlt without that function keeps its own."""
    from dlt.common import validation

    with _LOCK:
        read = getattr(validation, "get_type_hints", None)
        if read is None or getattr(read, "read_once", False):
            return
        known: dict[Any, dict[str, Any]] = {}

        def hints_once(
            obj: Any,
            globalns: dict[str, Any] | None = None,
            localns: Mapping[str, Any] | None = None,
            include_extras: bool = False,
        ) -> dict[str, Any]:
            if localns is not None or include_extras:  # not how validate_dict asks
                return dict(read(obj, globalns, localns, include_extras))
            hints = known.get(obj)
            if hints is None:
                hints = known[obj] = read(obj, globalns=globalns)
            return dict(hints)

        hints_once.read_once = True  # type: ignore[attr-defined]
        validation.get_type_hints = hints_once
