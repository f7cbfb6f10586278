"""`repo-analytics sim`: serve a simulated host until stopped."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from .config import EDITIONS, MAX_LATENCY_MS, SimConfig
from .data.generate import SIZES
from .faults import FaultSpecError, parse_spec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--edition",
        choices=EDITIONS,
        default="cloud",
        help="which API edition to serve (default: cloud)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port; 0 picks a free one (default)")
    parser.add_argument("--seed", type=int, default=1, help="data seed (default 1)")
    parser.add_argument(
        "--size", choices=tuple(SIZES), default="small", help="dataset size (default small)"
    )
    parser.add_argument(
        "--from-git",
        nargs="+",
        default=(),
        metavar="PATH",
        help="build the dataset from these local git repositories instead",
    )
    parser.add_argument(
        "--faults",
        default="",
        metavar="SPEC",
        help="fault spec, e.g. 429=0.05,503=0.02,seed=7 (see docs/simulator.md)",
    )
    parser.add_argument(
        "--now",
        type=int,
        default=None,
        help="the simulated clock, epoch seconds (default: the current hour, rounded down)",
    )
    parser.add_argument("--api-prefix", default=None, help="override the API path prefix")
    parser.add_argument("--workspace", default=SimConfig.workspace, help="cloud workspace slug")
    parser.add_argument("--token", default=SimConfig.token, help="cloud access token to accept")
    parser.add_argument("--username", default=SimConfig.username, help="self-hosted user name")
    parser.add_argument("--password", default=SimConfig.password, help="self-hosted password")
    parser.add_argument(
        "--server-token", default=SimConfig.server_token, help="self-hosted Bearer token to accept"
    )
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=0,
        metavar="MS",
        help="hold every API answer this many milliseconds, as a host across a network "
        "does (default 0; the `latency_ms` condition changes it later)",
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        help="serve HTTPS with a certificate authority made for the run; its PEM file "
        "(ca_file= in the first line) is what clients trust",
    )


def run(args: argparse.Namespace, next_steps: Callable[[Any], Iterable[str]] | None = None) -> int:
    """Serve until SIGINT or SIGTERM; the first line says where and how to connect.

    `next_steps(simulator)` gives lines printed after it (the client's own commands: the
    simulator knows no client).
    """
    from .server import Simulator

    try:
        parse_spec(args.faults)
    except (FaultSpecError, ValueError) as error:
        print(f"repo-analytics sim: error: {error}", file=sys.stderr)
        return 2
    if not 0 <= args.latency_ms <= MAX_LATENCY_MS:
        print(
            f"repo-analytics sim: error: --latency-ms {args.latency_ms:g}: valid from 0 to "
            f"{MAX_LATENCY_MS}",
            file=sys.stderr,
        )
        return 2
    config = SimConfig(
        edition=args.edition,
        host=args.host,
        port=args.port,
        seed=args.seed,
        size=args.size,
        from_git=tuple(args.from_git),
        faults=args.faults,
        now=args.now,
        api_prefix=args.api_prefix,
        workspace=args.workspace,
        token=args.token,
        username=args.username,
        password=args.password,
        server_token=args.server_token,
        tls=args.tls,
    )
    config.conditions.latency_ms = args.latency_ms
    try:
        sim = Simulator(config).start()
    except (ValueError, OSError) as error:
        print(f"repo-analytics sim: error: {error}", file=sys.stderr)
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        print(sim.banner(), flush=True)
        for line in next_steps(sim) if next_steps else ():
            print(line, flush=True)
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        sim.stop()
    return 0
