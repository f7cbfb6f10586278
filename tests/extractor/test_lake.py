"""The pruning of stale child rows in Delta tables (`pipelines/lake.py`), on real Delta tables:
DuckDB's own Parquet reader where it reads a table as Delta does, the table's Arrow dataset
where it may not (here: a table with partition columns), with the same answer."""

from __future__ import annotations

from pathlib import Path

import deltalake
import duckdb
import pyarrow as pa
import pytest

from pipelines.lake import LOAD_ID, ChildList, scan, stale_rows

CHILD = ChildList("parents", ("commits",), ("source", "id"), "position")


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
    stale = stale_rows(parents, [commits], CHILD)
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
    stale = stale_rows(parents, [repository, user, workspace, legacy], child)
    assert sorted(stale.to_pylist(), key=str) == [
        {"source": "h", "id": "a", "position": 1},
        {"source": "h", "id": "c", "position": 0},
        {"source": "h", "id": "c", "position": 1},
    ]
