"""The nightly incremental load: one dlt pipeline run of the configured source."""

from __future__ import annotations

import contextlib
import functools
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import dlt
import pyarrow as pa
from dlt.common.normalizers.naming.snake_case import NamingConvention
from dlt.common.pipeline import LoadInfo
from dlt.common.storages.exceptions import SchemaNotFoundError
from dlt.common.storages.live_schema_storage import LiveSchemaStorage
from dlt.destinations.exceptions import DatabaseUndefinedRelation

from pipelines.destinations.delta.children import stale_children_pruning
from pipelines.destinations.duckdb.file import (
    EXTRACTED_KEPT,
    NOTHING_EXTRACTED,
    PENDING_KEPT,
    VIEWS_LATER,
    WAIT_KEY,
    check_catalog,
    lock_wait,
    waiting,
    without_file_keys,
)
from pipelines.destinations.factories import ours
from pipelines.destinations.views import create_views, has_views
from pipelines.runs.background_load import load_now
from pipelines.runs.dlt_internals import extracted_packages, load_storage
from pipelines.runs.interrupted import deduplicate_interrupted
from pipelines.runs.malloc import system_pool_while_running
from pipelines.runs.upgrade import adopt_rows, legacy_pipeline
from sources.repo_analytics import (
    RUN_KEYS,
    ConfigError,
    RepoAnalyticsConfiguration,
    RunContext,
    RunReport,
    repo_analytics,
)
from sources.repo_analytics.errors import DuckDBFileHeld
from sources.repo_analytics.reading.plan import resolve_settings

SCHEMAS_FOLDER = "schemas"  # in the working directory, as in a dlt project
SCHEMA_NAME = "repo_analytics"  # the source's schema
NEXT_ITEM_MODE = "extract.next_item_mode"  # dlt's setting: how the extract takes items of resources
# dlt's setting: how long its extract sleeps when no resource has an item ready
FUTURES_POLL_INTERVAL = "extract.futures_poll_interval"
ADD_LOAD_ID = "normalize.parquet_normalizer.add_dlt_load_id"  # dlt's: rows stamped with their load
EXTRACT_POLL_SECONDS = 0.001


@dataclass
class LoadResult:
    info: LoadInfo | None
    report: RunReport
    pipeline: Any

    @property
    def load_ids(self) -> tuple[str, ...]:
        """The ids of the loads this run made (the `_dlt_load_id` of every row it wrote);
        a crashed run's packages it finished first are not among them."""
        return tuple(self.report.load_ids)


def make_pipeline(
    pipeline_name: str = "repo_analytics",
    destination: Any = None,
    dataset_name: str = "repo_analytics",
    pipelines_dir: str | None = None,
    schemas_dir: Path | None = None,
) -> dlt.Pipeline:
    """The pipeline: DuckDB by default, schemas imported from and exported to `schemas_dir`
    (default: `schemas/` in the working directory, as in a dlt project; never a folder of
    the installed package). dlt writes the first schema it makes into `import/`: that
    installation's pinned schema."""
    check_dataset_name(dataset_name)
    database = named_duckdb_file(destination, pipeline_name)
    if database is not None:
        check_catalog("destination", database, dataset_name)
    schemas_dir = schemas_dir if schemas_dir is not None else Path.cwd() / SCHEMAS_FOLDER
    return dlt.pipeline(
        pipeline_name=pipeline_name,
        destination=ours(destination or "duckdb"),
        dataset_name=dataset_name,
        pipelines_dir=pipelines_dir,  # type: ignore[arg-type]  # None: dlt's default
        import_schema_path=str(schemas_dir / "import"),
        export_schema_path=str(schemas_dir / "export"),
    )


def named_duckdb_file(destination: Any, pipeline_name: str) -> str | None:
    """The DuckDB file `destination` loads into, where the code names it or dlt's default
    applies (`<pipeline_name>.duckdb`); None for another destination or a file configured
    in `.dlt/` or the environment."""
    name = destination if isinstance(destination, str) else None
    name = name or getattr(destination, "destination_name", None) or "duckdb"
    if name != "duckdb":
        return None
    params = getattr(destination, "config_params", None) or {}
    credentials = params.get("credentials")
    if credentials is None:
        configured: Any = dlt.config.get("destination.duckdb.credentials")
        return f"{pipeline_name}.duckdb" if configured is None else None
    database = getattr(credentials, "database", credentials)
    return database if isinstance(database, str) else None


def pipeline_line(pipeline: dlt.Pipeline) -> str:
    """The summary line naming the pipeline, its folder and dlt's command to inspect it."""
    folder = Path(pipeline.pipelines_dir).resolve()
    return (
        f"pipeline {pipeline.pipeline_name} in {folder} (inspect it: dlt pipeline "
        f"--pipelines-dir {shlex.quote(str(folder))} {pipeline.pipeline_name} info | trace"
        " | show)"
    )


