"""Parquet output: Delta tables on dlt's filesystem destination, merged by natural key."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import deltalake
import dlt

from pipelines.runs.load import make_pipeline, run_load
from simulator import Simulator
from tests.support.loader import FAST_RETRY


def delta_rows(root: Path, table: str, columns: list[str]) -> list[tuple[Any, ...]]:
    data = deltalake.DeltaTable(str(root / "repo_analytics" / table)).to_pyarrow_table(
        columns=columns
    )
    return sorted(zip(*(data.column(c).to_pylist() for c in columns), strict=True))


def load(sim: Simulator, root: Path, work: Path) -> None:
    pipeline = make_pipeline(
        destination=dlt.destinations.filesystem(bucket_url=str(root)),
        pipelines_dir=str(work / "pipelines"),
        schemas_dir=work,
    )
    run_load(
        pipeline,
        edition="server",
        base_url=sim.base_url,
        username="analyst",
        password="analyst-pass",
        start_date="2026-03-01",
        levels=["repository"],
        resources=["commits", "pull_requests"],
        retry=FAST_RETRY,
        now=datetime.fromtimestamp(sim.info()["now"], UTC),
    )


def test_parquet_tables_equal_the_truth_across_reruns_and_late_data(
    make_sim: Callable[..., Simulator], tmp_path: Path
) -> None:
    """Three loads (first, rerun, after an advance): every Delta table equals the truth,
    with each natural key once, although every run re-reads its look-back window."""
    sim = make_sim(edition="server")
    root, work = tmp_path / "lake", tmp_path / "work"
    load(sim, root, work)
    load(sim, root, work)
    advanced = sim.advance(days=1)
    load(sim, root, work)
    start = datetime(2026, 3, 1, tzinfo=UTC)
    truth = [
        c
        for c in sim.truth("commits")
        if datetime.fromisoformat(c["authorTimestamp"].replace("Z", "+00:00")) >= start
    ]
    expected = sorted(
        (
            c["repository"]["project"]["key"],
            c["repository"]["slug"],
            c["id"],
            c["linesOfCode"]["added"],
        )
        for c in truth
    )
    landed = delta_rows(
        root, "server_commits", ["project_key", "repository_slug", "id", "lines_added"]
    )
    assert landed == expected
    assert set(advanced["late_commits"]) <= {row[2] for row in landed}
    prs = sorted(
        (p["toRef"]["repository"]["slug"], p["id"], p["state"])
        for p in sim.truth("pull-requests")
        if p["updatedDate"] >= start.timestamp() * 1000
    )
    assert delta_rows(root, "server_pull_requests", ["repository_slug", "id", "state"]) == prs
