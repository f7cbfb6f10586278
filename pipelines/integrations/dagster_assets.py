"""Backfill windows as partitions of Dagster assets: `dagster dev -m
pipelines.integrations.dagster_assets`
(docs/dagster.md).

One asset per dlt resource of the source, named after the edition and the resource
(`repo_analytics/server_commits_repository`: the self-hosted repository-level commit list,
in the group of its edition), made by dagster-dlt's `@dlt_assets` and partitioned in time
(`day`, `week` or `month` windows, UTC).
A partition's run loads exactly its window, as one window of `repo-analytics backfill` does,
on a pipeline with a working folder of its own (partitions run at once in separate processes),
then reconciles the window with the API's statistics. A backfill is Dagster's partition
backfill: one run per partition (`BackfillPolicy.multi_run(1)`), as many at once as the run
coordinator allows; into Postgres their loads take turns (`pipelines/destinations/warehouse.py`),
their
reads do not. Rerunning a partition reads the window again; merge keys keep it free of
duplicates. Dagster records which partitions are done, so the window records in dlt's state
are not consulted.

Settings come from dlt config as everywhere else: the source's (`[sources.repo_analytics]`,
`SOURCES__REPO_ANALYTICS__...`), the destination's credentials (`DESTINATION__POSTGRES__
CREDENTIALS`), and the partitioning's in `[repo_analytics_dagster]` (`PartitionsSettings`).
Nothing is read or resolved at import: Dagster calls `defs` when it loads the code location.
No `from __future__ import annotations` here: Dagster reads the asset function's annotations.
"""

import atexit
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

try:
    import dagster as dg
    from dagster_dlt import DagsterDltTranslator, dlt_assets
    from dagster_dlt.translator import DltResourceTranslatorData
except ModuleNotFoundError as missing:
    raise ModuleNotFoundError(
        f"the Dagster integration needs its extra (no module `{missing.name}`): "
        'pip install -e ".[dagster]"'
    ) from None
import dlt
from dlt.common.configuration import configspec, resolve_configuration
from dlt.common.configuration.specs import BaseConfiguration
from dlt.common.destination import Destination

from pipelines.destinations.duckdb import DEFAULT_DUCKDB
from pipelines.destinations.duckdb.memory import configured_memory_limit, duckdb_destination
from pipelines.reconcile.check import planned_unskipped, reconcile_pipeline
from pipelines.runs.backfill import signature
from pipelines.runs.load import LoadResult, make_pipeline, run_load
from sources.repo_analytics.editions import edition_spec
from sources.repo_analytics.errors import ConfigError
from sources.repo_analytics.reading.plan import build_plan, resolve_settings

SECTION = "repo_analytics_dagster"
GRAINS = ("day", "week", "month")
KEY_PREFIX = "repo_analytics"


@configspec
class PartitionsSettings(BaseConfiguration):
    """How the windows are cut and where they load; `[repo_analytics_dagster]` in `.dlt/`,
    or `REPO_ANALYTICS_DAGSTER__<KEY>`."""

    start: str | None = None  # the first partition's day, e.g. 2025-06-01 (required)
    grain: str = "week"  # day | week (Monday to Monday) | month, UTC
    destination: str = "postgres"  # a dlt destination, credentials as dlt documents
    # destination duckdb: the file (default: the one dlt is configured with, else
    # repo-analytics.duckdb in the working folder, as the command line's)
    duckdb: str | None = None
    dataset: str = "repo_analytics"
    pipeline_name: str = "repo_analytics"
    pipelines_dir: str | None = None  # partitions' working folders (default: dlt's own)
    end: str | None = None  # after the last partition (default: up to the current one)