def check_dataset_name(name: str) -> None:
    """A dataset name dlt keeps as it is: any other is renamed in some places and not in
    others (the staging dataset, the reconciliation's queries)."""
    normalised = NamingConvention().normalize_identifier(name)
    if name != normalised:
        raise ConfigError(
            "dataset",
            name,
            "a plain lower-case name: letters, digits and "
            "single underscores, not starting with a digit nor ending with an "
            f"underscore (dlt would make it `{normalised}`): pass --dataset NAME",
        )


@system_pool_while_running()
def run_load(
    pipeline: dlt.Pipeline,
    views: bool = True,
    report: RunReport | None = None,
    restore: bool = True,
    adopt: bool = True,
    **source_args: Any,
) -> LoadResult:
    """Extract, normalise and load once; a crashed run's packages are finished first.

    `report` collects the run's counts (a new one when not given). `restore=False` skips
    asking the destination for newer state: a backfill asks once, before its first window
    (its later windows follow its own loads). `adopt=False`: the run follows a backfill's
    windows, the first of which gave an older version's dataset the source column.
    """
    report = report if report is not None else RunReport()
    try:
        extracted = extract_run(pipeline, report, restore=restore, **source_args)
        normalize_run(extracted, adopt=adopt)
        # dlt keeps the package; one process at a time into a shared warehouse
        info = load_now(pipeline, extracted.wait, after_load(extracted))
        report.load_ids = list(info.loads_ids)
        if views and has_views(pipeline):
            waiting(lambda: create_views(pipeline), extracted.wait, VIEWS_LATER)
    finally:
        report.finish()  # the run's duration ends here, not when its report is written
    return LoadResult(info, report, pipeline)


@dataclass
class ExtractedRun:
    """A run's package, extracted and not yet normalized."""

    pipeline: dlt.Pipeline
    report: RunReport
    settings: RepoAnalyticsConfiguration
    wait: float  # the longest wait for a DuckDB file another process holds
    legacy: bool  # the dataset is an older version's (see pipelines/runs/upgrade.py)


def extract_run(
    pipeline: dlt.Pipeline,
    report: RunReport,
    restore: bool = True,
    settle: bool = True,
    **source_args: Any,
) -> ExtractedRun:
    """Extract the source with `source_args` into a package of `pipeline`. `settle=False`
    leaves pending packages alone: a backfill's window loading in the background has one."""
    settings = run_settings(source_args)
    wait = lock_wait(settings)  # every opening of a DuckDB file waits
    source_args = without_file_keys(source_args)
    if settle:
        settle_pending(pipeline, wait)
    if restore:
        restore_state(pipeline, wait)
    import_once(pipeline)
    pipeline.activate()  # the source function reads the active pipeline's state
    legacy = legacy_pipeline(pipeline)  # before this run records its source
    run = RunContext(report, **{k: source_args.pop(k) for k in RUN_KEYS if k in source_args})
    source = repo_analytics(run=run, **source_args)
    with run_config(pipeline):
        pipeline.extract(source, loader_file_format="parquet", **run_options(pipeline))
    # what the reads freed (their pages, the keys they held) back to the system before the
    # load, which a backfill runs beside its next read (`docs/decisions/memory-allocators.md`)
    pa.default_memory_pool().release_unused()
    import_once(pipeline)  # a first run's pin, written by this extract (its schema as it is)
    return ExtractedRun(pipeline, report, settings, wait, legacy)


def normalize_run(extracted: ExtractedRun, adopt: bool = True) -> None:
    """Normalize the run's package; with `adopt`, a dataset of an older version gets the
    source column (a backfill's later windows need not look again: see `WindowLoads`)."""
    pipeline = extracted.pipeline
    with run_config(pipeline):
        pipeline.normalize()
    source_id = extracted.report.source
    if adopt and source_id is not None:
        waiting(
            lambda: adopt_rows(pipeline, source_id, extracted.legacy),
            extracted.wait,
            EXTRACTED_KEPT,
        )


def after_load(extracted: ExtractedRun) -> Callable[[], object] | None:
    """What follows the run's load, in the load's thread: on Delta tables, the pruning of the
    children a parent's new rows replaced; elsewhere nothing. Made before the load, in the
    calling thread (it reads the pipeline's live schema)."""
    return stale_children_pruning(extracted.pipeline, str(extracted.settings.edition))


def run_settings(source_args: dict[str, Any]) -> RepoAnalyticsConfiguration:
    """The settings a run of the source with `source_args` reads: the arguments that are
    settings over `.dlt/` and the environment (the pipelines' own arguments left out)."""
    fields = RepoAnalyticsConfiguration.get_resolvable_fields()
    return resolve_settings({k: v for k, v in source_args.items() if k in fields and v is not None})


