"""Delta merges that read only the target's range of a fixed column
(`pipelines/destinations/delta/merges.py`), by our Delta job
(`pipelines/destinations/delta/destination.py`): loads into
real Delta tables, with and without the hint."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import deltalake
import dlt
import pyarrow as pa
import pytest

from pipelines.destinations.delta import destination as lake_destination
from pipelines.destinations.delta.merges import Appending, fixed_column, value_range
from simulator import Simulator
from sources.repo_analytics.editions import EDITION_SPECS
from sources.repo_analytics.editions.spec import FIXED_PER_KEY
from sources.repo_analytics.reading.context import ReadContext, edition_client
from sources.repo_analytics.reading.csv_exports import export_hints
from sources.repo_analytics.reading.plan import build_plan
from sources.repo_analytics.report import RunReport
from tests.support.loader import Loader

DAY = datetime(2026, 1, 1, tzinfo=UTC)


def rows(ids: list[int], days: list[int | None], label: str, **more: list[Any]) -> pa.Table:
    times = [None if d is None else DAY + timedelta(days=d) for d in days]
    columns = {
        "id": pa.array(ids, pa.int64()),
        "ts": pa.array(times, pa.timestamp("us", tz="UTC")),
        "label": pa.array([label] * len(ids)),
    }
    return pa.table({**columns, **{k: pa.array(v) for k, v in more.items()}})


def loader(tmp_path: Path, hinted: bool, **columns: dict[str, Any]) -> Any:
    """A function loading an Arrow table into the Delta table `items`, upserted by `id`,
    its `ts` hinted as fixed per key or not (and `columns`' hints); it returns the table's
    rows."""
    pipeline = dlt.pipeline(
        "lake_merges",
        destination=lake_destination.filesystem(bucket_url=str(tmp_path / "lake")),
        pipelines_dir=str(tmp_path / "pipelines"),
        dataset_name="lake",
    )
    ts: dict[str, Any] = {"data_type": "timestamp"}
    if hinted:
        ts[FIXED_PER_KEY] = True

    @dlt.resource(
        table_format="delta",
        primary_key="id",
        write_disposition={"disposition": "merge", "strategy": "upsert"},
        columns={"ts": ts, **columns},
    )
    def items(data: pa.Table) -> Any:
        yield data

    def load(data: pa.Table) -> list[tuple[Any, ...]]:
        pipeline.run(items(data))
        stored = deltalake.DeltaTable(str(tmp_path / "lake" / "lake" / "items"))
        table = stored.to_pyarrow_table(columns=["id", "ts", "label"])
        return sorted(
            (i, None if t is None else (t - DAY).days, label)
            for i, t, label in zip(
                *(table.column(c).to_pylist() for c in table.column_names), strict=True
            )
        )

    return load


def test_a_reloaded_row_replaces_its_stored_copy_and_new_rows_join(tmp_path: Path) -> None:
    load = loader(tmp_path, hinted=True)
    load(rows(list(range(10)), list(range(10)), "first"))
    # two stored rows again, a new one, and a new column (the table's schema evolves
    # through the ranged table)
    after = load(rows([2, 3, 12], [2, 3, 12], "second", extra=["x", "y", "z"]))
    expected = [(i, i, "second" if i in (2, 3, 12) else "first") for i in (*range(10), 12)]
    assert after == expected
    columns = deltalake.DeltaTable(str(tmp_path / "lake" / "lake" / "items")).schema()
    assert "extra" in columns.to_arrow().names


@pytest.mark.parametrize("hinted", [True, False])
def test_the_merge_matches_only_stored_rows_within_the_loaded_range(
    tmp_path: Path, hinted: bool
) -> None:
    """Row 5's fixed value moves from day 9 to day 2, which the hint rules out: with it, the
    merge of days 1-2 does not read day 9, and row 5 is inserted beside its stored copy."""
    load = loader(tmp_path, hinted)
    load(rows([1, 5], [1, 9], "first"))
    after = load(rows([1, 5], [1, 2], "second"))
    if hinted:
        assert after == [(1, 1, "second"), (5, 2, "second"), (5, 9, "first")]
    else:
        assert after == [(1, 1, "second"), (5, 2, "second")]


def test_a_null_in_the_fixed_column_leaves_the_merge_to_dlt(tmp_path: Path) -> None:
    """As above, with a null time in the load: no range, and row 5's one copy is updated."""
    load = loader(tmp_path, hinted=True)
    load(rows([1, 5], [1, 9], "first"))
    after = load(rows([1, 5, 7], [1, 2, None], "second"))
    assert after == [(1, 1, "second"), (5, 2, "second"), (7, None, "second")]


def files(tmp_path: Path) -> list[tuple[int, int, int]]:
    """The files of the table `items`: rows, first and last day of `ts`."""
    stored = deltalake.DeltaTable(str(tmp_path / "lake" / "lake" / "items"))
    actions = pa.table(stored.get_add_actions(flatten=True)).to_pydict()
    return sorted(
        (n, (low - DAY).days, (high - DAY).days)
        for n, low, high in zip(
            actions["num_records"], actions["min.ts"], actions["max.ts"], strict=True
        )
    )


def operations(tmp_path: Path) -> list[str]:
    """The table `items`' commits' operations, oldest first."""
    stored = deltalake.DeltaTable(str(tmp_path / "lake" / "lake" / "items"))
    return [entry["operation"] for entry in reversed(stored.history())]


@pytest.mark.parametrize("hinted", [True, False])
def test_rows_beyond_the_stored_range_are_appended_as_a_file_of_their_own(
    tmp_path: Path, hinted: bool
) -> None:
    """Days 0-9 stored; a load of day 2 again and days 20-21: with the hint, days 20-21 are
    appended in a file of their own and day 2 merged (its file rewritten); without, the merge
    rewrites day 2's file together with the new rows, as one file."""
    load = loader(tmp_path, hinted)
    load(rows(list(range(10)), list(range(10)), "first"))
    after = load(rows([2, 20, 21], [2, 20, 21], "second"))
    second = {2, 20, 21}
    assert after == [(i, i, "second" if i in second else "first") for i in (*range(10), 20, 21)]
    if hinted:
        assert files(tmp_path) == [(2, 20, 21), (10, 0, 9)]
        assert operations(tmp_path)[-2:] == ["WRITE", "MERGE"]
    else:
        assert files(tmp_path) == [(12, 0, 21)]
        assert operations(tmp_path)[-1] == "MERGE"


def test_a_load_only_beyond_the_range_appends_and_its_rerun_merges(tmp_path: Path) -> None:
    """Rows all beyond the stored range: appended, no merge; the same rows loaded again (a
    rerun after a crash between the append and the merge) lie within the range and are
    merged: each row once."""
    load = loader(tmp_path, hinted=True)
    load(rows([1, 2], [1, 2], "first"))
    after = load(rows([5, 6], [5, 6], "second"))
    assert operations(tmp_path)[-1] == "WRITE"
    assert files(tmp_path) == [(2, 1, 2), (2, 5, 6)]
    again = load(rows([5, 6], [5, 6], "again"))
    assert operations(tmp_path)[-1] == "MERGE"
    assert after == [(1, 1, "first"), (2, 2, "first"), (5, 5, "second"), (6, 6, "second")]
    assert again == [(1, 1, "first"), (2, 2, "first"), (5, 5, "again"), (6, 6, "again")]


def test_a_stored_time_below_the_statistics_precision_is_merged_not_appended(
    tmp_path: Path,
) -> None:
    """Delta's file statistics keep a time to the millisecond: a row stored at .000900 s has a
    statistic of .000 s, and its reload at .000900 lies beyond that bound. The margin keeps it
    within: it is merged, one copy."""
    load = loader(tmp_path, hinted=True)
    late = DAY + timedelta(microseconds=900)

    def one(label: str) -> pa.Table:
        return pa.table(
            {
                "id": pa.array([1], pa.int64()),
                "ts": pa.array([late], pa.timestamp("us", tz="UTC")),
                "label": [label],
            }
        )

    load(one("first"))
    stored = deltalake.DeltaTable(str(tmp_path / "lake" / "lake" / "items"))
    (high,) = pa.table(stored.get_add_actions(flatten=True)).column("max.ts").to_pylist()
    assert high < late  # the statistic is below the stored value
    assert load(one("second")) == [(1, 0, "second")]


def test_rows_beyond_the_range_marked_deleted_are_not_appended(tmp_path: Path) -> None:
    """A hard-delete column (dlt's `hard_delete` hint): a beyond row marked deleted is left
    out, as dlt's merge leaves out an unmatched deleted row; the others are appended."""
    load = loader(tmp_path, True, deleted={"data_type": "bool", "hard_delete": True})
    load(rows([1], [1], "first", deleted=[False]))
    after = load(rows([1, 30, 31], [1, 30, 31], "second", deleted=[False, True, None]))
    assert after == [(1, 1, "second"), (31, 31, "second")]


def test_appending_leaves_out_what_dlts_merge_would_not_insert() -> None:
    table = pa.table({"flag": pa.array([True, False, None]), "gone": ["x", None, "y"]})
    assert Appending("flag", flag=True).inserted(table).column("flag").to_pylist() == [False, None]
    assert Appending("gone", flag=False).inserted(table).column("flag").to_pylist() == [False]
    assert Appending(None, flag=False).inserted(table).num_rows == 3


def test_value_range_gives_literals_of_timestamps_and_dates_only() -> None:
    zoned = pa.table(
        {"t": pa.array([DAY, DAY + timedelta(microseconds=5)], pa.timestamp("us", tz="UTC"))}
    )
    assert value_range(zoned, "t") == (
        "'2026-01-01T00:00:00+00:00'",
        "'2026-01-01T00:00:00.000005+00:00'",
    )
    naive = pa.table({"t": pa.array([datetime(2026, 5, 1, 12)], pa.timestamp("ms"))})
    assert value_range(naive, "t") == ("'2026-05-01T12:00:00'", "'2026-05-01T12:00:00'")
    days = pa.table({"d": pa.array([date(2026, 1, 2), date(2025, 12, 31)])})
    assert value_range(days, "d") == ("'2025-12-31'", "'2026-01-02'")
    nanos = pa.table({"t": pa.array([0], pa.timestamp("ns", tz="UTC"))})
    text = pa.table({"t": pa.array(["2026-01-01"])})
    empty = pa.table({"t": pa.array([], pa.timestamp("us"))})
    with_null = pa.table({"t": pa.array([DAY, None], pa.timestamp("us", tz="UTC"))})
    for table in (nanos, text, empty, with_null):
        assert value_range(table, "t") is None
    assert value_range(zoned, "absent") is None


# the fixed column each edition hints, by table (the user level's and the others' alike)
FIXED = {
    "server": {
        "server_commits": "author_timestamp",
        "server_commit_parents": "author_timestamp",
        "server_pull_requests": "created_at",
        "server_pull_request_reviewers": None,  # carries the pull request's update time
        "server_pull_request_participants": None,
        "server_commit_exports": "date",  # the CSV's natural key and its `Date`
        "server_pull_request_exports": "created_date",
    },
    "cloud": {
        "cloud_commits": "date_local",
        "cloud_commit_parents": "date_local",
        "cloud_pull_requests": "created_at",
    },
}


RESOURCES = {
    "server": ["commits", "pull_requests", "commit_exports", "pull_request_exports"],
    "cloud": ["commits", "pull_requests"],
}

# the commit and pull-request tables, each with the column naming an item in its repository
KEYS = {
    "server": (("server_commits", "id"), ("server_pull_requests", "id")),
    "cloud": (("cloud_commits", "hash"), ("cloud_pull_requests", "id")),
}


@pytest.mark.parametrize("edition", ["server", "cloud"])
def test_each_editions_lists_into_delta_hint_their_fixed_columns_and_hold_the_truth(
    make_sim: Callable[..., Simulator], loader: Callable[[Simulator], Loader], edition: str
) -> None:
    """A load of the repository lists (and exports) into Delta tables, twice (the second
    merges every row of the look-back again, within its range): each table's fixed column is
    the one hinted (a child table's carried cursor only where it is the parent's fixed
    column), each commit and pull request is there once, and the self-hosted commits are
    those of the simulator since the start date."""
    sim = make_sim(edition=edition)
    lake = dataclasses.replace(loader(sim), destination="parquet")
    for _ in range(2):
        result = lake.load(levels=["repository"], resources=RESOURCES[edition])
    tables = result.pipeline.default_schema.tables
    assert {name: fixed_column(tables[name]) for name in FIXED[edition]} == FIXED[edition]
    for table, key in KEYS[edition]:
        counted = lake.rows(
            f"SELECT count(*), count(DISTINCT (repository_slug, {key})) FROM {table}"
        )
        assert counted[0][0] == counted[0][1] > 0
    start = datetime(2026, 3, 1, tzinfo=UTC)
    if edition == "server":
        truth = {
            c["id"]
            for c in sim.truth("commits")
            if datetime.fromisoformat(c["authorTimestamp"].replace("Z", "+00:00")) >= start
        }
        assert {r[0] for r in lake.rows("SELECT id FROM server_commits")} == truth


@pytest.mark.parametrize("natural", [True, False])
def test_an_exports_date_is_fixed_only_where_its_rows_have_their_natural_key(
    make_sim: Callable[..., Simulator], natural: bool
) -> None:
    """An export read with its natural key (project, repository, commit hash) hints its `date`
    as fixed; one whose header lacks it names its rows by window and number, and a re-read row
    of that number may be another commit: its `date` is hinted as not fixed (clearing a hint
    the table had)."""
    sim = make_sim(edition="server")
    args = Loader(sim, Path()).source_args(levels=["global"], resources=["commit_exports"])
    plan = build_plan(EDITION_SPECS["server"], args)
    client = edition_client(plan, RunReport())
    ctx = ReadContext(plan, client, client.report)
    endpoint = next(e for e in plan.edition.endpoints if e.table == "server_commit_exports")
    rows = pa.table(
        {
            "date": pa.array([DAY], pa.timestamp("us", tz="UTC")),
            "project": ["P"],
            "repository": ["r"],
            **({"commit_hash": ["abc"]} if natural else {}),
        }
    )
    hints = export_hints(ctx, endpoint, rows)
    assert ("commit_hash" in hints["primary_key"]) is natural
    assert hints["columns"]["date"].get(FIXED_PER_KEY) is natural
