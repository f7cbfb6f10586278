"""How long a year's backfill takes with each `concurrency`, with and without latency.

Usage:
    python bench/bench_backfill.py [--size small] [--latency-ms 0,50] [--concurrency 4,8]

Run on demand (pytest does not collect it). For each latency and `concurrency` (the bound on
requests open at once, and the scopes each resource reads at once) it
starts a fresh simulated cloud host in this process (`slow` fault at rate 1 adds the latency
to every API answer, as a remote host would), backfills its year in 61-day windows at the
workspace and repository levels into a fresh DuckDB file, and records wall time, requests,
rows and this process's peak RSS so far. Writes <--name>.json and .md (default `backfill`)
to bench/results/local/, or with --record to bench/results/ (the results of record).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import dlt  # noqa: E402

from pipelines.cli.demo import demo_source_args  # noqa: E402
from pipelines.runs.backfill import run_backfill  # noqa: E402
from pipelines.runs.load import make_pipeline  # noqa: E402
from simulator import SimConfig, Simulator  # noqa: E402

RECORDED = ROOT / "bench" / "results"  # the results of record (committed: --record)
LOCAL = RECORDED / "local"  # every other run's (git-ignored)


def one_run(size: str, latency_ms: int, concurrency: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-backfill-"))
    try:
        with Simulator(SimConfig(edition="cloud", size=size)) as sim:
            if latency_ms:
                sim.set_faults(
                    {"rules": [{"kind": "slow", "rate": 1, "slow_seconds": latency_ms / 1000}]}
                )
            info = sim.info()
            args = {**demo_source_args(sim, info), "concurrency": concurrency}
            pipeline = make_pipeline(
                "bench",
                dlt.destinations.duckdb(str(work / "d.duckdb")),
                "repo_analytics",
                str(work / "pipelines"),
                work / "schemas",
            )
            clock = datetime.fromtimestamp(info["now"], UTC)
            began = time.monotonic()
            result = run_backfill(
                pipeline,
                (clock - timedelta(days=366)).date().isoformat(),
                clock.isoformat(),
                61,
                now=clock,
                **args,
            )
            seconds = time.monotonic() - began
        totals = [w.result.report.totals() for w in result.windows if w.result]
        return {
            "size": size,
            "latency_ms": latency_ms,
            "concurrency": concurrency,
            "load1": round(os.getloadavg()[0], 2),
            "windows": len(result.windows),
            "seconds": round(seconds, 1),
            "requests": sum(t.requests for t in totals),
            "rows": sum(t.rows for t in totals),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="small")
    parser.add_argument("--latency-ms", default="0,50")
    parser.add_argument("--concurrency", default="4,8")
    parser.add_argument("--name", default="backfill", help="results file name (.json, .md)")
    parser.add_argument(
        "--record",
        action="store_true",
        help="write the results of record into bench/results/ (committed); otherwise into "
        "bench/results/local/ (git-ignored)",
    )
    options = parser.parse_args()
    rows = []
    for latency in (int(v) for v in options.latency_ms.split(",")):
        for concurrency in (int(v) for v in options.concurrency.split(",")):
            row = one_run(options.size, latency, concurrency)
            print(json.dumps(row), flush=True)
            rows.append(row)
    results = RECORDED if options.record else LOCAL
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{options.name}.json").write_text(json.dumps(rows, indent=2))
    lines = [
        f"# Backfill: a year of the `{options.size}` cloud host in 61-day windows",
        "",
        f"{platform.platform()}, {platform.python_version()}, "
        f"{datetime.now(UTC):%Y-%m-%d}; peak RSS is the process's so far (cumulative).",
        "",
        "| latency per request | concurrency | seconds | requests | rows | peak RSS MB "
        "| load average |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['latency_ms']} ms | {r['concurrency']} | {r['seconds']} "
        f"| {r['requests']} | {r['rows']} | {r['peak_rss_mb']} | {r['load1']} |"
        for r in rows
    ]
    (results / f"{options.name}.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {results / options.name}.json and .md")


if __name__ == "__main__":
    main()
