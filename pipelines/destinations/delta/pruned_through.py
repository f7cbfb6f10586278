"""How far the Delta tables' stale children are pruned: the record that lets the pruning after
a load read only the owners written since (`pipelines/destinations/delta/children.py`).

Only an owner row written by a load since the last complete pruning can make a child row
stale: the pruning after each load deleted the children every older owner row replaced, and
a later load writes its children with its own, newer, load id. So the record holds the newest
load id among the root tables' rows when a pruning of every child table ended, and each root
table's Delta version then. It is written only after that pruning, so a kill between a load
and its pruning leaves the older record, and the next pruning reads the rows of both loads.

It lives in the pipeline's working folder, not in the dataset: a lost folder (a new machine,
a restored state) means no record, and the pruning reads every owner as it always did. A
record that no longer fits the tables is not used either: a root table it does not know (new,
moved, or written before load ids were stamped), or one at an older version than recorded (a
restored copy of the dataset). Locations are kept as digests: a bucket's URL may carry a
password.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RECORD_FILE = "lake_pruned_through.json"
# dlt's load ids are `str()` of a Unix time in seconds: ten digits until 2286, then a fraction.
# Of those, text order is time order, which lets DuckDB skip older files by their statistics.
LOAD_ID_FORMAT = re.compile(r"\d{10}\.\d+")


@dataclass(frozen=True)
class PrunedThrough:
    """The newest load id among the root tables' rows at the end of a complete pruning, and
    each root table's Delta version then (by the digest of its location)."""

    load_id: str
    versions: dict[str, int]


def table_versions(locations: dict[str, str], tables: dict[str, Any]) -> dict[str, int]:
    """Each opened table's Delta version, by the digest of its location."""
    return {digest(locations[name]): table.version() for name, table in tables.items()}


def read_record(path: Path | None, versions: dict[str, int]) -> str | None:
    """The load id the pruning may read the owners after, if the record at `path` fits the
    root tables as they are now (`versions`); else None: read every owner."""
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        record = PrunedThrough(
            str(data["load_id"]), {k: int(v) for k, v in data["versions"].items()}
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not LOAD_ID_FORMAT.fullmatch(record.load_id):
        return None
    for location, version in versions.items():
        if record.versions.get(location, version + 1) > version:
            return None  # a table the record does not know, or an older one than it knew
    return record.load_id


def write_record(path: Path | None, record: PrunedThrough | None) -> None:
    """Replace the record at `path` whole (a kill leaves the old one or the new), or remove
    it when there is nothing to record."""
    if path is None:
        return
    if record is None or not LOAD_ID_FORMAT.fullmatch(record.load_id):
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(
        json.dumps({"load_id": record.load_id, "versions": record.versions}), encoding="utf-8"
    )
    os.replace(temporary, path)


def digest(location: str) -> str:
    """A table location's digest: what the record keeps instead of the location itself."""
    return hashlib.sha256(location.encode()).hexdigest()[:32]
