"""Our load step completes at once the jobs that end as they start (`WindowLoad` in
pipelines/runs/background_load.py): a Delta load's first jobs are all such, and no thread would
signal dlt's loop for them. dlt's own `Load`, and other pipelines' loads, are left as they are."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from dlt.common.destination.client import LoadJob
from dlt.load.load import Load

from pipelines.runs.background_load import WindowLoad, ended_on_start
from simulator import Simulator
from tests.destinations.test_parquet import delta_rows, load


def test_a_delta_load_leaves_dlts_loop_no_job_that_ended_as_it_started(
    monkeypatch: pytest.MonkeyPatch, make_sim: Callable[..., Simulator], tmp_path: Path
) -> None:
    """With the real filesystem destination: dlt starts jobs that end as they start (the
    Delta tables' file jobs, the state table's), none of them reaches dlt's loop (which would
    wait for a signal no thread gives), their follow-up jobs run, and the tables land."""
    seen: list[Sequence[LoadJob]] = []  # what dlt's start gave, what ours gave the loop
    handed: list[Sequence[LoadJob]] = []
    dlts = Load.start_new_jobs
    ours = WindowLoad.start_new_jobs

    def dlt_start(self: Load, *args: Any, **kwargs: Any) -> Sequence[LoadJob]:
        started = dlts(self, *args, **kwargs)
        seen.append(started)
        return started

    def our_start(self: WindowLoad, *args: Any, **kwargs: Any) -> Sequence[LoadJob]:
        started = ours(self, *args, **kwargs)
        handed.append(started)
        return started

    monkeypatch.setattr(Load, "start_new_jobs", dlt_start)
    monkeypatch.setattr(WindowLoad, "start_new_jobs", our_start)
    sim = make_sim(edition="server")
    root = tmp_path / "lake"
    load(sim, root, tmp_path / "work")
    assert any(ended_on_start(job) for started in seen for job in started)
    assert handed and not any(ended_on_start(job) for started in handed for job in started)
    start = datetime(2026, 3, 1, tzinfo=UTC).timestamp() * 1000
    prs = sorted(
        (p["toRef"]["repository"]["slug"], p["id"], p["state"])
        for p in sim.truth("pull-requests")
        if p["updatedDate"] >= start
    )
    assert delta_rows(root, "server_pull_requests", ["repository_slug", "id", "state"]) == prs
