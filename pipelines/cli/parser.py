"""The `repo-analytics` command line: its parser, a flag for every setting of the source's
spec, and the settings read back from the flags. Building it imports neither dlt nor the
source package (`--help` of every command, `sim` too)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from typing import Any

from pipelines.destinations.duckdb import DEFAULT_DUCKDB

# settings a backfill takes from its own flags (--since, --until) instead
BACKFILL_OWN = ("start_date", "end_date")
DEFAULT_DATASET = "repo_analytics"
# The file's name is not the dataset's: DuckDB 2 names a file's catalog after it, and then
# cannot tell `repo_analytics.<table>` (dataset and table) from a table of that catalog.


class EditionNames:
    """The registry's edition names, read when argparse asks for them: building the parser
    (every command, `sim` too) does not import the source package, which takes most of a
    second."""

    def __contains__(self, name: object) -> bool:
        from sources.repo_analytics.editions import EDITION_SPECS

        return name in EDITION_SPECS

    def __iter__(self) -> Iterator[str]:
        from sources.repo_analytics.editions import EDITION_SPECS

        return iter(tuple(EDITION_SPECS))


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser; given the arguments it is to parse, the `sim` command's
    options only where they name `sim` (they import the simulator's data model, which no
    other command needs at its start)."""
    parser = argparse.ArgumentParser(
        prog="repo-analytics",
        description="Commit and pull-request analytics from the Repository Analytics Export API.",
    )
    parser.add_argument(
        "--destination",
        default="duckdb",
        metavar="NAME",
        help="duckdb (default), parquet (Delta tables of Parquet files on a "
        "filesystem), or any dlt destination name configured in .dlt/",
    )
    parser.add_argument(
        "--duckdb",
        default=DEFAULT_DUCKDB,
        metavar="FILE",
        help=f"the DuckDB file to load into (default {DEFAULT_DUCKDB}); its name (up to the "
        "first dot) must differ from the dataset's",
    )
    parser.add_argument(
        "--parquet-dir",
        default="repo_analytics_parquet",
        metavar="PATH",
        help="folder or object-store URL (s3://, gs://, az://) for --destination parquet",
    )
    parser.add_argument("--dataset", default=DEFAULT_DATASET, help="dataset (schema) name")
    parser.add_argument(
        "--pipeline-name",
        default="repo_analytics",
        help="dlt pipeline name: one per edition/host loading the same dataset",
    )
    parser.add_argument(
        "--pipelines-dir",
        default=None,
        metavar="DIR",
        help="where dlt keeps the pipeline's working state",
    )
    parser.add_argument(
        "--schemas-dir",
        default=None,
        metavar="DIR",
        help="where the pinned (import/) and produced (export/) schemas live "
        "(default: schemas/ in the working directory)",
    )
    parser.add_argument(
        "--progress",
        choices=("auto", "on", "off"),
        default="auto",
        help="live progress bars (on), nothing (off), or auto (default): bars "
        "on a terminal, otherwise a plain line per backfill window",
    )
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="log level",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    sim = commands.add_parser(
        "sim",
        help="serve a simulated API host (cloud or self-hosted)",
        description="Serve a simulated API host until stopped.",
    )
    if argv is None or "sim" in argv:
        from simulator.cli import add_arguments

        add_arguments(sim)

    load = commands.add_parser(
        "load",
        help="the incremental load (run it nightly)",
        description="Load what changed since the last run.",
    )
    backfill = commands.add_parser(
        "backfill",
        help="load a long range in windows, resumable",
        description="Load [--since, --until) in windows; a rerun resumes at the first "
        "unfinished window.",
    )
    backfill.add_argument("--since", default=None, help="first day (or use --days)")
    backfill.add_argument("--until", default=None, help="end, exclusive (default now)")
    backfill.add_argument("--days", type=int, default=None, help="the last N days")
    backfill.add_argument(
        "--window-days",
        type=int,
        default=None,
        help="window size in days, 1 to 366 (default 122, a third of a year: each window is a "
        "dlt load)",
    )
    backfill.add_argument(
        "--parallel-windows", type=int, default=None, help=argparse.SUPPRESS
    )  # no longer used: see backfill_command
    check = commands.add_parser(
        "check",
        help="validate config and reach the host (credentials, licence, app)",
        description="Check config, then make one small request; one line per finding.",
    )
    commands.add_parser("state", help="cursors, finished backfill windows, last run")
    reset = commands.add_parser(
        "reset",
        help="forget the cursors of some resources (asks first)",
        description="Forget cursors so the next run re-reads from start_date; tables stay.",
    )
    reset.add_argument(
        "--resource",
        required=True,
        metavar="PREFIX",
        help="start of the resource names (see `state`), e.g. commits.repository",
    )
    reset.add_argument(
        "--windows", action="store_true", help="also forget the finished backfill windows"
    )
    reset.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    for command in (load, backfill):
        command.add_argument(
            "--no-reconcile",
            action="store_true",
            help="skip comparing what landed with the API's statistics",
        )
    for command in (load, backfill, check):
        add_setting_flags(command, BACKFILL_OWN if command is backfill else ())
    report = commands.add_parser(
        "report",
        help="write an HTML dashboard of the canonical views (one file, no network needed)",
        description="Write an engineering-metrics dashboard of the dataset's canonical views "
        "(DuckDB or a SQL warehouse) as one self-contained HTML file.",
    )
    report.add_argument(
        "--out", default="report.html", metavar="FILE", help="the HTML file (default report.html)"
    )
    report.add_argument(
        "--since", default=None, metavar="DATE", help="only weeks and days from this date on"
    )
    report.add_argument("--source", default=None, help="only this source (a host or workspace)")
    report.add_argument(
        "--repository", default=None, metavar="SLUG", help="only this repository (KEY/slug or slug)"
    )
    demo = commands.add_parser(
        "demo",
        help="simulator + backfill + nightly load + reconciliation, into DuckDB",
        description="Start a simulated host, backfill a year, advance its clock, run a "
        "nightly load, reconcile, and print what landed.",
    )
    # a metavar: else argparse lists the choices (importing the package) while building
    demo.add_argument(
        "--edition",
        choices=EditionNames(),
        default="cloud",
        metavar="EDITION",
        help="one of %(choices)s (default %(default)s)",
    )
    demo.add_argument("--size", choices=("tiny", "small", "medium"), default="small")
    demo.add_argument(
        "--from-git",
        nargs="+",
        default=(),
        metavar="PATH",
        help="build the simulated history from these git repositories",
    )
    demo.add_argument(
        "--tls",
        action="store_true",
        help="serve the simulator over HTTPS with a CA made for the run, given as ca_bundle",
    )
    return parser


