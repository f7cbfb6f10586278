"""The global options of the command line turned into what a run needs: the destination,
the pipeline, the source's settings; each checked before the first request."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.cli.parser import (
    flag_settings,
)
from pipelines.destinations.duckdb import DEFAULT_DUCKDB, EARLIER_DEFAULT_DUCKDB

if TYPE_CHECKING:
    pass


def check_before_run(args: argparse.Namespace, dates: bool = True) -> None:
    """Every setting of a run checked before anything is written or requested: the source's
    values (flags over config) as the source will check them, then the destination, the
    DuckDB path and the dataset name (`make_cli_pipeline` checks those first). `dates=False`
    for a backfill, whose windows set the dates."""
    from sources.repo_analytics.editions import edition_spec
    from sources.repo_analytics.reading.plan import build_plan

    values = resolved_source_args(args)
    spec = edition_spec(values["edition"])  # also one set in .dlt/ or the environment
    if not dates:
        values = {k: v for k, v in values.items() if k not in ("start_date", "end_date")}
    build_plan(spec, values)
    from pipelines.runs.load import check_dataset_name

    cli_destination(args)
    check_dataset_name(args.dataset)
    check_file_settings(args, values)


def check_file_settings(args: argparse.Namespace, values: Any) -> None:
    """The DuckDB file's own settings: the lock wait, and the published copy's path (only
    for the DuckDB destination)."""
    from pipelines.destinations.duckdb.file import PUBLISH_KEY, lock_wait, publish_target
    from pipelines.destinations.duckdb.memory import memory_limit
    from sources.repo_analytics import ConfigError

    lock_wait(values)
    memory_limit(values)
    if values.get(PUBLISH_KEY) and args.destination != "duckdb":
        raise ConfigError(
            PUBLISH_KEY,
            values[PUBLISH_KEY],
            f"no value with --destination {args.destination}: it copies the DuckDB file",
        )
    publish_target(values.get(PUBLISH_KEY), args.duckdb, args.dataset)


def resolved_source_args(args: argparse.Namespace) -> dict[str, Any]:
    """Flags over dlt config (.dlt/, environment), resolved through the source's spec: what
    `load` would use."""
    from sources.repo_analytics.reading.plan import resolve_settings

    return dict(resolve_settings(flag_settings(args)))


def make_cli_pipeline(args: argparse.Namespace) -> Any:
    from pipelines.runs.load import make_pipeline

    destination = cli_destination(args)
    if args.destination == "duckdb":
        Path(args.duckdb).parent.mkdir(parents=True, exist_ok=True)
    pipeline = make_pipeline(
        pipeline_name=args.pipeline_name,
        destination=destination,
        dataset_name=args.dataset,
        pipelines_dir=args.pipelines_dir,
        schemas_dir=Path(args.schemas_dir) if args.schemas_dir else None,
    )
    from pipelines.destinations.warehouse import check_warehouse

    check_warehouse(pipeline)  # a server destination: credentials and connection, first
    return pipeline


def cli_destination(args: argparse.Namespace) -> Any:
    """The destination of `--destination`, checked: a name dlt knows, and for DuckDB a file
    path that can be written (checked here: DuckDB would fail only when loading)."""
    import dlt
    from dlt.common.destination import Destination
    from dlt.common.destination.exceptions import UnknownDestinationModule

    from sources.repo_analytics import ConfigError

    if args.destination == "duckdb":
        from pipelines.destinations.duckdb.memory import configured_memory_limit, duckdb_destination

        check_duckdb_path(args.duckdb, args.dataset)
        # absolute: dlt would resolve a relative path against the folder of the pipeline's
        # first run (kept in its state), not this run's working folder
        path = str(Path(args.duckdb).absolute())
        limit = configured_memory_limit(flag_settings(args))
        return duckdb_destination(path, limit, args.pipeline_name)
    if args.destination == "parquet":
        return dlt.destinations.filesystem(bucket_url=local_absolute(args.parquet_dir))
    try:
        return Destination.from_reference(args.destination)
    except UnknownDestinationModule:
        known = sorted(set(dlt.destinations.__all__) - {"destination"})
        raise ConfigError(
            "destination",
            args.destination,
            "duckdb, parquet, a dlt destination ("
            + ", ".join(known)
            + ") or a named destination configured in .dlt/",
        ) from None


def local_absolute(location: str) -> str:
    """A folder path made absolute against the working folder; a URL (`s3://...`,
    `file:///...`) as it is."""
    return location if "://" in location else str(Path(location).absolute())


def check_duckdb_path(text: str, dataset: str) -> None:
    """A file, not a folder, in a folder that exists and can be written or can be made; its
    catalog is not the dataset's name; and not today's default while the earlier default's
    file is here (a run would start a new, empty file beside the data)."""
    import os

    from pipelines.destinations.duckdb.file import check_catalog
    from sources.repo_analytics import ConfigError

    path = Path(text).absolute()
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    writable = folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)
    if path.is_dir() or not writable or (path.exists() and not os.access(path, os.W_OK)):
        raise ConfigError(
            "duckdb",
            text,
            "the path of a file (not a folder) in a writable "
            "folder, made when missing: pass --duckdb FILE",
        )
    check_catalog("duckdb", text, dataset)
    if text == DEFAULT_DUCKDB and not path.exists() and Path(EARLIER_DEFAULT_DUCKDB).is_file():
        raise ConfigError(
            "duckdb",
            f"{text} (the default)",
            f"the file of earlier runs: {EARLIER_DEFAULT_DUCKDB}, the default before DuckDB 2, "
            f"is in this folder; rename it to {DEFAULT_DUCKDB} to load into it, or pass "
            "--duckdb FILE",
        )


def publish_copy(args: argparse.Namespace) -> dict[str, Any] | None:
    """The DuckDB file copied onto `publish_duckdb_to` for readers, when set; what was
    published (None: not asked)."""
    from pipelines.destinations.duckdb.file import PUBLISH_KEY, lock_wait, publish, publish_target

    values = resolved_source_args(args)
    target = publish_target(values.get(PUBLISH_KEY), args.duckdb, args.dataset)
    if target is None:
        return None
    published = publish(args.duckdb, target, lock_wait(values))
    print(
        f"published a copy for readers: {published.path} ({published.bytes:,} bytes, "
        f"{published.seconds:.2f} s)"
    )
    return published.as_dict()


def telemetry_only_where_asked() -> None:
    """dlt's anonymous usage telemetry only where the user set `runtime.dlthub_telemetry`
    (`.dlt/config.toml`, `~/.dlt/config.toml`, RUNTIME__DLTHUB_TELEMETRY): the project's
    `.dlt/config.toml` turns it off, and a run from any other folder, as from cron, sent it
    (dlt's default: an event a step, each waiting to connect where egress is dropped). Reading the
    setting starts dlt's runtime, telemetry included: it is stopped
    again at once, before any pipeline step could send an event, and later runtimes read it
    as off."""
    import dlt
    from dlt.common.runtime.telemetry import stop_telemetry

    if dlt.config.get("runtime.dlthub_telemetry") is None:
        dlt.config["runtime.dlthub_telemetry"] = False
        stop_telemetry()
