"""`repo-analytics --destination parquet backfill`: windows into Delta tables, resumed, in parallel.

Real simulators over HTTP, the real `repo-analytics` command in subprocesses, real Delta tables
under tmp folders read back with `deltalake`. Every expected value comes from the simulator's
ground truth (`sim.truth`), its request log (`sim.requests`) or the documented contract (README:
Commands, Destinations, exit codes, Self-reconciliation), never from extractor code.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import deltalake
import pytest

from simulator import SimConfig, Simulator
from tests.runs.test_backfill import (
    CLOCK,
    EDITIONS,
    SINCE,
    SLACK,
    WINDOW,
    WINDOW_DAYS,
    cli_env,
    keyed,
    log_since,
    run_cli,
    window_lines,
)
from tests.support import FIXED_NOW
from tests.support.loader import DATASET

# 2026-03-01 (before the tiny history begins) to the simulator's clock, 2026-06-01: four
# half-open 30-day windows, the last one two days long
PLANNED = [(SINCE + k * WINDOW, min(SINCE + (k + 1) * WINDOW, CLOCK)) for k in range(4)]
SCOPES = ("--levels", "repository", "--resources", "commits,pull_requests")
PR_STATES = {"cloud": 4, "server": 3}  # reconciled pull-request states per repository/window


# --------------------------------------------------------------------------------------------
# helpers: the command line with the parquet destination, Delta tables read back
# --------------------------------------------------------------------------------------------
def run_parquet(
    folder: Path, env: Mapping[str, str], *command: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """A parquet run whose files (lake, state, report) are all in `folder`; the report goes
    next to the --duckdb path, which parquet never writes."""
    return run_cli(
        folder,
        env,
        "--destination",
        "parquet",
        "--parquet-dir",
        str(folder / "lake"),
        *command,
        timeout=timeout,
    )


def backfill_command(*extra: str) -> tuple[str, ...]:
    return (
        "backfill",
        "--since",
        SINCE.date().isoformat(),
        "--until",
        CLOCK.date().isoformat(),
        "--window-days",
        str(WINDOW_DAYS),
        *SCOPES,
        *extra,
    )


def table_path(lake: Path, table: str) -> Path:
    return lake / DATASET / table


def delta_rows(lake: Path, table: str, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """A Delta table's rows (the named columns), as deltalake reads them."""
    data = deltalake.DeltaTable(str(table_path(lake, table))).to_pyarrow_table(
        columns=list(columns)
    )
    return list(zip(*(data.column(c).to_pylist() for c in columns), strict=True))


def delta_snapshot(lake: Path) -> dict[str, tuple[int, Counter[tuple[Any, ...]]]]:
    """Every Delta data table of the dataset: its version and its rows (all columns)."""
    out = {}
    for folder in sorted((lake / DATASET).iterdir()):
        if folder.name.startswith("_dlt") or not (folder / "_delta_log").is_dir():
            continue
        table = deltalake.DeltaTable(str(folder))
        data = table.to_pyarrow_table()
        out[folder.name] = (
            table.version(),
            Counter(zip(*(data.column(c).to_pylist() for c in data.column_names), strict=True)),
        )
    return out


def assert_delta_equal_truth(lake: Path, sim: Simulator, edition: str) -> None:
    """The repository-level Delta commit and pull-request tables equal the truth of
    [SINCE, CLOCK) by key and value, each key once (parents too), as the DuckDB backfill tests
    decide it: commits whose instant lies in the range must be there, none whose instant lies
    before the range's 26 h cloud slack (the cloud date has no zone) or after it may be;
    pull requests are exactly those updated within the range."""
    spec = EDITIONS[edition]
    allowed = (SINCE - SLACK if edition == "cloud" else SINCE, CLOCK)
    got = keyed(delta_rows(lake, spec.commits, spec.commit_columns), spec.key_width)
    expected: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    must: set[tuple[Any, ...]] = set()
    for commit in sim.truth("commits"):
        row = spec.commit_row(commit)
        at = spec.commit_time(commit)
        if allowed[0] <= at < allowed[1]:
            expected[row[: spec.key_width]] = row
        if SINCE <= at < CLOCK:
            must.add(row[: spec.key_width])
    assert must, "the range holds no truth commit: the test would prove nothing"
    missing, extra = must - set(got), set(got) - set(expected)
    assert not missing, f"{len(missing)} truth commits not loaded, e.g. {sorted(missing)[:3]}"
    assert not extra, f"{len(extra)} loaded commits outside the range, e.g. {sorted(extra)[:3]}"
    wrong = [(got[k], expected[k]) for k in got if got[k] != expected[k]]
    assert not wrong, f"{len(wrong)} commits differ from truth, e.g. {wrong[:2]}"

    parents = keyed(delta_rows(lake, spec.parents, spec.parent_key), len(spec.parent_key))
    assert parents and {k[: spec.key_width] for k in parents} <= set(got)

    updated = spec.pr_columns.index("updated_at")
    truth_prs = keyed(
        [
            row
            for row in map(spec.pr_row, sim.truth("pull-requests"))
            if SINCE <= row[updated] < CLOCK
        ],
        spec.key_width,
    )
    assert truth_prs, "the range holds no truth pull request: the test would prove nothing"
    got_prs = keyed(delta_rows(lake, spec.prs, spec.pr_columns), spec.key_width)
    assert set(got_prs) == set(truth_prs)
    wrong = [(got_prs[k], truth_prs[k]) for k in got_prs if got_prs[k] != truth_prs[k]]
    assert not wrong, f"{len(wrong)} pull requests differ from truth, e.g. {wrong[:2]}"