def resolve_partitions(explicit: dict[str, Any] | None = None) -> PartitionsSettings:
    settings = resolve_configuration(
        PartitionsSettings(), sections=(SECTION,), explicit_value=explicit or {}
    )
    if not settings.start:
        raise ConfigError(
            "start",
            None,
            f"the first partition's day: set [{SECTION}] start or "
            f"{SECTION.upper()}__START (e.g. 2025-06-01)",
        )
    if settings.grain not in GRAINS:
        raise ConfigError("grain", settings.grain, "one of " + ", ".join(GRAINS))
    return settings


def window_partitions(settings: PartitionsSettings) -> dg.TimeWindowPartitionsDefinition:
    """UTC windows of the chosen grain from `start` (weeks start on Monday)."""
    bounds: dict[str, Any] = {"start_date": settings.start, "end_date": settings.end}
    if settings.grain == "day":
        return dg.DailyPartitionsDefinition(**bounds, timezone="UTC")
    if settings.grain == "week":
        return dg.WeeklyPartitionsDefinition(**bounds, day_offset=1, timezone="UTC")
    return dg.MonthlyPartitionsDefinition(**bounds, timezone="UTC")


def asset_key(edition: str, resource: str) -> dg.AssetKey:
    """A resource's asset key, readable where the UI shows only its last part: the edition
    and the resource (`commits.repository` of `server` -> `repo_analytics/
    server_commits_repository`)."""
    return dg.AssetKey([KEY_PREFIX, f"{edition}_{resource.replace('.', '_')}"])


@dataclass
class ResourceTranslator(DagsterDltTranslator):
    """Asset keys from the edition and resource names, grouped by edition, with no upstream
    assets: the API is not one."""

    edition: str = "server"

    def get_asset_spec(self, data: DltResourceTranslatorData) -> dg.AssetSpec:
        spec = super().get_asset_spec(data)
        return spec.replace_attributes(
            key=asset_key(self.edition, data.resource.name),
            deps=[],
            group_name=f"{KEY_PREFIX}_{self.edition}",
        )


def resource_shapes(source_args: dict[str, Any]) -> Any:
    """A dlt source with the names and tables of the resources a run of these settings
    makes, and no data: what `@dlt_assets` builds the asset specs from, without a request
    (the real source discovers its scopes over HTTP when it is made)."""
    settings = resolve_settings(source_args)
    spec = edition_spec(settings.edition)
    plan = build_plan(spec, {**settings, "backfill": True})

    @dlt.source(name="repo_analytics")
    def shapes() -> Iterator[Any]:
        for endpoint in plan.endpoints:
            yield dlt.resource(iter(()), name=endpoint.name, table_name=endpoint.table)

    return shapes()


def partition_pipeline(settings: PartitionsSettings, key: str) -> dlt.Pipeline:
    """The partition's pipeline: the shared name and dataset, a working folder and schema
    folder of its own (runs of other partitions may be going on at once)."""
    base = Path(settings.pipelines_dir or Path.home() / ".dlt" / "pipelines")
    return pipeline_in(settings, base / "partitions" / key)


def pipeline_in(settings: PartitionsSettings, folder: Path) -> dlt.Pipeline:
    """The shared name, destination and dataset, with `folder` for working files and schemas."""
    return make_pipeline(
        pipeline_name=settings.pipeline_name,
        destination=partition_destination(settings),
        dataset_name=settings.dataset,
        pipelines_dir=str(folder),
        schemas_dir=folder / "schemas",
    )


def partition_destination(settings: PartitionsSettings) -> Any:
    """The destination of `settings`; DuckDB's file as the command line's (`duckdb`, or the
    one configured for dlt, else repo-analytics.duckdb in the working folder: dlt's own
    default, `<pipeline name>.duckdb`, is named like the dataset, which DuckDB refuses)."""
    if settings.destination != "duckdb":
        return Destination.from_reference(settings.destination)
    configured: Any = dlt.config.get("destination.duckdb.credentials")
    if settings.duckdb is None and configured is not None:
        return Destination.from_reference("duckdb")
    path = str(Path(settings.duckdb or DEFAULT_DUCKDB).absolute())
    return duckdb_destination(path, configured_memory_limit({}), settings.pipeline_name)