def add_setting_flags(command: argparse.ArgumentParser, skip: Sequence[str] = ()) -> None:
    """A flag for every setting of the source's spec but the secrets (a command line is seen
    by every user of the machine): `--page-size`, `--retry-max-attempts`, ... Unset, a flag
    leaves the setting to `.dlt/` and the environment."""
    from sources.repo_analytics.config import SECRET_KEYS, env_name, user_fields

    group = command.add_argument_group(
        "settings", "each wins over its key in .dlt/config.toml and its environment variable"
    )
    for key, spec_field in user_fields():
        if key in SECRET_KEYS or key in skip:
            continue
        meta = spec_field.metadata
        default = meta["default_text"] or str(spec_field.default).lower()
        default = default if default.startswith("required") else f"default {default}"
        if spec_field.type is bool:
            text = f"{meta['help']} ({default}; {env_name(key)}=true|false)"
        else:
            text = f"{meta['help']}: {meta['valid']} ({default}; {env_name(key)})"
        options: dict[str, Any] = {
            "dest": setting_dest(key),
            "default": None,
            "help": text.replace("%", "%%"),
        }
        if spec_field.type is bool:
            options["action"] = argparse.BooleanOptionalAction
        else:
            options["metavar"] = key.rpartition(".")[2].upper()
        group.add_argument("--" + key.replace(".", "-").replace("_", "-"), **options)


def setting_dest(key: str) -> str:
    return key.replace(".", "__")


def flag_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given as flags, as the source takes them (`retry` as a table)."""
    from sources.repo_analytics.config import setting_keys

    values: dict[str, Any] = {}
    for key in setting_keys():
        value = getattr(args, setting_dest(key), None)
        if value is None:
            continue
        section, _, name = key.rpartition(".")
        if section:
            values.setdefault(section, {})[name] = value
        else:
            values[key] = value
    return values
