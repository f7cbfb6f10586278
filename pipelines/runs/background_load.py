"""A backfill window's load into the destination while the next window is read.

A window's load (merges into DuckDB, Delta writes) is native work that holds Python's lock
little, and the next window's reading is Python work that waits on the network: run side by
side they take less wall time than one after the other, at the same peak memory
(`docs/decisions/windows-one-at-a-time.md`).

`pipeline.load()` itself cannot run beside `pipeline.extract()`: both keep the pipeline's
runtime trace and state on the pipeline object. So dlt's load step (`Load`, the runnable
`pipeline.load()` runs) runs in a thread of its own with the destination configuration
resolved up front, and `finish()`, in the calling thread once the extract is over, records the
load in dlt's trace and local state as `pipeline.load()` does, and raises its failure the way
`pipeline.load()` does (an aborted package is cleaned up only then, with no extract under
way). The next package is normalized only after `finish()`: the load step loads every
normalized package it finds.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import dlt
from dlt.common.configuration import inject_section, known_sections
from dlt.common.configuration.specs.config_section_context import ConfigSectionContext
from dlt.common.destination.client import LoadJob, RunnableLoadJob
from dlt.common.destination.exceptions import WithJobError
from dlt.common.pipeline import LoadInfo
from dlt.common.runners import pool_runner
from dlt.common.schema import Schema
from dlt.destinations.impl.duckdb.configuration import DuckDbConnectionPool
from dlt.load import Load
from dlt.load.exceptions import LoadPackageAborted
from dlt.pipeline.exceptions import PipelineStepFailed
from dlt.pipeline.pipeline import with_runtime_trace, with_state_sync

from pipelines.destinations.duckdb.file import EXTRACTED_KEPT, waiting
from pipelines.destinations.warehouse import exclusive_load, load_workers
from pipelines.runs.dlt_internals import loader_configuration, record_load_run
from sources.repo_analytics.errors import DuckDBFileHeld


class BackgroundLoad:
    """dlt's load step of the packages normalized so far, in a thread of its own. `wait`:
    how long to wait for a DuckDB file another process holds (as `duckdb.file.waiting`).
    Nothing else of the pipeline's runs in that thread but `then`, after a load that did not
    fail, which reads nothing of the pipeline (`delta.children.stale_children_pruning` locates its
    tables first): what reads the pipeline's live schema (its destination client, say) runs
    in the calling thread."""

    def __init__(
        self,
        pipeline: dlt.Pipeline,
        wait: float,
        then: Callable[[], object] | None = None,
        beside_reads: bool = False,
        kept: str = EXTRACTED_KEPT,
    ) -> None:
        self.pipeline = pipeline
        self.wait = wait
        self.kept = kept  # what a user is told stays, where the DuckDB file stays held
        self.then = then  # run in the thread after a load that did not fail
        self.beside_reads = beside_reads  # another window is read while this one loads
        self.step: Load | None = None
        self.error: BaseException | None = None
        self.then_error: BaseException | None = None  # raised by finish(), the load recorded
        self.ended: float | None = None  # when the load ended (monotonic), success or not
        with load_section(pipeline):
            # the schema the clients are made with is the pipeline's live one: read it here,
            # before the next extract changes it in the calling thread
            client = pipeline.destination_client()
        self.client_config = client.config
        self.workers = load_workers(pipeline, client.config)
        self.held = ExitStack()  # the load lock: the calling thread holds it until finish()
        self.held.enter_context(exclusive_load(pipeline))
        self.thread = threading.Thread(target=self._run, name="repo-analytics-load")
        self.thread.start()

    def _new_step(self) -> Load:
        pipeline = self.pipeline
        # our pipelines load with no staging destination (dlt resolves the configuration
        # of one a user set)
        self.step = WindowLoad(
            pipeline.destination,
            staging_destination=pipeline.staging,
            collector=pipeline.collector,
            is_storage_owner=False,
            config=loader_configuration(pipeline, self.workers),
            initial_client_config=self.client_config,
            initial_staging_client_config=None,  # type: ignore[arg-type]
        )
        return self.step

    def _run(self) -> None:
        try:
            with load_section(self.pipeline):

                def load() -> None:
                    step = self._new_step()
                    with open_between_jobs(self.client_config, self.beside_reads):
                        pool_runner.run_pool(step.config, step)

                waiting(load, self.wait, self.kept)
        except BaseException as error:  # noqa: BLE001 - raised by finish(), in the caller
            self.error = error
        else:
            self._then()
        finally:
            self.ended = time.monotonic()

    def _then(self) -> None:
        if self.then is None:
            return
        try:
            self.then()
        except BaseException as error:  # noqa: BLE001 - raised by finish(), in the caller
            self.then_error = error

    def finish(self) -> LoadInfo:
        """Wait for the load and what follows it (`then`); the load's `LoadInfo`, or its
        failure raised as `pipeline.load()` raises it. A step of dlt's trace named `load`,
        as `pipeline.load()` records. A failure of `then` is raised after the load is
        recorded."""
        with self.held:
            info = _finished_load(self.pipeline, self)
        if self.then_error is not None:
            raise self.then_error
        return info


class WindowLoad(Load):
    """dlt's load step, with the jobs that end as they start completed at once."""

    def start_new_jobs(
        self, load_id: str, schema: Schema, running_jobs: Sequence[LoadJob]
    ) -> Sequence[LoadJob]:
        """dlt's start of new jobs; then the jobs among them that completed as they started
        (no thread runs them: a Delta table's file jobs, which hand their rows on to a
        follow-up job, and the state table's) are completed, and the jobs that frees a place
        for or that follow them are started, as dlt's loop would in its next round. That
        round comes when a job run in a thread ends, or after a second: with none in a
        thread, a load into Delta tables, two jobs at a time (`warehouse.load_workers`),
        waited a second for every two tables. Which jobs run, in what order, and how failures
        and retries are handled stay dlt's: only completed jobs are completed here."""
        kept: list[LoadJob] = []
        started = list(super().start_new_jobs(load_id, schema, running_jobs))
        while True:
            ended = [job for job in started if ended_on_start(job)]
            kept += [job for job in started if not ended_on_start(job)]
            if not ended:
                return kept
            self.complete_jobs(load_id, ended, schema)
            started = list(super().start_new_jobs(load_id, schema, [*running_jobs, *kept]))


