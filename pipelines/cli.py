"""`repo-analytics`: the one command. Each subcommand is a thin layer over a function."""

from __future__ import annotations

import argparse
import gc
import logging
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.cli_parser import (
    DEFAULT_DUCKDB,
    EARLIER_DEFAULT_DUCKDB,
    build_parser,
    flag_settings,
)
from pipelines.malloc import limit_malloc_arenas, system_arrow_pool

if TYPE_CHECKING:
    from pipelines.reconcile_prefetch import StatisticsPrefetch

EXIT_OK, EXIT_FATAL, EXIT_CONFIG, EXIT_PARTIAL, EXIT_STOPPED, EXIT_MISMATCH = 0, 1, 2, 3, 4, 5
EXIT_HELD = 6  # the DuckDB file was held by another process past duckdb_lock_wait_seconds


def load_command(args: argparse.Namespace) -> int:
    from pipelines.load import run_load
    from pipelines.progress import make_progress
    from pipelines.run_records import finish_run, start_run
    from sources.repo_analytics import RunReport

    overrides = flag_settings(args)
    check_before_run(args)
    report = RunReport()
    pipeline = make_cli_pipeline(args)
    run = start_run(pipeline, "load", resolved_source_args(args))
    with make_progress(args.progress, "load") as progress:
        progress.watch(report)
        result = run_load(pipeline, report=report, **overrides)
    print_summary(result)
    print_pipeline(result.pipeline)
    check = reconciled(args, result.pipeline, [report], result.load_ids)
    held = held_cursors(args, result.pipeline, report, check)
    payload = {
        "load": report.as_dict(),
        "reconciliation": check.as_dict() if check else None,
        "held_cursors": held,
    }
    finish_run(run, [report], check, payload)  # before the copy: readers see the verdict
    write_report(args, {**payload, "published": publish_copy(args)})
    return exit_code(report.partial, check)


def reconciled(
    args: argparse.Namespace,
    pipeline: Any,
    reports: list[Any],
    run_loads: Iterable[str],
    prefetched: StatisticsPrefetch | None = None,
    pending: Sequence[tuple[Any, Any]] = (),
) -> Any:
    """What the runs read, reconciled with the API's statistics and printed; None when
    switched off. Reconciliation never fails a load: a host that refuses it is a note.
    `run_loads`: the ids of the runs' loads, whose statistics rows are not asked again;
    `prefetched`: the statistics a backfill asked ahead; `pending`: windows an earlier run
    read whose reconciliation never ran, checked too."""
    from pipelines.reconcile import Reconciliation, reconcile_pipeline
    from pipelines.reconcile_model import read_windows
    from sources.repo_analytics import RepoAnalyticsError

    windows = sorted({*read_windows(reports), *pending})
    if args.no_reconcile or not windows:
        return None
    try:
        check = reconcile_pipeline(
            pipeline, windows, resolved_source_args(args), frozenset(run_loads), prefetched
        )
    except RepoAnalyticsError as error:
        check = Reconciliation(0, [], [f"not run: {error}"])
    check.skipping(reports)
    for line in check.summary():
        print(line)
    return check


def held_cursors(args: argparse.Namespace, pipeline: Any, report: Any, check: Any) -> int:
    """A nightly whose reconciliation found a mismatch keeps its cursors at the start of the
    range that differs (`pipelines/window_ledger.py`); how many it held, said in a line."""
    from pipelines.duckdb_file import lock_wait
    from pipelines.window_ledger import hold_cursors

    held = hold_cursors(pipeline, report, check, lock_wait(resolved_source_args(args)))
    if held:
        start = report.read_range[0].isoformat()
        print(
            f"cursors held: {held} scopes keep their cursor at {start}, the start of the range "
            "that differs: the next run reads it again"
        )
    return held


def exit_code(partial: bool, check: Any) -> int:
    """5 when what landed differs from the API, else 3 when scopes were skipped, else 0."""
    if check is not None and not check.ok:
        return EXIT_MISMATCH
    return EXIT_PARTIAL if partial else EXIT_OK


