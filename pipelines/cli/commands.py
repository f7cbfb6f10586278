"""The subcommands, each a thin layer over a function of `pipelines.runs`, and what they print."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.cli.exits import EXIT_CONFIG, EXIT_OK, exit_code, fail
from pipelines.cli.options import (
    check_before_run,
    make_cli_pipeline,
    publish_copy,
    resolved_source_args,
)
from pipelines.cli.parser import (
    flag_settings,
)
from pipelines.runs.records import save_report

if TYPE_CHECKING:
    from pipelines.reconcile.prefetch import StatisticsPrefetch


def load_command(args: argparse.Namespace) -> int:
    from pipelines.runs.load import run_load
    from pipelines.runs.progress import make_progress
    from pipelines.runs.records import finish_run, start_run
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
    from pipelines.reconcile.check import Reconciliation, planned_unskipped, reconcile_pipeline
    from pipelines.reconcile.model import read_windows
    from sources.repo_analytics import RepoAnalyticsError

    windows = sorted({*read_windows(reports), *pending})
    if args.no_reconcile or not windows:
        return None
    try:
        check = reconcile_pipeline(
            pipeline,
            windows,
            resolved_source_args(args),
            frozenset(run_loads),
            prefetched,
            planned_unskipped(reports),
        )
    except RepoAnalyticsError as error:
        check = Reconciliation(0, [], [f"not run: {error}"])
    check.skipping(reports)
    for line in check.summary():
        print(line)
    return check


def held_cursors(args: argparse.Namespace, pipeline: Any, report: Any, check: Any) -> int:
    """A nightly whose reconciliation found a mismatch keeps its cursors at the start of the
    range that differs (`pipelines/runs/window_ledger.py`); how many it held, said in a line."""
    from pipelines.destinations.duckdb.file import lock_wait
    from pipelines.runs.window_ledger import hold_cursors

    held = hold_cursors(pipeline, report, check, lock_wait(resolved_source_args(args)))
    if held:
        start = report.read_range[0].isoformat()
        print(
            f"cursors held: {held} scopes keep their cursor at {start}, the start of the range "
            "that differs: the next run reads it again"
        )
    return held


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
    from pipelines.runs.load import pipeline_line

    print(pipeline_line(pipeline))


def waited(totals: Any) -> str:
    """Wall-clock seconds waited, and the sum over threads when several waited at once."""
    text = f"{totals.wait_seconds_wall:.1f} s waited"
    if totals.wait_seconds_sum >= totals.wait_seconds_wall + 0.05:
        text += f" ({totals.wait_seconds_sum:.1f} s summed over threads)"
    return text


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

    from pipelines.reconcile.prefetch import StatisticsPrefetch

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
    from pipelines.destinations.duckdb.file import lock_wait
    from pipelines.runs.backfill import run_backfill
    from pipelines.runs.progress import make_progress
    from pipelines.runs.records import WindowsLanding, finish_run, start_run
    from pipelines.runs.window_ledger import given_up_windows, settle_windows

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
    from pipelines.runs.maintenance import check

    values = resolved_source_args(args)
    for line in check(values):
        print(line)
    return EXIT_OK


def state_command(args: argparse.Namespace) -> int:
    from pipelines.runs.maintenance import state_lines

    for line in state_lines(make_cli_pipeline(args)):
        print(line)
    return EXIT_OK


def reset_command(args: argparse.Namespace) -> int:
    from pipelines.runs.maintenance import reset

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


def write_report(args: argparse.Namespace, report: dict[str, Any]) -> None:
    """The run report as JSON next to the data: `<duckdb file stem>.report.json`."""
    path = save_report(Path(args.duckdb), report)
    print(f"run report: {path}")
