"""`repo-analytics backfill` killed with SIGKILL at many seeded random moments, then rerun.

Each edition on each destination: a tiny host, a backfill of three 10-day windows (one after
another, default levels and resources) run by the real command in a subprocess and killed (the
whole process group) several times, rerun after each kill, then run once more to the end.
The kills are placed from a seeded RNG (REPO_ANALYTICS_CRASH_SEED; REPO_ANALYTICS_CRASH_KILLS
of them, default 4), each among the points the next run will still pass (windows left to read,
packages left to settle, as dlt's package folders show), some by the clock (while reading the
API) and some by watching the pipeline's package folders: a package extracted,
a package normalized, a load in progress (jobs completed by this run in a package not yet
loaded: its own, or one a killed run left, which the rerun settles first). Afterwards every
data table (dlt's `_dlt*` columns aside) equals the same table of a never-killed backfill of
the same range, the repository level tables equal the simulator's truth, and every natural
key is held once, after every kill and at the end. The phases under way at each kill are
recorded, and each case must have killed at least once inside a load.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import deltalake
import duckdb
import pytest

from simulator import Simulator
from sources.repo_analytics.editions import edition_spec
from tests.crash.test_views_crash import listing, load_ids, snapshot
from tests.destinations.test_parquet_backfill import delta_rows
from tests.runs.test_backfill import (
    CLOCK,
    SLACK,
    assert_rows_equal_truth,
    cli_args,
    cli_env,
    rows_of,
)
from tests.selfhosted.truth import PRIMARY_KEYS as SERVER_PRIMARY_KEYS
from tests.support.loader import CLOUD_PRIMARY_KEYS, DATASET, DESTINATIONS

MakeSim = Callable[..., Simulator]
Row = tuple[Any, ...]

# Where the kills land comes from this seed (set the variable to explore other points).
SEED = int(os.environ.get("REPO_ANALYTICS_CRASH_SEED", "20260601"))
KILLS = int(os.environ.get("REPO_ANALYTICS_CRASH_KILLS", "4"))
RUN_LIMIT_SECONDS = 300
# Three 10-day windows to the host's clock, one after another on the one pipeline.
SINCE = datetime(2026, 5, 2, tzinfo=UTC)
BACKFILL = (
    "backfill",
    "--since",
    SINCE.date().isoformat(),
    "--until",
    CLOCK.date().isoformat(),
    "--window-days",
    "10",
)
WINDOWS = 3
CASES = [(edition, destination) for edition in ("cloud", "server") for destination in DESTINATIONS]
NATURAL_KEYS: Mapping[str, tuple[str, ...]] = {**CLOUD_PRIMARY_KEYS, **SERVER_PRIMARY_KEYS}
LOADING = "load in progress"  # a package in load/normalized with completed jobs


# --------------------------------------------------------------------------------------------
# dlt's package folders, over every pipeline folder (there is one: the pipeline's)
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Look:
    """The package folders at one moment of a run."""

    elapsed: float
    extracted: frozenset[str]  # load ids waiting to be normalized
    normalized: Mapping[str, int]  # load ids waiting to be (or being) loaded -> completed jobs
    loaded: frozenset[str]

    @property
    def pending(self) -> int:
        """Packages not yet loaded: each a window's whole extract, which a rerun finishes."""
        return len(self.extracted | set(self.normalized))


def look(pipelines: Path, elapsed: float = 0.0) -> Look:
    extracted: set[str] = set()
    normalized: dict[str, int] = {}
    loaded: set[str] = set()
    for name in listing(pipelines):
        extracted |= load_ids(pipelines / name / "normalize" / "extracted")
        waiting = pipelines / name / "load" / "normalized"
        for load_id in load_ids(waiting):
            normalized[load_id] = len(listing(waiting / load_id / "completed_jobs"))
        loaded |= load_ids(pipelines / name / "load" / "loaded")
    return Look(elapsed, frozenset(extracted), normalized, frozenset(loaded))


