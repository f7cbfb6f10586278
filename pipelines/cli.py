"""`repo-analytics`: the one command. Each subcommand is a thin layer over a function."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FATAL, EXIT_CONFIG, EXIT_PARTIAL, EXIT_STOPPED = 0, 1, 2, 3, 4

# CLI flag -> source argument; unset flags fall back to dlt config (.dlt/, env vars).
LOAD_FLAGS = ("edition", "base_url", "api_prefix", "workspace", "levels", "resources",
              "repositories", "users", "start_date", "end_date", "lookback_days", "page_size",
              "statistics_period", "concurrency")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="repo-analytics",
        description="Commit and pull-request analytics from the Repository Analytics Export API.",
    )
    parser.add_argument("--duckdb", default="repo_analytics.duckdb", metavar="FILE",
                        help="the DuckDB file to load into (default repo_analytics.duckdb)")
    parser.add_argument("--dataset", default="repo_analytics", help="dataset (schema) name")
    parser.add_argument("--pipelines-dir", default=None, metavar="DIR",
                        help="where dlt keeps the pipeline's working state")
    parser.add_argument("--schemas-dir", default=None, metavar="DIR",
                        help="where the pinned (import/) and produced (export/) schemas live "
                        "(default: the project's schemas/)")
    parser.add_argument("--log-level", default="WARNING",
                        choices=("DEBUG", "INFO", "WARNING", "ERROR"), help="log level")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    sim = commands.add_parser("sim", help="serve a simulated API host (cloud or self-hosted)",
                              description="Serve a simulated API host until stopped.")
    from simulator.cli import add_arguments

    add_arguments(sim)

    load = commands.add_parser("load", help="the incremental load (run it nightly)",
                               description="Load what changed since the last run.")
    for flag in LOAD_FLAGS:
        load.add_argument("--" + flag.replace("_", "-"), dest=flag, default=None,
                          help=f"overrides the `{flag}` setting")
    return parser


def load_command(args: argparse.Namespace) -> int:
    from pipelines.load import SCHEMAS, make_pipeline, run_load
    from sources.repo_analytics import (
        ConfigError,
        FatalApiError,
        RepoAnalyticsError,
        RetryBudgetExhausted,
    )

    overrides = {k: getattr(args, k) for k in LOAD_FLAGS if getattr(args, k) is not None}
    try:
        import dlt

        pipeline = make_pipeline(destination=dlt.destinations.duckdb(args.duckdb),
                                 dataset_name=args.dataset, pipelines_dir=args.pipelines_dir,
                                 schemas_dir=Path(args.schemas_dir) if args.schemas_dir
                                 else SCHEMAS)
        result = run_load(pipeline, **overrides)
    except Exception as error:  # noqa: BLE001 - every failure becomes one line and a code
        cause = root_cause(error)
        if isinstance(cause, ConfigError) or is_missing_config(cause):
            return fail(EXIT_CONFIG, config_message(cause))
        if isinstance(cause, RetryBudgetExhausted):
            return fail(EXIT_STOPPED, f"stopped: {cause}")
        if isinstance(cause, (FatalApiError, RepoAnalyticsError)):
            return fail(EXIT_FATAL, f"failed: {cause}")
        return fail(EXIT_FATAL, f"failed: {type(cause).__name__}: {cause}")
    print_summary(result)
    return EXIT_PARTIAL if result.report.partial else EXIT_OK


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
    return type(error).__name__ == "ConfigFieldMissingException"


def config_message(error: BaseException) -> str:
    if is_missing_config(error):
        fields = getattr(error, "fields", []) or ["?"]
        names = ", ".join(f"`{f}`" for f in fields)
        envs = ", ".join(f"SOURCES__REPO_ANALYTICS__{f.upper()}" for f in fields)
        return (f"config error: {names} not set: put it in .dlt/config.toml (secrets in "
                f".dlt/secrets.toml) under [sources.repo_analytics], or set {envs}")
    return f"config error: {error}"


def fail(code: int, message: str) -> int:
    print(f"repo-analytics: {message.splitlines()[0] if message else 'failed'}",
          file=sys.stderr)
    return code


def print_summary(result: Any) -> None:
    report = result.report
    totals = report.totals()
    status = "partial" if report.partial else "ok"
    print(f"load {status}: {totals.rows} rows read, {totals.requests} requests, "
          f"{totals.retries} retries, {totals.wait_seconds:.1f} s waited, "
          f"{len(report.skips)} skipped scopes")
    for skip in report.skips:
        print(f"  skipped {skip.resource}: {skip.kind}: {skip.message}")
    for note in report.notes:
        print(f"  note: {note}")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.getLogger("dlt").setLevel(args.log_level)
    if args.command == "sim":
        from simulator.cli import run

        return run(args)
    if args.command == "load":
        return load_command(args)
    return EXIT_CONFIG


if __name__ == "__main__":
    sys.exit(main())