@contextlib.contextmanager
def run_config(pipeline: dlt.Pipeline) -> Iterator[None]:
    """dlt's settings our runs need, for the steps of `pipeline` run inside, and only for
    them: in the section of the pipeline's name (`pipeline_setting`), set in dlt's in-memory
    config on entry and unset on exit (`dlt.config.values`).

    - Every row carries the id of the load that wrote it (`_dlt_load_id`, which dlt adds to
      Arrow tables on request): lineage for users, and what replaces a parent's child list
      on Delta tables (`pipelines/destinations/delta/children.py`).
    - dlt extracts the resources one after another (`extract.next_item_mode` `fifo`), not an
      item of each in turn (`round_robin`, its default), unless configured otherwise. Each
      resource reads its scopes in threads of its own and holds their pages in a bounded
      queue; in turn, every started resource kept its threads and full queue alive, while
      the requests were held to `concurrency` anyway by the host's gate.
    - dlt's extract polls every `EXTRACT_POLL_SECONDS` for items of resources not ready yet,
      not at its longer default, unless configured otherwise: every extract ends with one
      poll once its last resource is done, and dlt extracts a window's package and then its
      state, each between a window's last page and the next window's first request
      (`docs/decisions/dlt-run-overheads.md`).

    A setting configured for every pipeline or for this one (a variable, `.dlt/config.toml`)
    wins over the last two."""
    values: dict[str, Any] = {pipeline_setting(pipeline, ADD_LOAD_ID): True}
    for key, value in ((NEXT_ITEM_MODE, "fifo"), (FUTURES_POLL_INTERVAL, EXTRACT_POLL_SECONDS)):
        scoped = pipeline_setting(pipeline, key)
        if dlt.config.get(key) is None and dlt.config.get(scoped) is None:
            values[scoped] = value
    with dlt.config.values(values):
        yield


def pipeline_setting(pipeline: dlt.Pipeline, key: str) -> str:
    """dlt's setting `key` in the section of `pipeline`'s name: dlt reads it there first for
    that pipeline's steps, and never for a pipeline of another name (another dlt pipeline of
    the process, a notebook's, a Dagster code location's)."""
    return f"{pipeline.pipeline_name}.{key}"


def settle_pending(pipeline: dlt.Pipeline, wait: float | None = None) -> None:
    """Finish the packages a crashed run left behind, rather than drop them: a package exists
    only after a whole extract, and holds its data with the state that goes with it (cursors,
    finished windows). Loading it makes both true together; dropping it after part of it was
    loaded could leave state in the destination that claims data that is not there. `wait`:
    the longest wait for a DuckDB file another process holds (None: the setting's default)."""
    drop_committed_extracts(pipeline)
    archive_completed_loads(pipeline, wait)
    if pipeline.list_extracted_load_packages():
        with run_config(pipeline):
            pipeline.normalize()
    if pipeline.list_normalized_load_packages():
        deduplicate_interrupted(pipeline)  # a copy may have run twice: see the module
        load_now(pipeline, lock_wait({WAIT_KEY: wait}), kept=PENDING_KEPT)


def drop_committed_extracts(pipeline: dlt.Pipeline) -> None:
    """Delete the extracted copy of a package that was already normalized: the second half of
    dlt's normalize commit, which renames the package into the load folder and then deletes
    the extracted copy. A run killed between the two leaves the package in both places;
    normalizing it again would fail on every later run (its folder is taken), and the copy may
    be partly deleted. The normalized (or loaded) package is the whole one."""
    committed = {
        *pipeline.list_normalized_load_packages(),
        *pipeline.list_completed_load_packages(),
    }
    leftovers = committed.intersection(pipeline.list_extracted_load_packages())
    if leftovers:
        extracted = extracted_packages(pipeline)
        for load_id in sorted(leftovers):
            extracted.delete_package(load_id)


def archive_completed_loads(pipeline: dlt.Pipeline, wait: float | None = None) -> None:
    """Move a package whose load completed into the loaded folder: the rest of dlt's load
    commit, which records the load in the destination (`_dlt_loads`), writes the package's
    completed marker, then renames the package out of load/normalized. Killed after the
    marker, loading the package again recorded its load twice and then failed on every later
    run (dlt refuses to complete a package twice); killed before the marker, it recorded the
    load twice (two `_dlt_loads` rows for one load). `wait`: as in `settle_pending`."""
    storage = load_storage(pipeline)
    packages = storage.normalized_packages
    for load_id in pipeline.list_normalized_load_packages():
        # dlt records a load only after its jobs all ran
        jobs_done = not packages.list_new_jobs(load_id) and not packages.list_started_jobs(load_id)
        if (
            jobs_done
            and not packages.is_package_completed(load_id)
            and waiting(
                functools.partial(load_recorded, pipeline, load_id),
                lock_wait({WAIT_KEY: wait}),
                PENDING_KEPT,
            )
        ):
            packages.complete_loading_package(load_id, "loaded")
        if packages.is_package_completed(load_id):
            storage.storage.rename_tree(
                storage.get_normalized_package_path(load_id),
                storage.get_loaded_package_path(load_id),
            )
            storage.maybe_remove_completed_jobs(load_id)