@dataclass
class Watch:
    """What one run did to the package folders: when each new package reached each phase."""

    before: frozenset[str]  # load ids of earlier runs
    jobs_before: Mapping[str, int]  # completed jobs of earlier runs' packages not yet loaded
    seen: dict[str, dict[str, float]] = field(
        default_factory=lambda: {"extracted": {}, "normalized": {}, "loaded": {}}
    )

    def update(self, now: Look) -> None:
        normalized = frozenset(now.normalized)
        for phase, ids in (
            ("extracted", now.extracted),
            ("normalized", normalized),
            ("loaded", now.loaded),
        ):
            for load_id in ids - self.before:
                self.seen[phase].setdefault(load_id, now.elapsed)

    def phases(self, now: Look) -> frozenset[str]:
        """What was under way: packages extracted, normalized, being loaded (jobs completed
        by this run); or none (reading the API, or between steps)."""
        found = {"extracted"} if now.extracted else set()
        for load_id, jobs in now.normalized.items():
            found.add(LOADING if jobs > self.jobs_before.get(load_id, 0) else "normalized")
        return frozenset(found or {"no package pending"})

    def jobs_done(self, now: Look) -> int:
        """The most jobs this run completed in one package not yet loaded."""
        return max(
            (jobs - self.jobs_before.get(load_id, 0) for load_id, jobs in now.normalized.items()),
            default=0,
        )

    def reached(self, phase: str, ordinal: int) -> float | None:
        """When the run's `ordinal`-th new package reached `phase` (None: not yet)."""
        times = sorted(self.seen[phase].values())
        return times[ordinal - 1] if len(times) >= ordinal else None


@dataclass(frozen=True)
class Trigger:
    """When to send SIGKILL, by the clock or by what the package folders show."""

    name: str
    fires: Callable[[Watch, Look], bool]


def after(seconds: float) -> Trigger:
    return Trigger(f"{seconds:.2f} s after the start", lambda watch, now: now.elapsed >= seconds)


def package_reached(phase: str, ordinal: int, delay: float) -> Trigger:
    """`delay` after the run's `ordinal`-th new package was `phase` (extracted, normalized)."""

    def fires(watch: Watch, now: Look) -> bool:
        at = watch.reached(phase, ordinal)
        return at is not None and now.elapsed >= at + delay

    return Trigger(f"{delay:.2f} s after package {ordinal} was {phase}", fires)


def loading(jobs: int) -> Trigger:
    """Once this run has completed `jobs` jobs of a package not yet loaded (its own, or one a
    killed run left, which the backfill settles first)."""
    return Trigger(f"{jobs} jobs into a load", lambda watch, now: watch.jobs_done(now) >= jobs)


# --------------------------------------------------------------------------------------------
# the command line, watched and killed
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    edition: str
    destination: str
    sim: Simulator

    def command(self, folder: Path) -> list[str]:
        target = (
            ("--destination", "parquet", "--parquet-dir", str(folder / "lake"))
            if self.destination == "parquet"
            else ()
        )
        return cli_args(folder, *target, *BACKFILL)


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    watch: Watch
    killed_in: frozenset[str] | None = None  # the phases under way when SIGKILL was sent


def backfill(case: Case, folder: Path, trigger: Trigger | None = None) -> Run:
    """The backfill on `folder` (data and working folders), killed when `trigger` fires."""
    folder.mkdir(parents=True, exist_ok=True)
    pipelines = folder / "pipelines"
    now = look(pipelines)
    watch = Watch(now.extracted | frozenset(now.normalized) | now.loaded, now.normalized)
    started = time.monotonic()
    process = subprocess.Popen(
        case.command(folder),
        env=cli_env(case.sim),
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    killed_in = None
    try:
        while process.poll() is None:
            now = look(pipelines, time.monotonic() - started)
            watch.update(now)
            if trigger is not None and trigger.fires(watch, now):
                os.killpg(process.pid, signal.SIGKILL)
                killed_in = watch.phases(now)
                break
            if now.elapsed > RUN_LIMIT_SECONDS:
                pytest.fail(f"the backfill still ran after {RUN_LIMIT_SECONDS} s")
            time.sleep(0.005)
        stdout, stderr = process.communicate(timeout=RUN_LIMIT_SECONDS)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    watch.update(look(pipelines, time.monotonic() - started))
    return Run(process.returncode, stdout, stderr, time.monotonic() - started, watch, killed_in)


# --------------------------------------------------------------------------------------------
# the tables, from either destination
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]  # sorted, without dlt's `_dlt*` columns
    rows: Counter[Row]


