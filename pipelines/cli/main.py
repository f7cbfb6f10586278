"""`repo-analytics`: the one command. It parses the command line and runs the subcommand
(`commands.py`), every failure one line and an exit code (`exits.py`)."""

from __future__ import annotations

import gc
import logging
import sys
from collections.abc import Sequence

from pipelines.cli.exits import EXIT_CONFIG, guarded
from pipelines.cli.parser import build_parser
from pipelines.runs.malloc import limit_malloc_arenas, system_arrow_pool


def main(argv: Sequence[str] | None = None) -> int:
    system_arrow_pool()  # before pyarrow's import, which the parser's set-up makes
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    limit_malloc_arenas()  # before a run's threads start (see pipelines/runs/malloc.py)
    # the commands import dlt and pyarrow: only once Arrow's pool is chosen
    from pipelines.cli.commands import (
        backfill_command,
        check_command,
        load_command,
        reset_command,
        sim_next_steps,
        state_command,
    )

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
        from pipelines.cli.report import report_command

        return guarded(lambda: report_command(args))
    if args.command == "demo":
        from pipelines.cli.demo import run_demo

        return guarded(lambda: run_demo(args))
    return EXIT_CONFIG


def console() -> int:
    """The console command: `main()`, then an exit that skips the interpreter's last
    collections of garbage cycles. They walk the whole heap of a run's modules and data
    (`docs/decisions/dlt-run-overheads.md`) to free memory the
    process gives back as it ends; every file and DuckDB connection a run opens is closed
    before `main()` returns."""
    code = main()
    gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(console())
