"""dlt's load loop is woken for jobs that are finished when they start (`wake_on_finished_jobs`
in pipelines/runs/load.py): a Delta load's first jobs are all such, and no pool thread signals them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from threading import BoundedSemaphore
from typing import Any

import pytest
from dlt.common.destination.client import RunnableLoadJob
from dlt.destinations.job_impl import FinalizedLoadJob
from dlt.load.load import Load

from pipelines.runs.load import wake_on_finished_jobs
from simulator import Simulator
from tests.extractor.test_parquet import delta_rows, load

FILE = "folder/commits.1a2b3c4d5e.0.parquet"


class Loop:
    """Stands in for dlt's `Load`: the signal its loop waits on, taken as when a load begins."""

    def __init__(self) -> None:
        self._done_event = BoundedSemaphore()
        self._done_event.acquire()

    def signalled(self) -> bool:
        return self._done_event.acquire(blocking=False)


class PoolJob(RunnableLoadJob):
    def run(self) -> None:
        pass


def signalled_after(monkeypatch: pytest.MonkeyPatch, *jobs: Any) -> bool:
    monkeypatch.setattr(Load, "start_new_jobs", lambda self, *args, **kwargs: list(jobs))
    wake_on_finished_jobs()
    loop = Loop()
    assert Load.start_new_jobs(loop, "1.2", None, []) == list(jobs)  # type: ignore[arg-type]
    return loop.signalled()


@pytest.mark.parametrize("status", ["completed", "failed"])
def test_a_job_ended_on_creation_wakes_the_loop(
    monkeypatch: pytest.MonkeyPatch, status: str
) -> None:
    assert signalled_after(monkeypatch, FinalizedLoadJob(FILE, status=status))  # type: ignore[arg-type]


def test_a_retry_or_a_job_in_the_pool_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """A retry waits as dlt makes it wait; a job run in the pool signals when it ends there."""
    assert not signalled_after(monkeypatch, FinalizedLoadJob(FILE, status="retry"))
    assert not signalled_after(monkeypatch, PoolJob(FILE))
    assert not signalled_after(monkeypatch)


def test_installed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Load, "start_new_jobs", Load.start_new_jobs)
    wake_on_finished_jobs()
    installed = Load.start_new_jobs
    wake_on_finished_jobs()
    assert Load.start_new_jobs is installed


def test_a_delta_load_starts_such_jobs_and_the_loop_is_woken_for_them(
    monkeypatch: pytest.MonkeyPatch, make_sim: Callable[..., Simulator], tmp_path: Path
) -> None:
    """With the real filesystem destination: every start of jobs finished on creation leaves
    the loop signalled (it does not wait out its timeout), and the tables still land."""
    wake_on_finished_jobs()
    woken: list[bool] = []
    starting = Load.start_new_jobs

    def spy(self: Load, *args: Any, **kwargs: Any) -> Any:
        started = starting(self, *args, **kwargs)
        if any(not isinstance(j, RunnableLoadJob) and j.state() == "completed" for j in started):
            signalled = self._done_event.acquire(blocking=False)
            if signalled:
                self._done_event.release()  # put back for the loop
            woken.append(signalled)
        return started

    monkeypatch.setattr(Load, "start_new_jobs", spy)
    sim = make_sim(edition="server")
    root = tmp_path / "lake"
    load(sim, root, tmp_path / "work")
    assert woken and all(woken)
    start = datetime(2026, 3, 1, tzinfo=UTC).timestamp() * 1000
    prs = sorted(
        (p["toRef"]["repository"]["slug"], p["id"], p["state"])
        for p in sim.truth("pull-requests")
        if p["updatedDate"] >= start
    )
    assert delta_rows(root, "server_pull_requests", ["repository_slug", "id", "state"]) == prs
