"""The destinations our pipelines load into: dlt's, with our own client and job classes where
we write differently (`pipelines/destinations/duckdb/merges.py`,
`pipelines/destinations/delta/destination.py`).

Each is a subclass of dlt's destination factory that keeps dlt's name, made for our pipelines
only (`pipelines/runs/load.py: make_pipeline` passes `ours(destination)`): a dlt pipeline of the
same process given dlt's factory loads as dlt does.
"""

from __future__ import annotations

from typing import Any

import dlt

from pipelines.destinations.delta import destination as lake_destination
from pipelines.destinations.duckdb import merges as duckdb_merges

OURS = {
    dlt.destinations.duckdb: duckdb_merges.duckdb,
    dlt.destinations.filesystem: lake_destination.filesystem,
}


def ours(destination: Any) -> Any:
    """`destination` as our pipelines load into it: dlt's DuckDB or filesystem destination
    (its name, or its factory as dlt makes it) becomes ours with the same parameters; any
    other as it is."""
    for theirs, mine in OURS.items():
        if destination == theirs.__name__:
            return mine()
        if type(destination) is theirs:
            return mine(**destination.config_params, **destination.caps_params)
    return destination