def root_cause(error: BaseException) -> BaseException:
    """The first of our own errors in the chain dlt wraps around it, else the innermost."""
    from sources.repo_analytics import RepoAnalyticsError

    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        if isinstance(current, RepoAnalyticsError):
            return current
        seen.append(current)
        current = getattr(current, "exception", None) or current.__cause__ or current.__context__
    return seen[-1]


def is_missing_config(error: BaseException) -> bool:
    """A required setting not set (dlt's `ConfigFieldMissingException`, with its `fields`)."""
    return type(error).__name__ == "ConfigFieldMissingException"


def config_message(error: BaseException) -> str:
    if is_missing_config(error):
        fields = getattr(error, "fields", []) or ["?"]
        names = ", ".join(f"`{f}`" for f in fields)
        envs = ", ".join(f"SOURCES__REPO_ANALYTICS__{f.upper()}" for f in fields)
        return (
            f"config error: {names} not set: put it in .dlt/config.toml (secrets in "
            f".dlt/secrets.toml) under [sources.repo_analytics], or set {envs}"
        )
    return f"config error: {error}"


def check_before_run(args: argparse.Namespace, dates: bool = True) -> None:
    """Every setting of a run checked before anything is written or requested: the source's
    values (flags over config) as the source will check them, then the destination, the
    DuckDB path and the dataset name (`make_cli_pipeline` checks those first). `dates=False`
    for a backfill, whose windows set the dates."""
    from sources.repo_analytics.editions import edition_spec
    from sources.repo_analytics.plan import build_plan

    values = resolved_source_args(args)
    spec = edition_spec(values["edition"])  # also one set in .dlt/ or the environment
    if not dates:
        values = {k: v for k, v in values.items() if k not in ("start_date", "end_date")}
    build_plan(spec, values)
    from pipelines.load import check_dataset_name

    cli_destination(args)
    check_dataset_name(args.dataset)
    check_file_settings(args, values)


def check_file_settings(args: argparse.Namespace, values: Any) -> None:
    """The DuckDB file's own settings: the lock wait, and the published copy's path (only
    for the DuckDB destination)."""
    from pipelines.duckdb_file import PUBLISH_KEY, lock_wait, publish_target
    from pipelines.duckdb_memory import memory_limit
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


def publish_copy(args: argparse.Namespace) -> dict[str, Any] | None:
    """The DuckDB file copied onto `publish_duckdb_to` for readers, when set; what was
    published (None: not asked)."""
    from pipelines.duckdb_file import PUBLISH_KEY, lock_wait, publish, publish_target

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


def fail(code: int, message: str) -> int:
    print(f"repo-analytics: {message.splitlines()[0] if message else 'failed'}", file=sys.stderr)
    return code


def print_summary(result: Any) -> None:
    report = result.report
    totals = report.totals()
    status = "partial" if report.partial else "ok"
    print(
        f"load {status}: {totals.rows} rows read, {totals.requests} requests, "
        f"{totals.retries} retries, {waited(totals)}, {len(report.skips)} skipped scopes"
    )
    for skip in report.skips:
        print(f"  skipped {skip.resource}: {skip.kind}: {skip.message}")
    for note in report.notes:
        print(f"  note: {note}")


def print_pipeline(pipeline: Any) -> None:
    """Where the run's dlt pipeline lives, and how dlt's own commands find it."""
    from pipelines.load import pipeline_line

    print(pipeline_line(pipeline))


def waited(totals: Any) -> str:
    """Wall-clock seconds waited, and the sum over threads when several waited at once."""
    text = f"{totals.wait_seconds_wall:.1f} s waited"
    if totals.wait_seconds_sum >= totals.wait_seconds_wall + 0.05:
        text += f" ({totals.wait_seconds_sum:.1f} s summed over threads)"
    return text


def main(argv: Sequence[str] | None = None) -> int:
    system_arrow_pool()  # before pyarrow's import, which the parser's set-up makes
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    limit_malloc_arenas()  # before a run's threads start (see pipelines/malloc.py)
    logging.getLogger("dlt").setLevel(args.log_level)
    if args.command == "sim":
        from simulator.cli import run

        return run(args, lambda sim: sim_next_steps(args, sim.info()))
    if args.command == "load":
        return guarded(lambda: load_command(args))
    if args.command == "backfill":
        return guarded(lambda: backfill_command(args))
    if args.command == "check":
        return guarded(lambda: check_command(args))
    if args.command == "state":
        return guarded(lambda: state_command(args))
    if args.command == "reset":
        return guarded(lambda: reset_command(args))
    if args.command == "report":
        from pipelines.report.command import report_command

        return guarded(lambda: report_command(args))
    if args.command == "demo":
        from pipelines.demo import run_demo

        return guarded(lambda: run_demo(args))
    return EXIT_CONFIG


