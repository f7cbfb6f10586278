"""Backfill windows as partitions, loaded by 1, 2, 4 concurrent writer processes into Postgres.

Usage:
    python bench/bench_scaleout.py [--size small] [--edition cloud] [--writers 1,2,4]
                                   [--workload defaults|lists] [--record | --out FILE.json]

Run on demand (pytest does not collect it). One simulator process (`repo-analytics sim`, clock
fixed at 2026-06-01) and one real Postgres server (pgserver's binaries, loopback TCP, as the
tests start it). The year before the clock is cut into calendar months: twelve partitions.
For each number of writers, a fresh dataset: the partitions are handed out to that many
worker slots, each partition one `repo-analytics --destination postgres backfill --since
MONTH --until NEXT` process with a working folder of its own (as an orchestrator's task runs
one partition), `--no-reconcile` (the host's statistics would be read again by each setting).
Recorded: wall seconds, partitions/s, rows landed (counted in the dataset's tables, `_dlt`
tables left out) and rows/s, requests (the simulator's counter), and the 1-minute load average
at start and end. Writes the JSON and a markdown table next to it (`.md`): `--out`, or
scaleout-<edition>-<size>.json in bench/results/local/ (with --record in bench/results/, the
results of record). The machine is shared: read the figures with the load average beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NOW = 1_780_272_000  # 2026-06-01T00:00:00Z: a fixed clock, so every run reads the same data
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from bench_year import (  # noqa: E402 - bench/ is not a package
    WORKLOADS,
    SimProcess,
    machine,
    repo_analytics,
    source_env,
    source_flags,
)

from tests.scaleout.postgres_server import PostgresServer, running_postgres  # noqa: E402

RECORDED = ROOT / "bench" / "results"  # the results of record (committed: --record)
LOCAL = RECORDED / "local"  # every other run's (git-ignored)


def months_before(clock: datetime, count: int) -> list[tuple[str, str]]:
    """The `count` calendar months before `clock` (a month's first day), oldest first."""
    starts = []
    year, month = clock.year, clock.month
    for _ in range(count + 1):
        starts.append(datetime(year, month, 1, tzinfo=UTC))
        year, month = (year, month - 1) if month > 1 else (year - 1, 12)
    starts.reverse()
    return [(a.date().isoformat(), b.date().isoformat()) for a, b in pairwise(starts)]


def one_partition(
    work: Path, env: dict[str, str], flags: list[str], dataset: str, window: tuple[str, str]
) -> dict[str, Any]:
    folder = work / f"{dataset}-{window[0]}"
    folder.mkdir(parents=True)
    command = [
        repo_analytics(),
        "--destination",
        "postgres",
        "--dataset",
        dataset,
        "--duckdb",
        str(folder / "report.duckdb"),
        "--pipelines-dir",
        str(folder / "pipelines"),
        "--schemas-dir",
        str(folder / "schemas"),
        "--progress",
        "off",
        "backfill",
        "--since",
        window[0],
        "--until",
        window[1],
        "--window-days",
        "31",
        "--no-reconcile",
        *flags,
    ]
    began = time.monotonic()
    done = subprocess.run(command, env=env, cwd=folder, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"partition {window} failed: {done.stderr.strip()[-500:]}")
    return {"window": list(window), "seconds": round(time.monotonic() - began, 2)}


def landed_rows(server: PostgresServer, dataset: str) -> dict[str, int]:
    tables = server.rows(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
        "AND table_name NOT LIKE '\\_dlt%%'",
        (dataset,),
    )
    return {t: int(server.rows(f'SELECT count(*) FROM "{dataset}"."{t}"')[0][0]) for (t,) in tables}


def run_writers(
    server: PostgresServer,
    sim: SimProcess,
    work: Path,
    writers: int,
    windows: list[tuple[str, str]],
    workload: str,
) -> dict[str, Any]:
    dataset = f"bench_writers_{writers}"
    env = {
        **os.environ,
        **source_env(sim.edition),
        "DESTINATION__POSTGRES__CREDENTIALS": server.uri(),
    }
    flags = [*source_flags(sim), *WORKLOADS[workload]]
    requests_before = sim.requests()["total"]
    load_start = os.getloadavg()[0]
    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=writers) as slots:
        partitions = list(slots.map(lambda w: one_partition(work, env, flags, dataset, w), windows))
    wall = time.monotonic() - began
    rows = landed_rows(server, dataset)
    total = sum(rows.values())
    return {
        "writers": writers,
        "partitions": len(windows),
        "wall_seconds": round(wall, 2),
        "partitions_per_second": round(len(windows) / wall, 3),
        "rows": total,
        "rows_per_second": round(total / wall),
        "requests": sim.requests()["total"] - requests_before,
        "load_average_start": round(load_start, 2),
        "load_average_end": round(os.getloadavg()[0], 2),
        "partition_seconds": partitions,
        "rows_by_table": rows,
    }


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        f"# Scale-out: partitions into Postgres ({doc['edition']} {doc['size']}, "
        f"{doc['workload']}, {doc['partitions']} monthly partitions)",
        "",
        f"finished {doc['finished']}; {doc['machine']['cpus']} cores; dlt {doc['machine']['dlt']}.",
        "",
        "| writers | wall s | partitions/s | rows | rows/s | requests | load avg start/end |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in doc["runs"]:
        lines.append(
            f"| {r['writers']} | {r['wall_seconds']} | {r['partitions_per_second']} | "
            f"{r['rows']:,} | {r['rows_per_second']:,} | {r['requests']:,} | "
            f"{r['load_average_start']} / {r['load_average_end']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="small", choices=("tiny", "small", "medium"))
    parser.add_argument("--edition", default="cloud", choices=("cloud", "server"))
    parser.add_argument("--writers", default="1,2,4")
    parser.add_argument("--workload", default="defaults", choices=tuple(WORKLOADS))
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--record",
        action="store_true",
        help="write the results of record into bench/results/ (committed); otherwise into "
        "bench/results/local/ (git-ignored)",
    )
    args = parser.parse_args()
    results = RECORDED if args.record else LOCAL
    out = Path(args.out or results / f"scaleout-{args.edition}-{args.size}.json")
    clock = datetime.fromtimestamp(NOW, UTC)
    windows = months_before(clock, 12)
    with tempfile.TemporaryDirectory(prefix="bench-scaleout-") as tmp:
        work = Path(tmp)
        sim = SimProcess(args.edition, args.size, NOW, work)
        try:
            with running_postgres() as server:
                runs = [
                    run_writers(server, sim, work, int(n), windows, args.workload)
                    for n in args.writers.split(",")
                ]
        finally:
            sim.stop()
    doc = {
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "edition": args.edition,
        "size": args.size,
        "workload": args.workload,
        "partitions": len(windows),
        "machine": machine(),
        "runs": runs,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    out.with_suffix(".md").write_text(markdown(doc), encoding="utf-8")
    sys.stdout.write(markdown(doc))
    print(f"wrote {out} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
