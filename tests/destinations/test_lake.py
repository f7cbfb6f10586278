"""The pruning of stale child rows in Delta tables (`pipelines/destinations/delta/children.py`), on
real Delta tables:
DuckDB's own Parquet reader where it reads a table as Delta does, the table's Arrow dataset
where it may not (here: a table with partition columns), with the same answer."""

from __future__ import annotations

import json
from pathlib import Path

import deltalake
import duckdb
import pyarrow as pa
import pytest

from pipelines.destinations.delta.children import (
    LOAD_ID,
    ChildList,
    LakeTables,
    has_load_ids,
    prune_children,
    scan,
    stale_rows,
)
from pipelines.destinations.delta.pruned_through import RECORD_FILE

CHILD = ChildList("parents", ("commits",), ("source", "id"), "position")


def stale_of(
    children: deltalake.DeltaTable, roots: list[deltalake.DeltaTable], child: ChildList
) -> pa.Table:
    """`stale_rows` of these tables, read as the pruning reads them (roots without load ids
    left out)."""
    with duckdb.connect() as con:
        owners = [scan(con, r, f"root_{i}") for i, r in enumerate(roots) if has_load_ids(r)]
        return stale_rows(con, scan(con, children, "child_rows"), owners, child)


def write(folder: Path, rows: dict[str, list[object]], partitioned: bool) -> deltalake.DeltaTable:
    table = pa.table(rows)
    half = table.num_rows // 2  # two files, as two loads leave them
    for part in (table.slice(0, half), table.slice(half)):
        deltalake.write_deltalake(
            str(folder), part, mode="append", partition_by=["source"] if partitioned else None
        )
    return deltalake.DeltaTable(str(folder))


@pytest.mark.parametrize("partitioned", [False, True], ids=["parquet-reader", "arrow-dataset"])
def test_stale_child_rows_are_those_older_than_their_owners_newest_load(
    tmp_path: Path, partitioned: bool
) -> None:
    # commit a was written again by load 2 with one parent (its position-0 row upserted to
    # load 2): its position-1 row of load 1 is stale; commit b was last written by load 1, so
    # its rows stay; c's row is as new as its owner
    commits = write(
        tmp_path / "commits",
        {"source": ["h", "h", "h"], "id": ["b", "a", "c"], LOAD_ID: ["1", "2", "2"]},
        partitioned,
    )
    parents = write(
        tmp_path / "parents",
        {
            "source": ["h", "h", "h", "h", "h"],
            "id": ["a", "b", "b", "a", "c"],
            "position": [1, 0, 1, 0, 0],
            LOAD_ID: ["1", "1", "1", "2", "2"],
        },
        partitioned,
    )
    with duckdb.connect() as con:
        source = scan(con, parents, "parents_rows")
    assert source.startswith("read_parquet(") is not partitioned
    stale = stale_of(parents, [commits], CHILD)
    assert stale.num_rows == 1
    assert stale.to_pylist() == [{"source": "h", "id": "a", "position": 1}]


def test_a_child_row_is_stale_when_any_root_has_its_owner_from_a_newer_load(
    tmp_path: Path,
) -> None:
    # commit a: load 1 in the repository root, load 3 in the user root (written again there
    # with one parent): its position-1 row of load 1 is stale, found once though two roots
    # hold a newer a (the global root's of load 2 too); commit b: load 2 in both roots, its
    # rows of load 2 stay; commit c: load 2 in the (partitioned) global root, its rows of
    # load 1 are stale; the root without load ids (an older version's) is left out
    repository = write(
        tmp_path / "repository",
        {"source": ["h", "h"], "id": ["a", "b"], LOAD_ID: ["1", "2"]},
        partitioned=False,
    )
    user = write(
        tmp_path / "user",
        {"source": ["h", "h"], "id": ["b", "a"], LOAD_ID: ["2", "3"]},
        partitioned=False,
    )
    workspace = write(
        tmp_path / "global",
        {"source": ["h", "h"], "id": ["a", "c"], LOAD_ID: ["2", "2"]},
        partitioned=True,
    )
    legacy = write(tmp_path / "legacy", {"id": ["c", "c"]}, partitioned=False)
    parents = write(
        tmp_path / "parents",
        {
            "source": ["h", "h", "h", "h", "h", "h"],
            "id": ["a", "a", "b", "b", "c", "c"],
            "position": [0, 1, 0, 1, 0, 1],
            LOAD_ID: ["3", "1", "2", "2", "1", "1"],
        },
        partitioned=False,
    )
    roots = ("repository", "user", "global", "legacy")
    child = ChildList("parents", roots, ("source", "id"), "position")
    stale = stale_of(parents, [repository, user, workspace, legacy], child)
    assert sorted(stale.to_pylist(), key=str) == [
        {"source": "h", "id": "a", "position": 1},
        {"source": "h", "id": "c", "position": 0},
        {"source": "h", "id": "c", "position": 1},
    ]


# the record of the last complete pruning (`pipelines/destinations/delta/pruned_through.py`): load
# ids of dlt's
# format, as only those are recorded
L1, L2, L3 = "1795000001.25", "1795000002.5", "1795000003.125"
PARENTS = ChildList("parents", ("commits",), ("source", "id"), "position")


def lake(folder: Path) -> LakeTables:
    return LakeTables({name: str(folder / name) for name in ("commits", "parents")}, {})


def append(folder: Path, name: str, rows: dict[str, list[object]]) -> None:
    """Rows appended to a table; under a folder named `partitioned`, a table partitioned by
    source (read through its Arrow dataset, filters included)."""
    partitioned = folder.name == "partitioned"
    deltalake.write_deltalake(
        str(folder / name),
        pa.table(rows),
        mode="append",
        partition_by=["source"] if partitioned else None,
    )