def load_window(
    pipeline: dlt.Pipeline, start: datetime, end: datetime, source_args: dict[str, Any]
) -> LoadResult:
    """Exactly [start, end) of every scope, as one backfill window (the CSV exports too); the
    canonical views made after its load (on a warehouse under the dataset's load lock)."""
    window = f"partition {start.isoformat()}/{end.isoformat()}"
    return run_load(
        pipeline,
        start_date=start.isoformat(),
        end_date=end.isoformat(),
        backfill_window={"key": window, "signature": signature(source_args)},
        **source_args,
    )


def specs_pipeline(settings: PartitionsSettings) -> dlt.Pipeline:
    """The pipeline `@dlt_assets` describes the assets with (it loads nothing), in a folder of
    this process's own, removed at exit: Dagster builds the definitions in every run's process,
    and dlt writes a pipeline's working folder when it makes one, so processes sharing one
    folder raced (a run failed with FileNotFoundError on the state file)."""
    folder = Path(tempfile.mkdtemp(prefix="repo-analytics-dagster-specs-"))
    atexit.register(shutil.rmtree, folder, True)
    return pipeline_in(settings, folder)


def window_assets(
    settings: PartitionsSettings, source_args: dict[str, Any] | None = None
) -> dg.AssetsDefinition:
    """The partitioned assets: one per resource, materialised together per window."""
    explicit = dict(source_args or {})
    edition = str(resolve_settings(explicit).edition)
    shapes = resource_shapes(explicit)
    resources = {asset_key(edition, name): name for name in shapes.resources}

    @dlt_assets(
        dlt_source=shapes,
        dlt_pipeline=specs_pipeline(settings),
        name="repo_analytics_windows",
        dagster_dlt_translator=ResourceTranslator(edition),
        partitions_def=window_partitions(settings),
        backfill_policy=dg.BackfillPolicy.multi_run(max_partitions_per_run=1),
    )
    def repo_analytics_windows(context: dg.AssetExecutionContext) -> Iterator[dg.MaterializeResult]:
        window = context.partition_time_window
        start, end = window.start.astimezone(UTC), window.end.astimezone(UTC)
        pipeline = partition_pipeline(settings, context.partition_key)
        context.log.info(f"window [{start.isoformat()}, {end.isoformat()})")
        result = load_window(pipeline, start, end, explicit)
        report = result.report
        check = reconcile_pipeline(
            pipeline,
            [(start, end)],
            dict(resolve_settings(explicit)),
            result.load_ids,
            planned=planned_unskipped([report]),
        )
        for key in context.selected_asset_keys:
            name = resources[key]
            rows = sum(c.rows for label, c in report.counts.items() if label.startswith(name + ":"))
            yield dg.MaterializeResult(
                asset_key=key,
                metadata={
                    "window": f"[{start.isoformat()}, {end.isoformat()})",
                    "rows_read": rows,
                    "load_ids": ", ".join(result.load_ids),
                    "reconciliation": "; ".join(check.summary()),
                },
            )
        problems = [f"skipped {s.resource}: {s.kind}" for s in report.skips]
        problems += [line for line in check.summary() if not check.ok]
        if problems:  # the window is not complete or not true: run it again later
            raise dg.Failure(f"window {context.partition_key}: " + "; ".join(problems[:10]))

    return repo_analytics_windows


def build_definitions(
    partitions: dict[str, Any] | None = None, source_args: dict[str, Any] | None = None
) -> dg.Definitions:
    """Definitions of the partitioned assets; `partitions` and `source_args` win over dlt
    config (tests pass them; a deployment sets `.dlt/` or the environment)."""
    settings = resolve_partitions(partitions)
    return dg.Definitions(assets=[window_assets(settings, source_args)])


@dg.definitions
def defs() -> dg.Definitions:
    """What `dagster dev -m pipelines.integrations.dagster_assets` loads."""
    return build_definitions()