def assert_all_windows_loaded(stdout: str) -> None:
    """One line per planned window, each loaded (none skipped), and the done line."""
    lines = window_lines(stdout)
    assert sorted(lines) == [1, 2, 3, 4], stdout
    for index, (start, end) in enumerate(PLANNED, 1):
        first, last, what = lines[index]
        assert (first, last) == (start.date().isoformat(), end.date().isoformat()), stdout
        assert "skipped" not in what and " rows, " in what, stdout
    assert "backfill done: 4 windows, 0 already finished before" in stdout.splitlines()


def assert_clean_reconciled_report(
    done: subprocess.CompletedProcess[str],
    report_file: Path,
    report_text: str | None,
    sim: Simulator,
    edition: str,
) -> None:
    """Exit 0; the report JSON has one loaded entry per planned window and a reconciliation
    over the Delta tables with every repository, window and measure checked and no mismatch;
    stdout has the PASSED verdict with that number of checks."""
    assert done.returncode == 0, done.stdout + done.stderr
    assert report_text is not None, f"no run report at {report_file}"
    report = json.loads(report_text)
    assert [tuple(entry["window"]) for entry in report["backfill"]] == [
        (start.isoformat(), end.isoformat()) for start, end in PLANNED
    ]
    assert all(entry["resumed"] is False and entry["report"] for entry in report["backfill"])
    check = report["reconciliation"]
    assert check is not None, "the backfill was not reconciled"
    repositories = len(sim.truth("repositories"))
    assert check["checked"] == repositories * len(PLANNED) * (2 + PR_STATES[edition]) > 0
    assert check["ok"] is True, check
    assert not [d for d in check["differences"] if d["verdict"] == "mismatch"], check
    if edition == "server":  # UTC times: no edge tolerance, so no difference at all
        assert check["differences"] == [], check
    assert any(
        line.startswith(
            "reconciliation with the API's statistics: PASSED "
            f"({check['checked']} checks, 0 mismatches"
        )
        for line in done.stdout.splitlines()
    ), done.stdout


# --------------------------------------------------------------------------------------------
# one cloud backfill, then the same command again
# --------------------------------------------------------------------------------------------
@dataclass
class ParquetBackfill:
    sim: Simulator
    folder: Path
    first: subprocess.CompletedProcess[str]
    first_report: str | None  # the report file right after the first run (if written)
    tables: dict[str, tuple[int, Counter[tuple[Any, ...]]]]
    again: subprocess.CompletedProcess[str]
    again_report: str | None
    again_log: list[dict[str, Any]]  # what the host saw during the rerun
    again_tables: dict[str, tuple[int, Counter[tuple[Any, ...]]]]

    @property
    def lake(self) -> Path:
        return self.folder / "lake"

    @property
    def report_file(self) -> Path:
        return self.folder / "data.report.json"