def parent_rows(folder: Path) -> list[tuple[object, ...]]:
    data = deltalake.DeltaTable(str(folder / "parents")).to_pyarrow_table()
    return sorted(
        zip(*(data.column(c).to_pylist() for c in ("id", "position", LOAD_ID)), strict=True)
    )


def first_load(folder: Path) -> None:
    """Load 1: commits a and b with two parents each."""
    append(folder, "commits", {"source": ["h", "h"], "id": ["a", "b"], LOAD_ID: [L1, L1]})
    append(
        folder,
        "parents",
        {
            "source": ["h"] * 4,
            "id": ["a", "a", "b", "b"],
            "position": [0, 1, 0, 1],
            LOAD_ID: [L1, L1, L1, L1],
        },
    )


@pytest.mark.parametrize("layout", ["plain", "partitioned"])
def test_a_pruning_records_the_newest_load_and_the_next_reads_only_newer_owners(
    tmp_path: Path, layout: str
) -> None:
    tmp_path = tmp_path / layout
    first_load(tmp_path)
    with duckdb.connect() as con:  # the pruning reads each table the way this says
        source = scan(con, deltalake.DeltaTable(str(tmp_path / "commits")), "commits_rows")
    assert source.startswith("read_parquet(") is (layout == "plain")
    record = tmp_path / "work" / RECORD_FILE
    assert prune_children(lake(tmp_path), [PARENTS], record) == {}
    saved = json.loads(record.read_text())
    assert saved["load_id"] == L1
    assert str(tmp_path) not in record.read_text()  # locations kept as digests only
    # a row the record says is already pruned (an owner of load 1, a child older than it:
    # planted, no load writes it) is left alone, as the pruning reads only newer owners ...
    append(tmp_path, "commits", {"source": ["h"], "id": ["c"], LOAD_ID: [L1]})
    append(tmp_path, "parents", {"source": ["h"], "id": ["c"], "position": [0], LOAD_ID: ["1"]})
    # ... while load 2's owner a, written again with one parent, loses its position-1 row
    append(tmp_path, "commits", {"source": ["h"], "id": ["a"], LOAD_ID: [L2]})
    deltalake.DeltaTable(str(tmp_path / "parents")).delete("id = 'a' AND position = 0")
    append(tmp_path, "parents", {"source": ["h"], "id": ["a"], "position": [0], LOAD_ID: [L2]})
    assert prune_children(lake(tmp_path), [PARENTS], record) == {"parents": 1}
    assert json.loads(record.read_text())["load_id"] == L2
    assert parent_rows(tmp_path) == [("a", 0, L2), ("b", 0, L1), ("b", 1, L1), ("c", 0, "1")]
    # without the record every owner is read: the planted row goes too
    record.unlink()
    assert prune_children(lake(tmp_path), [PARENTS], record) == {"parents": 1}
    assert ("c", 0, "1") not in parent_rows(tmp_path)


def test_a_kill_between_a_load_and_its_pruning_is_mended_by_the_next_pruning(
    tmp_path: Path,
) -> None:
    first_load(tmp_path)
    record = tmp_path / RECORD_FILE
    prune_children(lake(tmp_path), [PARENTS], record)
    # load 2 writes b again with one parent; the process is killed before its pruning
    append(tmp_path, "commits", {"source": ["h"], "id": ["b"], LOAD_ID: [L2]})
    deltalake.DeltaTable(str(tmp_path / "parents")).delete("id = 'b' AND position = 0")
    append(tmp_path, "parents", {"source": ["h"], "id": ["b"], "position": [0], LOAD_ID: [L2]})
    # load 3 writes a again with one parent; its pruning reads the owners of loads 2 and 3
    append(tmp_path, "commits", {"source": ["h"], "id": ["a"], LOAD_ID: [L3]})
    deltalake.DeltaTable(str(tmp_path / "parents")).delete("id = 'a' AND position = 0")
    append(tmp_path, "parents", {"source": ["h"], "id": ["a"], "position": [0], LOAD_ID: [L3]})
    assert json.loads(record.read_text())["load_id"] == L1
    assert prune_children(lake(tmp_path), [PARENTS], record) == {"parents": 2}
    assert parent_rows(tmp_path) == [("a", 0, L3), ("b", 0, L2)]
    assert json.loads(record.read_text())["load_id"] == L3


@pytest.mark.parametrize("misfit", ["older-table", "unknown-table", "bad-load-id", "garbled"])
def test_a_record_that_does_not_fit_the_tables_is_not_used(tmp_path: Path, misfit: str) -> None:
    first_load(tmp_path)
    record = tmp_path / RECORD_FILE
    prune_children(lake(tmp_path), [PARENTS], record)
    saved = json.loads(record.read_text())
    if misfit == "older-table":  # a restored copy of the dataset: its tables are older
        saved["versions"] = {k: v + 5 for k, v in saved["versions"].items()}
    elif misfit == "unknown-table":  # the dataset moved, or a root the record never saw
        saved["versions"] = {}
    elif misfit == "bad-load-id":
        saved["load_id"] = "1"
    record.write_text("{not json" if misfit == "garbled" else json.dumps(saved))
    # a stale row whose owner is as old as the record: only a pruning of every owner finds it
    append(tmp_path, "parents", {"source": ["h"], "id": ["b"], "position": [2], LOAD_ID: ["1"]})
    assert prune_children(lake(tmp_path), [PARENTS], record) == {"parents": 1}
    assert json.loads(record.read_text())["load_id"] == L1