def sim_next_steps(args: argparse.Namespace, info: dict[str, Any]) -> list[str]:
    """What `sim` prints after its banner: the `load` that reads this simulator as it is."""
    return [
        "load it (paste into another shell; --end-date is the simulator's clock):",
        "  " + sim_load_command(args, info),
    ]


def sim_load_command(args: argparse.Namespace, info: dict[str, Any]) -> str:
    """`repo-analytics load` for the simulator `sim` serves: edition, URL, its clock as
    `end_date`, and its credentials as environment variables (never as flags: a command's
    arguments are visible to every user of the machine)."""
    import shlex
    from datetime import UTC, datetime

    from sources.repo_analytics.editions import edition_spec

    spec = edition_spec(info["edition"])
    prefix = "SOURCES__REPO_ANALYTICS__"
    env = {name.upper(): getattr(args, name) for name in spec.demo_credentials}
    flags = ["--edition", spec.name, "--base-url", info["base_url"]]
    if args.api_prefix is not None:  # else the edition's standard prefix, the load's default
        flags += ["--api-prefix", info["api_prefix"]]
    if spec.needs_workspace:
        flags += ["--workspace", info["workspace"]]
    if info.get("ca_file"):  # `sim --tls`: the run's CA
        flags += ["--ca-bundle", info["ca_file"]]
    clock = datetime.fromtimestamp(info["now"], UTC).isoformat()
    secrets = " ".join(f"{prefix}{key}={shlex.quote(value)}" for key, value in env.items())
    return f"{secrets} {shlex.join(['repo-analytics', 'load', *flags, '--end-date', clock])}"


