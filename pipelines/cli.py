"""`repo-analytics`: the one command. Each subcommand is a thin layer over a function."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="repo-analytics",
        description="Commit and pull-request analytics from the Repository Analytics Export API.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sim = commands.add_parser("sim", help="serve a simulated API host (cloud or self-hosted)",
                              description="Serve a simulated API host until stopped.")
    from simulator.cli import add_arguments

    add_arguments(sim)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "sim":
        from simulator.cli import run

        return run(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