def ended_on_start(job: LoadJob) -> bool:
    """Whether a job completed as it started: one dlt runs in no thread."""
    return not isinstance(job, RunnableLoadJob) and job.state() == "completed"


@contextmanager
def open_between_jobs(client_config: Any, beside_reads: bool = False) -> Iterator[None]:
    """A DuckDB file open from the load's first job to its last. dlt's pool of connections
    closes the database whenever no job holds a connection, and opens it again for the next
    job: each close checkpoints the file, seconds of a year's loads
    (`docs/decisions/windows-one-at-a-time.md`). `beside_reads`: the next window is read
    meanwhile, and DuckDB works on `threads_beside_reads()` threads (see there). Other
    destinations: nothing."""
    credentials = getattr(client_config, "credentials", None)
    pool = getattr(credentials, "conn_pool", None)
    if not isinstance(pool, DuckDbConnectionPool):
        yield
        return
    held = pool.borrow_conn()
    try:
        own = "threads" in (getattr(credentials, "global_config", None) or {})
        with fewer_threads(held, threads_beside_reads() if beside_reads and not own else None):
            yield
    finally:
        pool.return_conn(held)


def threads_beside_reads() -> int:
    """DuckDB's threads for a load while the next window is read: two cores fewer than the
    process may use (one for the reading threads' Python, one for dlt's extract), at least
    one. A window's merges are native work, and with DuckDB's default (a thread a core) they
    took the cores the reading waits for (`docs/decisions/windows-one-at-a-time.md`). The
    last window's load, with nothing read beside it, keeps DuckDB's threads."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, (cores or 1) - 2)


@contextmanager
def fewer_threads(connection: Any, threads: int | None) -> Iterator[None]:
    """DuckDB's `threads` at most `threads` (None: as they are) while inside; as before after
    (the setting is the database's, not the connection's)."""
    if threads is None:
        yield
        return
    (before,) = connection.execute("SELECT current_setting('threads')").fetchone()
    if int(before) <= threads:
        yield
        return
    connection.execute(f"SET GLOBAL threads = {int(threads)}")
    try:
        yield
    finally:
        connection.execute(f"SET GLOBAL threads = {int(before)}")


def load_now(
    pipeline: dlt.Pipeline,
    wait: float,
    then: Callable[[], object] | None = None,
    kept: str = EXTRACTED_KEPT,
) -> LoadInfo:
    """`pipeline.load()` under the dataset's load lock (`warehouse.exclusive_load`), by our
    load step (`WindowLoad`), with a DuckDB file open from the load's first job to its last
    (`open_between_jobs`), and `then` after it: the background load, waited for at once.
    `kept`: what stays where the DuckDB file stays held past `wait`."""
    return BackgroundLoad(pipeline, wait, then, kept=kept).finish()


def load_section(pipeline: dlt.Pipeline) -> Any:
    """The configuration section `pipeline.load()` resolves its settings in."""
    return inject_section(
        ConfigSectionContext(pipeline_name=pipeline.pipeline_name, sections=(known_sections.LOAD,))
    )


def load(pipeline: dlt.Pipeline, background: BackgroundLoad) -> LoadInfo:
    """The background load's `LoadInfo` (named `load`: the step's name in dlt's trace)."""
    background.thread.join()
    step = background.step
    error = background.error
    if step is None:  # the load step could not even be made
        raise error or RuntimeError("the load did not start")
    if error is None:
        record_load_run(pipeline)  # as pipeline.load() does after a load
        return step.get_step_info(pipeline)
    if isinstance(error, DuckDBFileHeld):  # past its wait: raised as `waiting` raises it
        raise error
    load_id = error.load_id if isinstance(error, WithJobError) else step.current_load_id
    failed = PipelineStepFailed(pipeline, "load", load_id, error, step.get_step_info(pipeline))
    if isinstance(error, LoadPackageAborted):
        pipeline.abort_packages(error.load_id)  # as pipeline.load() cleans up an abort
        if error.job_exception is None:
            return failed.step_info  # type: ignore[return-value]  # an abort asked for
        raise PipelineStepFailed(
            pipeline, "load", error.load_id, error.job_exception, failed.step_info
        ) from error.job_exception
    raise failed from error


_finished_load = with_runtime_trace(send_state=True)(with_state_sync()(load))