def load_recorded(pipeline: dlt.Pipeline, load_id: str) -> bool:
    """Whether the destination recorded the load `load_id`. A file destination records a
    load in a file named by its id, which a second record only writes again: nothing to ask
    there."""
    if pipeline.destination.destination_name == "filesystem":
        return False
    with pipeline.sql_client() as client:
        loads = client.make_qualified_table_name(pipeline.default_schema.loads_table_name)
        try:
            rows = client.execute_sql(f"SELECT 1 FROM {loads} WHERE load_id = %s", load_id)
        except DatabaseUndefinedRelation:  # nothing was ever recorded there
            return False
    return bool(rows)


def restore_state(pipeline: dlt.Pipeline, wait: float | None = None) -> bool:
    """State from the destination when it is newer than the working folder's (a lost or
    stale folder), as `pipeline.run` would; nothing to restore before the first load. A
    DuckDB file another process holds is waited for (`wait`, as in `settle_pending`).
    Returns whether the run loads into a DuckDB file it creates (`new_duckdb_file`).

    The pinned schema is imported first (`import_once`): dlt's sync otherwise parses its
    YAML twice more (`docs/decisions/dlt-run-overheads.md`). A state restored from the
    destination brings the destination's schemas, which are then compared with the pin
    again, as before."""
    pinned = import_once(pipeline)
    if new_duckdb_file(pipeline):
        return True
    before = pipeline.state.get("_version_hash")
    try:
        waiting(pipeline.sync_destination, lock_wait({WAIT_KEY: wait}), NOTHING_EXTRACTED)
    except DuckDBFileHeld:
        raise
    except Exception:  # noqa: BLE001 - the dataset does not exist yet
        pass
    if pinned is not None and pipeline.state.get("_version_hash") != before:
        pipeline.schemas.config.import_schema_path = pinned
        import_once(pipeline, again=True)
    return False


def new_duckdb_file(pipeline: dlt.Pipeline) -> bool:
    """Whether a pipeline that never loaded loads into a DuckDB file that does not exist
    yet: it holds no state to restore, and opening it would create it (a first run that then
    failed, say on a refused token, left an empty file behind). A pipeline that has loaded
    is synced whatever the file: dlt resets its state when its dataset is gone."""
    if not pipeline.first_run or pipeline.destination.destination_name != "duckdb":
        return False
    database = pipeline.sql_client().credentials.database
    return isinstance(database, str) and database != ":memory:" and not Path(database).exists()


def import_once(pipeline: dlt.Pipeline, again: bool = False) -> str | None:
    """Import the pinned schema now (when new or changed), and not again in this process.

    dlt compares the import file with the stored schema each time it reads the schema from
    the working folder, several times per load, parsing the YAML every time: measured, a
    third of a year's backfill's Python time went there (`docs/decisions/dlt-run-overheads.md`).
    A run lasts seconds to hours in one process, in which the file does not change; the next
    run reads it again. Without a pinned file yet (the first run) dlt keeps the path, to
    write the pin when the run's first step ends; `extract_run` calls this again after its
    extract, so the pin just written is not parsed again by the first window's normalize and
    load. A schema dlt already holds was read through the import folder (`dlt.pipeline` reads
    the default one), and is not read again unless `again` (the destination's schemas
    replaced it). Returns the
    import folder it unset, if it did."""
    config = pipeline.schemas.config
    folder = config.import_schema_path
    if not folder:
        return None
    pinned = Path(folder) / f"{SCHEMA_NAME}.schema.{config.external_schema_format}"
    if not pinned.is_file():
        return None
    try:
        live = cast(LiveSchemaStorage, pipeline.schemas).live_schemas  # what dlt.pipeline made
        if again or SCHEMA_NAME not in live:
            pipeline.schemas.load_schema(SCHEMA_NAME)
    except SchemaNotFoundError:
        pass  # nothing pinned under this name
    config.import_schema_path = None  # type: ignore[assignment]
    return folder


def run_options(pipeline: dlt.Pipeline) -> dict[str, Any]:
    """Files on a filesystem (Parquet) merge only as Delta tables: ask for that format."""
    if pipeline.destination.destination_name == "filesystem":
        return {"table_format": "delta"}
    return {}
