"""`repo-analytics demo`: the whole job on the embedded default, against the simulator.

Starts a simulated host in-process, backfills its year of history into `demo.duckdb`,
advances the simulated clock by a day (new commits, late pushes, pull-request changes), runs
the nightly incremental load, reconciles what landed with the API's own statistics, prints
a summary with how to open the file, and writes the dashboard of it (`demo-report.html`).
"""

from __future__ import annotations

import argparse
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from pipelines.destinations.duckdb import DEFAULT_DUCKDB
from pipelines.destinations.duckdb.memory import duckdb_destination, memory_limit
from pipelines.integrations.report import write_report
from pipelines.integrations.report.queries import Filters
from pipelines.integrations.report.reader import duckdb_reader
from pipelines.reconcile.check import reconcile
from pipelines.runs.backfill import run_backfill
from pipelines.runs.load import make_pipeline, pipeline_line, run_load
from pipelines.runs.progress import make_progress
from pipelines.runs.records import finish_run, save_report, start_run
from simulator import SimConfig, Simulator
from sources.repo_analytics.editions import edition_spec

EXIT_OK, EXIT_PARTIAL, EXIT_MISMATCH = 0, 3, 5
DEMO_PIPELINE = "repo_analytics_demo"
DASHBOARD = "demo-report.html"  # beside the demo's DuckDB file


def run_demo(args: argparse.Namespace) -> int:
    db_file = Path(args.duckdb if args.duckdb != DEFAULT_DUCKDB else "demo.duckdb")
    work = db_file.parent / ".repo-analytics-demo"
    for leftover in (db_file, work):  # the demo owns these: start afresh every time
        if leftover.is_dir():
            shutil.rmtree(leftover)
        elif leftover.exists():
            leftover.unlink()
    config = SimConfig(
        edition=args.edition,
        size=args.size,
        from_git=tuple(args.from_git),
        tls=getattr(args, "tls", False),
    )
    with Simulator(config) as sim:
        info = sim.info()
        print(f"simulator: {sim.banner()}", flush=True)
        source_args = demo_source_args(sim, info)
        pipeline = make_pipeline(
            DEMO_PIPELINE,
            duckdb_destination(str(db_file), memory_limit({}), DEMO_PIPELINE),
            args.dataset,
            str(work / "pipelines"),
            work / "schemas",
        )
        run = start_run(pipeline, "demo", source_args)
        clock = datetime.fromtimestamp(info["now"], UTC)
        since = (clock - timedelta(days=366)).date().isoformat()
        print(f"backfill [{since} .. {clock.isoformat()}) in 61-day windows:", flush=True)
        with make_progress(args.progress, "demo backfill") as progress:
            backfill = run_backfill(
                pipeline, since, clock.isoformat(), 61, now=clock, progress=progress, **source_args
            )
        advanced = sim.advance(days=1)
        late = len(advanced["late_commits"])
        print(
            f"advanced the simulated clock one day: {advanced['new_commits']} new commits, "
            f"{late} pushed late, {len(advanced['pull_request_changes'])} pull requests "
            "changed state",
            flush=True,
        )
        new_clock = datetime.fromtimestamp(sim.info()["now"], UTC)
        nightly = run_load(
            pipeline,
            start_date=(new_clock - timedelta(days=30)).isoformat(),
            now=new_clock,
            **source_args,
        )
        totals = nightly.report.totals()
        print(f"nightly load: {totals.rows} rows read, {totals.requests} requests", flush=True)
        windows = [(w.start, w.end) for w in backfill.windows]
        windows.append((windows[-1][1], new_clock))
        loaded = [*(w.result for w in backfill.windows if w.result), nightly]
        check = reconcile(
            str(db_file),
            args.dataset,
            windows,
            source_args,
            {load_id for r in loaded for load_id in r.load_ids},
        ).skipping([r.report for r in loaded])
    report = {
        "backfill": [w.result.report.as_dict() for w in backfill.every_window if w.result],
        "nightly": nightly.report.as_dict(),
        "reconciliation": check.as_dict(),
    }
    save_report(db_file, report)
    finish_run(run, [r.report for r in loaded], check, report)
    print_summary(db_file, args.dataset, check, advanced["late_commits"])
    print(pipeline_line(pipeline))
    print_dashboard(db_file, args.dataset)
    if not check.ok:
        return EXIT_MISMATCH
    return EXIT_PARTIAL if backfill.partial or nightly.report.partial else EXIT_OK


def demo_source_args(sim: Simulator, info: dict[str, Any]) -> dict[str, Any]:
    """The source's settings for the simulated host: the edition's demo levels and the
    credential form it names, read from the simulator's settings of the same names."""
    spec = edition_spec(sim.config.edition)
    args: dict[str, Any] = {
        "edition": spec.name,
        "base_url": sim.base_url,
        "levels": list(spec.demo_levels),
        "statistics_period": "week",
    }
    if spec.needs_workspace:
        args["workspace"] = info["workspace"]
    args.update({name: getattr(sim.config, name) for name in spec.demo_credentials})
    if sim.ca_file:  # `demo --tls`: HTTPS, verified against the run's CA
        args["ca_bundle"] = sim.ca_file
    return args


def print_summary(db_file: Path, dataset: str, check: Any, late: list[str]) -> None:
    with duckdb.connect(str(db_file), read_only=True) as con:
        tables = con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND "
            "table_type = 'BASE TABLE' AND table_name NOT LIKE '_dlt%' ORDER BY 1",
            [dataset],
        ).fetchall()
        print(f"\nwhat landed in {db_file} (dataset {dataset}):")
        for (table,) in tables:
            count = con.execute(f'SELECT count(*) FROM "{dataset}"."{table}"').fetchone()
            print(f"  {table:40s} {count[0] if count else 0:>9,} rows")
        landed = con.execute(
            f'SELECT count(DISTINCT commit_id) FROM "{dataset}".commits WHERE commit_id IN '
            f"(SELECT unnest(?::VARCHAR[]))",
            [late],
        ).fetchone()
        # the server's commit time is UTC; the cloud's is the author's local time, no zone
        span = con.execute(
            f"SELECT min(authored_at_utc), max(authored_at_utc), "
            f"min(authored_at_local), max(authored_at_local) "
            f'FROM "{dataset}".commits'
        ).fetchone()
    if span and span[0] is not None:
        print(f"commits from {span[0]} to {span[1]}")
    if span and span[2] is not None:
        print(f"commits from {span[2]} to {span[3]} (the authors' local times, no zone)")
    for line in check.summary():
        print(line)
    print(
        f"late-pushed commits caught by the nightly run's look-back: "
        f"{landed[0] if landed else 0} of {len(late)}"
    )
    print(f"run report: {db_file.with_suffix('.report.json')}")
    print(f"open it: duckdb {db_file}  then  SELECT * FROM {dataset}.commits LIMIT 10;")
    print(f"   or in Python: duckdb.connect('{db_file}').sql('FROM {dataset}.pull_requests')")


def print_dashboard(db_file: Path, dataset: str) -> None:
    """The dashboard of the demo's file, beside it, and how to open it."""
    with duckdb_reader(str(db_file), dataset) as reader:
        path = write_report(reader, Filters(), db_file.with_name(DASHBOARD)).absolute()
    print(f"dashboard: {path}")
    print(f"open it in a browser (one file, no network needed): {path.as_uri()}")