def backfill_command(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime, timedelta

    from pipelines.reconcile_prefetch import StatisticsPrefetch

    overrides = flag_settings(args)
    since = args.since
    if since is None:
        if args.days is None:
            return fail(EXIT_CONFIG, "config error: give --since DATE or --days N")
        if args.days < 1:  # 0 would silently back-fill part of today
            from sources.repo_analytics import ConfigError

            raise ConfigError("days", args.days, "a number of days of at least 1")
        since = (datetime.now(UTC) - timedelta(days=args.days)).date().isoformat()
    check_before_run(args, dates=False)
    if args.parallel_windows is not None:
        print(
            "note: --parallel-windows is no longer used: the windows load one after another "
            "on the pipeline, each reading `concurrency` scopes at once",
            file=sys.stderr,
        )
    pipeline = make_cli_pipeline(args)
    prefetch = None if args.no_reconcile else StatisticsPrefetch(resolved_source_args(args))
    try:
        return backfilled(args, pipeline, since, overrides, prefetch)
    finally:
        if prefetch is not None:
            prefetch.close()


def backfilled(
    args: argparse.Namespace,
    pipeline: Any,
    since: str,
    overrides: dict[str, Any],
    prefetch: StatisticsPrefetch | None,
) -> int:
    """The backfill of `backfill_command`, its summary, reconciliation and report."""
    from pipelines.backfill import run_backfill
    from pipelines.duckdb_file import lock_wait
    from pipelines.progress import make_progress
    from pipelines.run_records import WindowsLanding, finish_run, start_run
    from pipelines.window_ledger import given_up_windows, settle_windows

    run = start_run(pipeline, "backfill", resolved_source_args(args))
    with make_progress(args.progress, "backfill") as progress:
        result = run_backfill(
            pipeline,
            since,
            args.until,
            args.window_days,  # None: the resumed backfill's size, or the default
            progress=WindowsLanding(progress, run),
            prefetch=prefetch,
            reconcile=not args.no_reconcile,
            **overrides,
        )
    exports = (
        f"; CSV exports: {len(result.exports)} windows, "
        f"{sum(w.resumed for w in result.exports)} already finished before"
        if result.exports
        else ""
    )
    if result.resumed_window_days is not None:
        print(
            f"backfill: {result.resumed_window_days}-day windows, the size of the backfill it "
            "continues (--window-days sets another)"
        )
    print(
        f"backfill done: {len(result.windows)} windows, "
        f"{sum(w.resumed for w in result.windows)} already finished before{exports}"
    )
    for line in read_again_lines(result):
        print(line)
    print_pipeline(pipeline)
    # the windows read whole (a window read for new users alone writes no table compared)
    whole = [w for w in result.windows if w.result and w.again != "new_users"]
    loaded = [w.result for w in whole if w.result]
    check = reconciled(
        args,
        pipeline,
        [r.report for r in loaded],
        [load_id for r in loaded for load_id in r.load_ids],
        prefetch,
        [(start, end) for _, start, end in result.unreconciled],
    )
    reconciled_windows = [(w.key, w.start, w.end) for w in whole]
    verdicts = settle_windows(
        pipeline,
        [*reconciled_windows, *result.unreconciled],
        check,
        lock_wait(resolved_source_args(args)),
    )
    for line in filter(None, (v.line() for v in verdicts)):
        print(line)
    given_up = set(given_up_windows(pipeline)) - {v.key for v in verdicts}
    if given_up:
        print(
            f"note: {len(given_up)} windows differ from the API's statistics and are no longer "
            "read (see `repo-analytics state`)"
        )
    payload = {
        "backfill": window_reports(result.windows),
        "backfill_exports": window_reports(result.exports),
        "backfill_totals": result.totals(),
        "reconciliation": check.as_dict() if check else None,
        "windows_reconciled": [v.as_dict() for v in verdicts],
        "scopes_appeared": result.appeared.counts(),
    }
    every = [w.result.report for w in (*result.windows, *result.exports) if w.result]
    finish_run(run, every, check, payload)  # before the copy: readers see the verdict
    write_report(args, {**payload, "published": publish_copy(args)})
    return exit_code(result.partial, check)


def window_reports(windows: list[Any]) -> list[dict[str, Any]]:
    """Each window's bounds, whether an earlier run finished it (or why it is read again),
    and its run report."""
    return [
        {
            "window": [w.start.isoformat(), w.end.isoformat()],
            "resumed": w.resumed,
            "read_again": w.again,
            "report": w.result.report.as_dict() if w.result else None,
        }
        for w in windows
    ]


def read_again_lines(result: Any) -> list[str]:
    """What the backfill read again of windows an earlier run had read, and why."""
    lines = []
    counts = result.appeared.counts()
    if counts:
        every = [*result.windows, *result.exports]
        whole = sum(w.again == "new_scopes" for w in every)
        alone = sum(w.again == "new_users" for w in every)
        scopes = ", ".join(f"{n} {level}" for level, n in counts.items())
        lines.append(
            f"backfill: scopes that appeared since finished windows were read: {scopes}; "
            f"{whole} windows read again whole (a new repository is in every level's lists), "
            f"{alone} for their new users alone"
        )
    mismatched = [w for w in result.windows if w.again == "mismatch"]
    if mismatched:
        lines.append(
            f"backfill: {len(mismatched)} windows read again: their reconciliation found a "
            "mismatch in an earlier run"
        )
    if result.unreconciled:
        lines.append(
            f"backfill: {len(result.unreconciled)} windows an earlier run read are reconciled "
            "now (its reconciliation never ran)"
        )
    return lines


def check_command(args: argparse.Namespace) -> int:
    from pipelines.maintenance import check

    values = resolved_source_args(args)
    for line in check(values):
        print(line)
    return EXIT_OK


def resolved_source_args(args: argparse.Namespace) -> dict[str, Any]:
    """Flags over dlt config (.dlt/, environment), resolved through the source's spec: what
    `load` would use."""
    from sources.repo_analytics.plan import resolve_settings

    return dict(resolve_settings(flag_settings(args)))


def state_command(args: argparse.Namespace) -> int:
    from pipelines.maintenance import state_lines

    for line in state_lines(make_cli_pipeline(args)):
        print(line)
    return EXIT_OK


def reset_command(args: argparse.Namespace) -> int:
    from pipelines.maintenance import reset

    if not args.yes:
        if not sys.stdin.isatty():
            return fail(
                EXIT_CONFIG,
                "config error: reset needs confirmation: add --yes when not on a terminal",
            )
        answer = input(
            f"forget the cursors of resources starting `{args.resource}`"
            f"{' and the finished backfill windows' if args.windows else ''}? "
            "type yes: "
        )
        if answer.strip().lower() != "yes":
            print("nothing changed")
            return EXIT_OK
    names = reset(make_cli_pipeline(args), args.resource, args.windows)
    print(
        f"forgot the state of {len(names)} resource{'s' if len(names) != 1 else ''}: "
        f"{', '.join(names)}"
    )
    return EXIT_OK


def make_cli_pipeline(args: argparse.Namespace) -> Any:
    from pipelines.load import make_pipeline

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
    from pipelines.warehouse import check_warehouse

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
        from pipelines.duckdb_memory import configured_memory_limit, duckdb_destination

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

    from pipelines.duckdb_file import check_catalog
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


def write_report(args: argparse.Namespace, report: dict[str, Any]) -> None:
    """The run report as JSON next to the data: `<duckdb file stem>.report.json`."""
    path = save_report(Path(args.duckdb), report)
    print(f"run report: {path}")


def save_report(db_file: Path, report: dict[str, Any]) -> Path:
    """Write the run report as JSON to `<db_file stem>.report.json` whole or not at all: into
    a file of its own, then renamed over the last run's (a run killed while writing leaves
    the last report as it was, not half of a new one)."""
    import json
    import os

    path = db_file.with_suffix(".report.json")
    partial = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    try:
        partial.write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def guarded(command: Any) -> int:
    """Run a command; every failure becomes one line on stderr and an exit code."""
    import duckdb

    from pipelines.duckdb_file import MEMORY_KEY
    from sources.repo_analytics import ConfigError, RepoAnalyticsError, RetryBudgetExhausted
    from sources.repo_analytics.errors import DuckDBFileHeld, DuckDBOutOfMemory

    try:
        telemetry_only_where_asked()
        return int(command())
    except Exception as error:  # noqa: BLE001 - every failure becomes one line and a code
        cause = root_cause(error)
        if isinstance(cause, ConfigError) or is_missing_config(cause):
            return fail(EXIT_CONFIG, config_message(cause))
        if isinstance(cause, RetryBudgetExhausted):
            return fail(EXIT_STOPPED, f"stopped: {cause}")
        if isinstance(cause, DuckDBFileHeld):
            return fail(EXIT_HELD, f"stopped: {cause}")
        if isinstance(cause, duckdb.OutOfMemoryException):
            detail = str(cause).splitlines()[0].removeprefix("Out of Memory Error: ")
            return fail(EXIT_FATAL, f"failed: {DuckDBOutOfMemory(detail, MEMORY_KEY)}")
        if isinstance(cause, RepoAnalyticsError):
            return fail(EXIT_FATAL, f"failed: {cause}")
        return fail(EXIT_FATAL, f"failed: {type(cause).__name__}: {cause}")


def telemetry_only_where_asked() -> None:
    """dlt's anonymous usage telemetry only where the user set `runtime.dlthub_telemetry`
    (`.dlt/config.toml`, `~/.dlt/config.toml`, RUNTIME__DLTHUB_TELEMETRY): the project's
    `.dlt/config.toml` turns it off, and a run from any other folder, as from cron, sent it
    (dlt's default: an event a step, each waiting up to 1 s to connect where egress is
    dropped). Reading the setting starts dlt's runtime, telemetry included: it is stopped
    again at once, before any pipeline step could send an event, and later runtimes read it
    as off."""
    import dlt
    from dlt.common.runtime.telemetry import stop_telemetry

    if dlt.config.get("runtime.dlthub_telemetry") is None:
        dlt.config["runtime.dlthub_telemetry"] = False
        stop_telemetry()


def console() -> int:
    """The console command: `main()`, then an exit that skips the interpreter's last
    collections of garbage cycles. They walk the whole heap of a run's modules and data
    (0.3-0.4 s of every run, a year's backfill or a nightly alike) to free memory the
    process gives back as it ends; every file and DuckDB connection a run opens is closed
    before `main()` returns."""
    code = main()
    gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(console())