def duckdb_tables(db_file: Path) -> dict[str, Table]:
    if not db_file.exists():
        return {}
    found = {}
    with duckdb.connect(str(db_file), read_only=True) as con:
        names = [
            t
            for (t,) in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND "
                # not dlt's tables nor the runs' records (`_repo_analytics_runs`)
                "table_type = 'BASE TABLE' AND NOT starts_with(table_name, '_')",
                [DATASET],
            ).fetchall()
        ]
        for name in names:
            columns = tuple(
                sorted(
                    c
                    for (c,) in con.execute(
                        "SELECT column_name FROM information_schema.columns WHERE table_schema = ? "
                        "AND table_name = ?",
                        [DATASET, name],
                    ).fetchall()
                    if not c.startswith("_dlt")
                )
            )
            names_sql = ", ".join(f'"{c}"' for c in columns)
            rows = con.execute(f'SELECT {names_sql} FROM "{DATASET}"."{name}"').fetchall()
            found[name] = Table(columns, Counter(rows))
    return found


def delta_tables(lake: Path, killed: bool = False) -> dict[str, Table]:
    """Every Delta table of the dataset as deltalake reads it. After a kill a table may have
    been made but not yet committed (`killed`): it holds no rows yet, and is left out."""
    found = {}
    folder = lake / DATASET
    for path in sorted(folder.iterdir()) if folder.is_dir() else ():
        if path.name.startswith("_dlt") or not (path / "_delta_log").is_dir():
            continue
        try:
            data = deltalake.DeltaTable(str(path)).to_pyarrow_table()
        except deltalake.exceptions.TableNotFoundError:
            if killed:
                continue
            raise
        columns = tuple(sorted(c for c in data.column_names if not c.startswith("_dlt")))
        found[path.name] = Table(
            columns, Counter(zip(*(data.column(c).to_pylist() for c in columns), strict=True))
        )
    return found


def tables(case: Case, folder: Path, killed_copy: Path | None = None) -> dict[str, Table]:
    """The data tables in `folder`; after a kill, read from a fresh copy in `killed_copy`."""
    if case.destination == "parquet":
        return delta_tables(folder / "lake", killed=killed_copy is not None)
    db_file = folder / "data.duckdb"
    if killed_copy is not None and db_file.exists():  # with the WAL a killed writer leaves
        db_file = snapshot(db_file, killed_copy)
    return duckdb_tables(db_file)


def duplicate_keys(found: Mapping[str, Table]) -> dict[str, int]:
    """Table -> rows beyond one per natural key (empty when every key is held once)."""
    extra = {}
    for name, table in found.items():
        assert name in NATURAL_KEYS, f"`{name}` has no documented natural key"
        where = [table.columns.index(c) for c in NATURAL_KEYS[name]]
        keys = Counter(tuple(row[i] for i in where) for row in table.rows.elements())
        if sum(keys.values()) != len(keys):
            extra[name] = sum(keys.values()) - len(keys)
    return extra


def assert_equal_truth(case: Case, folder: Path) -> None:
    """The repository-level tables equal the truth of [SINCE, CLOCK), as the backfill tests
    decide it: commits whose instant lies in the range must be there, none before the cloud's
    26 h slack (its commit date has no zone) or after the range may be; pull requests are
    exactly those updated within the range."""

    def read(table: str, columns: tuple[str, ...]) -> list[Row]:
        if case.destination == "parquet":
            return delta_rows(folder / "lake", table, columns)
        return rows_of(folder / "data.duckdb", table, columns)

    allowed = (SINCE - SLACK if case.edition == "cloud" else SINCE, CLOCK)
    assert_rows_equal_truth(read, case.sim, case.edition, required=(SINCE, CLOCK), allowed=allowed)


# --------------------------------------------------------------------------------------------
# the test
# --------------------------------------------------------------------------------------------
def next_kill(
    rng: random.Random, clean: Run, jobs: int, now: Look, first: bool, loads: int
) -> Trigger | None:
    """A random kill point among those the next run will pass, given the package folders
    before it: None when the backfill is done (no window left to read, no package pending).
    The first kill is inside a load, so no case can pass by killing only before anything
    happened."""
    left = loads - len(now.loaded) - now.pending  # windows the run will read from the API
    started = max(now.normalized.values(), default=0)  # jobs a pending package already has
    kinds: list[Callable[[], Trigger]] = []
    if left or jobs - 1 - started >= 1:
        kinds.append(lambda: loading(rng.randint(1, jobs - 1 - (0 if left else started))))
    if left:
        first_package = clean.watch.reached("extracted", 1) or clean.seconds
        kinds += [
            lambda: after(rng.uniform(0.2, 1.0) * first_package),  # reading the API
            lambda: package_reached(
                "extracted", rng.randint(1, min(2, left)), rng.uniform(0.0, 0.3)
            ),
            lambda: package_reached(
                "normalized", rng.randint(1, min(2, left)), rng.uniform(0.0, 0.3)
            ),
        ]
    if not kinds:
        return None
    return kinds[0]() if first else rng.choice(kinds)()