def read_report(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.exists() else None


@pytest.fixture(scope="module")
def cloud_backfill(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ParquetBackfill]:
    """The whole tiny cloud history backfilled into Delta tables through the command line,
    then the same command again."""
    folder = tmp_path_factory.mktemp("parquet_backfill_cloud")
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        env = cli_env(sim)
        report_file = folder / "data.report.json"
        first = run_parquet(folder, env, *backfill_command())
        first_report = read_report(report_file)
        report_file.unlink(missing_ok=True)
        tables = delta_snapshot(folder / "lake") if (folder / "lake" / DATASET).is_dir() else {}
        before = sim.requests()["total"]
        again = run_parquet(folder, env, *backfill_command())
        again_log = log_since(sim, before)
        yield ParquetBackfill(
            sim,
            folder,
            first,
            first_report,
            tables,
            again,
            read_report(report_file),
            again_log,
            delta_snapshot(folder / "lake"),
        )


def test_cloud_backfill_lands_the_truth_in_delta_tables(cloud_backfill: ParquetBackfill) -> None:
    """A cloud backfill of the whole tiny history into parquet loads every planned window
    (one line each, none skipped), writes Delta tables (no DuckDB file), and the commit and
    pull-request tables equal the truth of the range by key and value, each key once."""
    b = cloud_backfill
    assert_all_windows_loaded(b.first.stdout)
    assert not (b.folder / "data.duckdb").exists(), "parquet must not write the DuckDB file"
    assert {"cloud_commits", "cloud_pull_requests", "cloud_commit_parents"} <= set(b.tables)
    assert_delta_equal_truth(b.lake, b.sim, "cloud")


def test_cloud_backfill_exits_0_and_reconciles_the_delta_tables(
    cloud_backfill: ParquetBackfill,
) -> None:
    """The same first run exits 0 and its report (next to the --duckdb path) has one entry per
    window and a reconciliation over the Delta tables: every repository, window and measure
    checked, no mismatch, and the PASSED verdict on stdout."""
    b = cloud_backfill
    assert_clean_reconciled_report(b.first, b.report_file, b.first_report, b.sim, "cloud")


def test_cloud_backfill_rerun_skips_every_window(cloud_backfill: ParquetBackfill) -> None:
    """The same backfill again exits 0: every window is `finished earlier, skipped`, the host
    sees no commit or pull-request list request of a scope (the workspace lists only, for
    scopes that appeared since), and no Delta table gets a new version or a changed row."""
    b = cloud_backfill
    assert b.again.returncode == 0, b.again.stdout + b.again.stderr
    lines = window_lines(b.again.stdout)
    assert sorted(lines) == [1, 2, 3, 4], b.again.stdout
    assert all(what == "finished earlier, skipped" for _, _, what in lines.values())
    assert "backfill done: 4 windows, 4 already finished before" in b.again.stdout.splitlines()
    listed = [
        e
        for e in b.again_log
        if e["endpoint"].startswith(("commits.list.", "pull-requests.list."))
        and not e["endpoint"].endswith(".workspace")  # the range's discovery: new scopes?
    ]
    assert not listed, f"finished windows were read again: {listed[:3]}"
    assert b.tables and all(rows for _, rows in b.tables.values())
    assert b.again_tables == b.tables
    assert b.again_report is not None
    report = json.loads(b.again_report)
    assert [(tuple(e["window"]), e["resumed"], e["report"]) for e in report["backfill"]] == [
        ((start.isoformat(), end.isoformat()), True, None) for start, end in PLANNED
    ]


# --------------------------------------------------------------------------------------------
# a server backfill, three windows at once
# --------------------------------------------------------------------------------------------
@dataclass
class ServerBackfill:
    sim: Simulator
    folder: Path
    done: subprocess.CompletedProcess[str]
    report: str | None


@pytest.fixture(scope="module")
def server_backfill(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerBackfill]:
    """The whole tiny self-hosted history backfilled into Delta tables, three windows at
    once."""
    folder = tmp_path_factory.mktemp("parquet_backfill_server")
    with Simulator(SimConfig(edition="server", size="tiny", now=FIXED_NOW)) as sim:
        done = run_parquet(folder, cli_env(sim), *backfill_command("--parallel-windows", "3"))
        yield ServerBackfill(sim, folder, done, read_report(folder / "data.report.json"))


def test_server_parallel_backfill_lands_the_truth_in_delta_tables(
    server_backfill: ServerBackfill,
) -> None:
    """Three windows written at once into the same Delta tables lose nothing and duplicate
    nothing: every window loaded, and the server commit and pull-request tables equal the truth
    of the range by key and value, each key once."""
    b = server_backfill
    assert_all_windows_loaded(b.done.stdout)
    assert_delta_equal_truth(b.folder / "lake", b.sim, "server")


def test_server_parallel_backfill_exits_0_and_reconciles_exactly(
    server_backfill: ServerBackfill,
) -> None:
    """The parallel server backfill exits 0 with a clean reconciliation over the Delta tables:
    every repository, window and measure checked and (UTC times) not one difference."""
    b = server_backfill
    assert_clean_reconciled_report(b.done, b.folder / "data.report.json", b.report, b.sim, "server")