@pytest.mark.parametrize(("edition", "destination"), CASES)
def test_killed_backfills_rerun_to_a_clean_backfills_tables(
    edition: str, destination: str, make_sim: MakeSim, tmp_path: Path
) -> None:
    """Kills at seeded random moments, a rerun after each, a final rerun that exits 0: every
    table equals a never-killed backfill's, the repository tables the truth, each key once."""
    case = Case(edition, destination, make_sim(edition=edition))
    rng = random.Random(f"{SEED}/{edition}/{destination}")
    clean = backfill(case, tmp_path / "clean")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "Traceback" not in clean.stdout + clean.stderr
    # a load per window, and one for the CSV exports' window where the edition has exports
    loads = WINDOWS + any(e.kind == "csv" for e in edition_spec(edition).endpoints)
    # and, last, the reconciliation's verdicts on the windows: a state-only load
    # (`pipelines/runs/window_ledger.py`)
    assert len(clean.watch.seen["loaded"]) == loads + 1, clean.watch.seen
    expected = tables(case, tmp_path / "clean")
    assert expected and all(t.rows for t in expected.values()), "a clean table is empty"
    assert duplicate_keys(expected) == {}
    clean_pipelines = tmp_path / "clean" / "pipelines"
    packages = sorted(
        (load_id, clean_pipelines / name / "load" / "loaded" / load_id / "completed_jobs")
        for name in listing(clean_pipelines)
        for load_id in load_ids(clean_pipelines / name / "load" / "loaded")
    )
    # the windows' packages: the verdicts' state-only package, the newest, has few jobs
    jobs = min(len(listing(path)) for _, path in packages[:-1])
    assert jobs >= 4, "too few jobs in a package to kill inside its load"

    folder = tmp_path / "crashed"
    log = [
        f"seed {SEED}, {edition} on {destination}: clean backfill {clean.seconds:.1f} s, "
        f"{jobs}+ jobs a package"
    ]
    phases: list[frozenset[str]] = []
    duplicates: dict[str, dict[str, int]] = {}
    for number in range(1, KILLS + 3):  # a kill point the run passed before it was seen: again
        trigger = next_kill(
            rng, clean, jobs, look(folder / "pipelines"), first=not phases, loads=loads
        )
        if trigger is None or len(phases) == KILLS:
            break
        run = backfill(case, folder, trigger)
        output = run.stdout + run.stderr
        assert "Traceback" not in output, (log, output)
        if run.killed_in is None:  # the run ended before the trigger fired
            log.append(
                f"run {number} ({trigger.name}): not killed, exit {run.returncode} "
                f"after {run.seconds:.1f} s"
            )
            assert run.returncode == 0, (log, output)
            continue
        log.append(
            f"run {number} ({trigger.name}): killed after {run.seconds:.1f} s, "
            f"under way: {', '.join(sorted(run.killed_in))}"
        )
        assert run.returncode == -signal.SIGKILL, (log, output)
        phases.append(run.killed_in)
        found = duplicate_keys(tables(case, folder, tmp_path / f"after-kill-{number}"))
        if found:
            duplicates[f"after kill {number}"] = found

    final = backfill(case, folder)
    log.append(
        f"final run: exit {final.returncode} after {final.seconds:.1f} s; {len(phases)} kills"
    )
    print("\n".join(log))
    output = final.stdout + final.stderr
    assert final.returncode == 0, (log, output)
    assert "Traceback" not in output, (log, output)
    assert f"backfill done: {WINDOWS} windows, " in final.stdout, (log, output)
    left = look(folder / "pipelines")
    assert not left.extracted and not left.normalized, f"packages still pending: {left}"
    # not vacuous: at least one kill landed while a package was being loaded
    assert any(LOADING in seen for seen in phases), log

    got = tables(case, folder)
    found = duplicate_keys(got)
    if found:
        duplicates["at the end"] = found
    assert duplicates == {}, (duplicates, log)
    assert sorted(got) == sorted(expected), log
    for name, table in expected.items():
        assert got[name].columns == table.columns, (name, log)
        missing, extra = table.rows - got[name].rows, got[name].rows - table.rows
        assert not missing and not extra, (
            f"{name}: {sum(missing.values())} rows missing, e.g. {list(missing)[:2]}; "
            f"{sum(extra.values())} rows extra, e.g. {list(extra)[:2]}",
            log,
        )
    assert_equal_truth(case, folder)
