"""The command line's run-time behaviour: reconciliation after `load` and `backfill` (exit 5,
`--no-reconcile`), `--progress auto|on|off`, `--parallel-windows`, and `state` / `reset
--windows` across the window pipelines.

Real simulators over HTTP, real DuckDB files under tmp_path, the real `repo-analytics`
command in subprocesses. Expected values come from the simulator's ground truth
(`sim.truth`), its request log (`sim.requests`), the DuckDB files, or the documented contract.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import duckdb
import pytest

from simulator import SimConfig, Simulator
from tests.runs.test_backfill import (
    SLACK,
    assert_tables_equal_truth,
    cli_env,
    dated,
    from_z,
    log_since,
    query,
    rows_of,
    run_cli,
    window_lines,
)
from tests.support import FIXED_NOW
from tests.support.loader import DATASET

VERDICT = "reconciliation with the API's statistics: "
MISMATCH_LINE = re.compile(
    r"^  mismatch (\S+(?: \S+)*) (\d{4}-\d\d-\d\d\.\.\d{4}-\d\d-\d\d) "
    r"(\w+): API (-?\d+), landed (-?\d+)$"
)
# the server load: read from 2026-05-20, reconciled over the 3-day look-back before the end
LOAD_DATES = ("--start-date", "2026-05-20", "--end-date", "2026-05-30T00:00:00+00:00")
LOOKBACK = (datetime(2026, 5, 27, tzinfo=UTC), datetime(2026, 5, 30, tzinfo=UTC))
LOOKBACK_LABEL = "2026-05-27..2026-05-30"
SERVER_PR_STATES = ("open", "merged", "declined")
TOP_LEVEL_MATCHED = "{} window totals matched by the top-level statistics"
CLOUD_PR_STATES = ("open", "merged", "declined", "superseded")


def day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def planned(since: str, until: str, days: int) -> list[tuple[datetime, datetime]]:
    """Half-open windows of `days` from since to until, the last one cut at until."""
    start, end, step = day(since), day(until), timedelta(days=days)
    out = []
    while start < end:
        out.append((start, min(start + step, end)))
        start += step
    return out


def label(window: tuple[datetime, datetime]) -> str:
    return f"{window[0].date()}..{window[1].date()}"


def report_of(folder: Path) -> dict[str, Any]:
    """The run report written next to `data.duckdb`."""
    return json.loads((folder / "data.report.json").read_text(encoding="utf-8"))


def verdict_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(VERDICT)]


def mismatch_lines(stdout: str) -> set[tuple[str, str, str, int, int]]:
    out = set()
    for line in stdout.splitlines():
        match = MISMATCH_LINE.match(line)
        if match:
            out.add((match[1], match[2], match[3], int(match[4]), int(match[5])))
    return out


def statistics_requests(log: list[dict[str, Any]]) -> Counter[tuple[str, tuple[datetime, ...]]]:
    """(endpoint, [since, until)) of every statistics request, counted."""
    return Counter((e["endpoint"], dated(e)) for e in log if "statistics" in e["endpoint"])


@dataclass
class Run:
    """One command's outcome, its run report (None when none was written) and its requests."""

    returncode: int
    stdout: str
    stderr: str
    report: dict[str, Any] | None
    log: list[dict[str, Any]]


def run(sim: Simulator, folder: Path, *command: str, **extra_env: str) -> Run:
    before = sim.requests()["total"]
    report = folder / "data.report.json"
    if report.exists():
        report.unlink()
    done = run_cli(folder, cli_env(sim, **extra_env), *command)
    return Run(
        done.returncode,
        done.stdout,
        done.stderr,
        report_of(folder) if report.exists() else None,
        log_since(sim, before),
    )


@pytest.fixture(scope="module")
def cloud() -> Iterator[Simulator]:
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        yield sim


# --------------------------------------------------------------------------------------------
# A. reconciliation after a nightly `load` (server edition: UTC times, exact)
# --------------------------------------------------------------------------------------------
@dataclass
class ServerLoads:
    sim: Simulator
    folder: Path
    clean: Run  # commits and pull requests, reconciled
    repositories: list[tuple[str, str]]  # (project_key, repository_slug) in server_commits
    stale: tuple[str, str, str, int]  # (project_key, slug, id, lines_added) added after
    failed: Run  # the same load again, reconciled: the stale row is found extra
    skipped: Run  # the same with --no-reconcile


@pytest.fixture(scope="module")
def server_loads(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerLoads]:
    """A server `load` of commits and pull requests; then a stale commit row the host does
    not have (as after a force-push upstream) put into the look-back, and the same `load`
    again, reconciled: merging re-read rows by key leaves the stale one; then the same with
    `--no-reconcile`."""
    folder = tmp_path_factory.mktemp("server_load")
    scope = ("--levels", "repository")
    with Simulator(SimConfig(edition="server", size="tiny", now=FIXED_NOW)) as sim:
        clean = run(
            sim, folder, "load", *LOAD_DATES, *scope, "--resources", "commits,pull_requests"
        )
        db_file = folder / "data.duckdb"
        repositories = [
            tuple(r)
            for r in query(
                db_file,
                "SELECT DISTINCT project_key, repository_slug FROM server_commits ORDER BY ALL",
            )
        ]
        # a copy of a look-back commit that added lines, under an id the host never had
        candidates = query(
            db_file,
            "SELECT project_key, repository_slug, id, lines_added FROM server_commits "
            "WHERE author_timestamp >= ? AND author_timestamp < ? AND lines_added > 0 "
            "ORDER BY ALL",
            list(LOOKBACK),
        )
        assert candidates, "no commit of the look-back to copy"
        key, slug, original, added = candidates[len(candidates) // 2]
        stale = (key, slug, "f" * 40, added)
        assert stale[2] not in {c["id"] for c in sim.truth("commits")}
        with duckdb.connect(str(db_file)) as con:
            con.execute(
                f'CREATE TEMP TABLE copy AS SELECT * FROM "{DATASET}".server_commits '
                "WHERE project_key = ? AND repository_slug = ? AND id = ?",
                [key, slug, original],
            )
            con.execute("UPDATE copy SET id = ?", [stale[2]])
            con.execute(f'INSERT INTO "{DATASET}".server_commits SELECT * FROM copy')
        failed = run(
            sim, folder, "load", *LOAD_DATES, *scope, "--resources", "commits,pull_requests"
        )
        skipped = run(
            sim,
            folder,
            "load",
            "--no-reconcile",
            *LOAD_DATES,
            *scope,
            "--resources",
            "commits,pull_requests",
        )
        yield ServerLoads(sim, folder, clean, repositories, stale, failed, skipped)


def test_load_reconciles_its_lookback_and_passes(server_loads: ServerLoads) -> None:
    """A clean server load: exit 0, PASSED, and the report's reconciliation is ok with every
    repository x the look-back window x (commits, lines_added, 3 pull-request states) checked
    and no difference; the statistics asked for are exactly [end - 3 days, end): the global
    level's, whose totals equal the sums of what landed, so no repository is asked."""
    s = server_loads
    clean = s.clean
    assert clean.returncode == 0, clean.stdout + clean.stderr
    checked = len(s.repositories) * 1 * (2 + len(SERVER_PR_STATES))
    assert len(s.repositories) >= 2
    assert verdict_lines(clean.stdout) == [
        f"{VERDICT}PASSED ({checked} checks, 0 mismatches; {TOP_LEVEL_MATCHED.format(2)})"
    ]
    assert not mismatch_lines(clean.stdout)
    assert clean.report is not None
    assert clean.report["reconciliation"] == {
        "checked": checked,
        "ok": True,
        "differences": [],
        "notes": [],
        "unchecked": [],
        "windows_confirmed_by_top_level": 2,  # commits and pull requests
        "statistics_rows": {"written_by_run": 0, "rechecked": 0},
    }  # it read no statistics
    # the load read from its start date; it reconciled the look-back only, at the top level
    lists = {dated(e) for e in clean.log if ".list.repository" in e["endpoint"]}
    assert lists == {(day("2026-05-20"), LOOKBACK[1])}
    assert statistics_requests(clean.log) == {
        ("commits.statistics.global", LOOKBACK): 1,
        ("pull-requests.statistics.global", LOOKBACK): 1,
    }


def test_a_stale_commit_fails_reconciliation_with_exit_5(server_loads: ServerLoads) -> None:
    """A stale commit row the host does not have, and the load run again: exit 5, FAILED, a
    mismatch line for that repository, the look-back window and `commits` with landed = API
    + 1 (and lines added over by the row's lines); the API's numbers are the truth's, and the
    report's differences are exactly these."""
    s = server_loads
    failed = s.failed
    assert failed.returncode == 5, failed.stdout + failed.stderr
    key, slug, _, added = s.stale
    repo = f"{key}/{slug}"
    in_repo = [
        c
        for c in s.sim.truth("commits")
        if (c["repository"]["project"]["key"], c["repository"]["slug"]) == (key, slug)
        and LOOKBACK[0] <= from_z(c["authorTimestamp"]) < LOOKBACK[1]
    ]
    truth_commits = len(in_repo)
    truth_added = sum(c["linesOfCode"]["added"] for c in in_repo)
    assert truth_commits >= 1 and added > 0
    expected = {
        (repo, LOOKBACK_LABEL, "commits", truth_commits, truth_commits + 1),
        (repo, LOOKBACK_LABEL, "lines_added", truth_added, truth_added + added),
    }
    checked = len(s.repositories) * (2 + len(SERVER_PR_STATES))
    assert verdict_lines(failed.stdout) == [
        f"{VERDICT}FAILED ({checked} checks, 2 mismatches; {TOP_LEVEL_MATCHED.format(1)})"
    ]
    # the global commit totals differ: every repository's commits are asked; the pull
    # requests' totals still match, and no repository's are
    assert statistics_requests(failed.log) == {
        ("commits.statistics.global", LOOKBACK): 1,
        ("pull-requests.statistics.global", LOOKBACK): 1,
        ("commits.statistics.repository", LOOKBACK): len(s.repositories),
    }
    assert mismatch_lines(failed.stdout) == expected
    assert (
        f"  mismatch {repo} {LOOKBACK_LABEL} commits: API {truth_commits}, landed "
        f"{truth_commits + 1}" in failed.stdout.splitlines()
    )
    assert failed.report is not None
    reconciliation = failed.report["reconciliation"]
    assert reconciliation["ok"] is False and reconciliation["checked"] == checked
    assert {
        (d["repository"], d["window"], d["measure"], d["api"], d["landed"], d["verdict"])
        for d in reconciliation["differences"]
    } == {(*e, "mismatch") for e in expected}
    assert len(reconciliation["differences"]) == 2
    # commits were read again: re-reading does not remove a row the host no longer has
    assert [e for e in failed.log if e["endpoint"].startswith("commits.list")]


def test_no_reconcile_skips_the_check(server_loads: ServerLoads) -> None:
    """The same load with `--no-reconcile`: exit 0, no verdict, the report's reconciliation is
    null, no statistics requested, though the stale commit is still there."""
    s = server_loads
    skipped = s.skipped
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    assert "load ok:" in skipped.stdout
    assert VERDICT not in skipped.stdout and "mismatch" not in skipped.stdout
    assert skipped.report is not None
    assert "reconciliation" in skipped.report and skipped.report["reconciliation"] is None
    assert skipped.report["load"]
    assert statistics_requests(s.failed.log), "the reconciled run asked for statistics"
    assert not statistics_requests(skipped.log)
    assert skipped.log, "the load itself ran"
    assert rows_of(
        s.folder / "data.duckdb", "server_commits", ("id",), f"WHERE id = '{s.stale[2]}'"
    )


def test_a_commits_only_load_is_reconciled_at_the_top_level(tmp_path: Path) -> None:
    """A load of commits alone into a new file (no pull-request table): PASSED with every
    repository's commits and lines checked, through the global commit statistics alone; the
    landed commits of the look-back are the truth's."""
    with Simulator(SimConfig(edition="server", size="tiny", now=FIXED_NOW)) as sim:
        done = run(
            sim, tmp_path, "load", *LOAD_DATES, "--levels", "repository", "--resources", "commits"
        )
        truth = [
            c
            for c in sim.truth("commits")
            if LOOKBACK[0] <= from_z(c["authorTimestamp"]) < LOOKBACK[1]
        ]
    assert done.returncode == 0, done.stdout + done.stderr
    repositories = query(
        tmp_path / "data.duckdb",
        "SELECT DISTINCT project_key, repository_slug FROM server_commits",
    )
    checked = len(repositories) * 2
    assert verdict_lines(done.stdout) == [
        f"{VERDICT}PASSED ({checked} checks, 0 mismatches; {TOP_LEVEL_MATCHED.format(1)})"
    ]
    assert statistics_requests(done.log) == {("commits.statistics.global", LOOKBACK): 1}
    (landed,) = query(
        tmp_path / "data.duckdb",
        "SELECT count(*) FROM server_commits WHERE author_timestamp >= ? AND author_timestamp < ?",
        list(LOOKBACK),
    )[0]
    assert truth and landed == len(truth)


# --------------------------------------------------------------------------------------------
# A. reconciliation after a cloud `backfill`, per window; B. --progress auto (the default)
# --------------------------------------------------------------------------------------------
BACKFILL = (
    "backfill",
    "--since",
    "2026-05-01",
    "--until",
    "2026-06-01",
    "--window-days",
    "10",
    "--levels",
    "repository",
    "--resources",
    "commits,pull_requests",
)
BACKFILL_WINDOWS = planned("2026-05-01", "2026-06-01", 10)


@pytest.fixture(scope="module")
def cloud_backfill(cloud: Simulator, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Run]:
    folder = tmp_path_factory.mktemp("cloud_backfill")
    return folder, run(cloud, folder, *BACKFILL)


def test_backfill_reconciles_each_window(
    cloud: Simulator, cloud_backfill: tuple[Path, Run]
) -> None:
    """A cloud backfill in four windows: exit 0, PASSED, and every repository with commits is
    reconciled in every window it loaded: checked = repositories x windows x (2 + 4 states);
    no mismatch, pull requests (exact UTC update times) equal everywhere."""
    folder, done = cloud_backfill
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(BACKFILL_WINDOWS) == 4
    assert sorted(window_lines(done.stdout)) == [1, 2, 3, 4]
    repositories = [
        slug
        for (slug,) in query(
            folder / "data.duckdb", "SELECT DISTINCT repository_slug FROM cloud_commits"
        )
    ]
    assert len(repositories) >= 2
    checked = len(repositories) * len(BACKFILL_WINDOWS) * (2 + len(CLOUD_PR_STATES))
    verdict = verdict_lines(done.stdout)
    assert len(verdict) == 1 and verdict[0].startswith(
        f"{VERDICT}PASSED ({checked} checks, 0 mismatches"
    ), done.stdout
    assert not mismatch_lines(done.stdout)
    assert done.report is not None
    reconciliation = done.report["reconciliation"]
    assert reconciliation["checked"] == checked and reconciliation["ok"] is True
    assert reconciliation["notes"] == []
    labels = {label(w) for w in BACKFILL_WINDOWS}
    for difference in reconciliation["differences"]:
        assert difference["verdict"] == "within_edge_tolerance", difference
        assert difference["measure"] in ("commits", "lines_added"), difference
        assert difference["repository"] in repositories and difference["window"] in labels
    assert [w["window"] for w in done.report["backfill"]] == [
        [s.isoformat(), e.isoformat()] for s, e in BACKFILL_WINDOWS
    ]
    # the API's statistics asked for exactly each window: the commit statistics of each
    # repository (the cloud has none at the workspace level), the pull requests' of the
    # workspace, whose totals equal the sums of what landed, so no repository's are asked
    assert statistics_requests(done.log) == {
        **{
            ("commits.changes-statistics.repository", w): len(repositories)
            for w in BACKFILL_WINDOWS
        },
        **{("pull-requests.statistics.workspace", w): 1 for w in BACKFILL_WINDOWS},
    }
    assert reconciliation["windows_confirmed_by_top_level"] == len(BACKFILL_WINDOWS)


def test_progress_auto_without_a_terminal_prints_window_lines(
    cloud_backfill: tuple[Path, Run],
) -> None:
    """`--progress auto` (the default) with captured output: a line per window, in the
    documented form, and no bars on stderr."""
    _, done = cloud_backfill
    assert done.returncode == 0, done.stdout + done.stderr
    lines = window_lines(done.stdout)
    assert sorted(lines) == [1, 2, 3, 4]
    for number, (start, end, what) in lines.items():
        window = BACKFILL_WINDOWS[number - 1]
        assert (start, end) == (str(window[0].date()), str(window[1].date()))
        assert re.match(r"\d+ rows, \d+ requests, \d+ retries, ", what), what
    assert all(f"window {n}/4 " in done.stdout for n in range(1, 5))
    for bar in ("windows:", "requests:", "rows:", "it/s"):
        assert bar not in done.stderr, done.stderr


def windows_of(done: Run) -> list[list[str]]:
    """The backfill's windows in its run report, as [start, end] ISO strings."""
    assert done.report is not None, done.stdout + done.stderr
    return [w["window"] for w in done.report["backfill"]]


def iso(plan: list[tuple[datetime, datetime]]) -> list[list[str]]:
    return [[start.isoformat(), end.isoformat()] for start, end in plan]


def assert_range_equals_truth(sim: Simulator, folder: Path, since: str, until: str) -> None:
    """The repository commits and pull requests in `folder`'s file equal the truth of the
    range (commits' zone-less dates within the cursor slack before `since`)."""
    assert_tables_equal_truth(
        folder / "data.duckdb",
        sim,
        "cloud",
        required=(day(since), day(until)),
        allowed=(day(since) - SLACK, day(until)),
    )


def test_backfill_windows_are_122_days_by_default(cloud: Simulator, tmp_path: Path) -> None:
    """With no `--window-days`, half a year is cut in a 122-day window and the rest (README:
    Window size), and what lands equals the simulator's truth of the range."""
    since, until = "2025-12-01", "2026-06-01"
    done = run(
        cloud,
        tmp_path,
        "backfill",
        "--since",
        since,
        "--until",
        until,
        "--levels",
        "repository",
        "--resources",
        "commits,pull_requests",
        "--no-reconcile",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert windows_of(done) == [
        ["2025-12-01T00:00:00+00:00", "2026-04-02T00:00:00+00:00"],
        ["2026-04-02T00:00:00+00:00", "2026-06-01T00:00:00+00:00"],
    ]
    assert_range_equals_truth(cloud, tmp_path, since, until)


def test_a_backfill_resumes_in_the_window_size_it_began_with(
    cloud: Simulator, tmp_path: Path
) -> None:
    """A backfill begun in 30-day windows (as one begun in 92-day windows, the default before
    122), continued with no `--window-days`: the windows it finished are the first of a 30-day
    plan, skipped with no list request in their range, and the rows equal the truth; an
    explicit `--window-days` wins."""
    scopes = ("--levels", "repository", "--resources", "commits,pull_requests", "--no-reconcile")
    since, began_until, until = "2025-12-01", "2026-01-30", "2026-06-01"
    began = run(
        cloud, tmp_path, "backfill", "--since", since, "--until", began_until,
        "--window-days", "30", *scopes,
    )  # fmt: skip
    assert began.returncode == 0, began.stdout + began.stderr
    assert "backfill: 30-day windows" not in began.stdout
    done = run(cloud, tmp_path, "backfill", "--since", since, "--until", until, *scopes)
    assert done.returncode == 0, done.stdout + done.stderr
    note = "backfill: 30-day windows, the size of the backfill it continues"
    assert note in done.stdout, done.stdout
    plan = planned(since, until, 30)
    assert windows_of(done) == iso(plan)
    lines = window_lines(done.stdout)
    assert [lines[n][2] for n in (1, 2)] == ["finished earlier, skipped"] * 2
    assert f"backfill done: {len(plan)} windows, 2 already finished before" in done.stdout
    lists = [dated(e) for e in done.log if e["endpoint"].endswith(".list.repository")]
    assert lists and all(d is not None and d[1] > day(began_until) for d in lists)
    assert_range_equals_truth(cloud, tmp_path, since, until)
    other = run(
        cloud, tmp_path / "other", "backfill", "--since", since, "--until", began_until,
        "--window-days", "30", *scopes,
    )  # fmt: skip
    assert other.returncode == 0, other.stdout + other.stderr
    chosen = run(
        cloud, tmp_path / "other", "backfill", "--since", since, "--until", until,
        "--window-days", "45", *scopes,
    )  # fmt: skip
    assert chosen.returncode == 0, chosen.stdout + chosen.stderr
    assert "backfill: 30-day windows" not in chosen.stdout
    assert windows_of(chosen) == iso(planned(since, until, 45))
    # a finished window cut at its own run's end tells no size: the default plan
    short = run(
        cloud, tmp_path / "cut", "backfill", "--since", since, "--until", "2025-12-21", *scopes
    )
    assert short.returncode == 0, short.stdout + short.stderr
    longer = run(cloud, tmp_path / "cut", "backfill", "--since", since, "--until", until, *scopes)
    assert longer.returncode == 0, longer.stdout + longer.stderr
    assert "-day windows, the size of the backfill it continues" not in longer.stdout
    assert windows_of(longer) == iso(planned(since, until, 122))
    # but one of 92 days, the former default, is taken for a whole window of its size
    former = planned(since, until, 92)
    legacy = tmp_path / "legacy"
    first = run(
        cloud, legacy, "backfill", "--since", since, "--until", former[0][1].isoformat(),
        "--window-days", "92", *scopes,
    )  # fmt: skip
    assert first.returncode == 0, first.stdout + first.stderr
    rest = run(cloud, legacy, "backfill", "--since", since, "--until", until, *scopes)
    assert rest.returncode == 0, rest.stdout + rest.stderr
    assert "backfill: 92-day windows, the size of the backfill it continues" in rest.stdout
    assert windows_of(rest) == iso(former)
    assert "backfill done: 2 windows, 1 already finished before" in rest.stdout


# --------------------------------------------------------------------------------------------
# B. --progress on / off
# --------------------------------------------------------------------------------------------
def small(until: str) -> tuple[str, ...]:
    """A small backfill of commits from 2026-05-01 in 5-day windows, not reconciled."""
    return (
        "backfill",
        "--since",
        "2026-05-01",
        "--until",
        until,
        "--window-days",
        "5",
        "--levels",
        "repository",
        "--resources",
        "commits",
        "--no-reconcile",
    )


SMALL_RANGE = (day("2026-05-01"), day("2026-05-16"))  # three windows


def test_progress_on_shows_bars_and_window_lines(cloud: Simulator, tmp_path: Path) -> None:
    """`--progress on` without a terminal still shows dlt's bars on stderr (windows, rows,
    requests, retries with the seconds waited), ending at the run's real totals, and the
    per-window lines on stdout; `--no-reconcile` on a backfill: no verdict, report
    reconciliation null."""
    done = run(cloud, tmp_path, "--progress", "on", *small("2026-05-16"))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = window_lines(done.stdout)
    assert sorted(lines) == [1, 2, 3]
    for name in ("windows", "rows", "requests", "retries"):
        assert f"{name}:" in done.stderr, name
    assert re.search(r"retries: \d+it \[[^\]\n]*waited \d+\.\d s\]", done.stderr), done.stderr
    assert re.search(r"windows:\s+100%\|[^|\n]*\|\s*3/3", done.stderr), done.stderr[-2000:]
    per_window = [
        int(re.match(r"\d+ rows, (\d+) requests", what)[1]) for _, _, what in lines.values()
    ]
    shown = [int(n) for n in re.findall(r"requests: (\d+)it", done.stderr)]
    assert shown and shown[-1] == sum(per_window) == len(done.log) > 0
    rows = [int(n) for n in re.findall(r"rows: (\d+)it", done.stderr)]
    assert rows and rows[-1] == sum(int(what.split()[0]) for _, _, what in lines.values())
    assert VERDICT not in done.stdout
    assert done.report is not None and done.report["reconciliation"] is None
    assert_tables_equal_truth(
        tmp_path / "data.duckdb",
        cloud,
        "cloud",
        required=SMALL_RANGE,
        allowed=(SMALL_RANGE[0] - SLACK, SMALL_RANGE[1]),
        prs=False,
    )


def test_progress_off_prints_no_window_lines(cloud: Simulator, tmp_path: Path) -> None:
    """`--progress off` (two windows): no window lines and no bars, the summary still printed
    and every window loaded."""
    done = run(cloud, tmp_path, "--progress", "off", *small("2026-05-11"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert window_lines(done.stdout) == {}
    assert not re.search(r"^window \d", done.stdout, re.MULTILINE)
    assert "backfill done: 2 windows, 0 already finished before" in done.stdout
    for bar in ("windows:", "requests:", "rows:", "it/s"):
        assert bar not in done.stderr, done.stderr
    windows = planned("2026-05-01", "2026-05-11", 5)
    assert {dated(e)[1] for e in done.log if e["endpoint"] == "commits.list.repository"} == {
        end for _, end in windows
    }
    assert_tables_equal_truth(
        tmp_path / "data.duckdb",
        cloud,
        "cloud",
        required=(windows[0][0], windows[-1][1]),
        allowed=(windows[0][0] - SLACK, windows[-1][1]),
        prs=False,
    )


# --------------------------------------------------------------------------------------------
# C. one pipeline, `state`, `reset --windows`
# --------------------------------------------------------------------------------------------
def test_parallel_windows_is_accepted_with_a_note(cloud: Simulator, tmp_path: Path) -> None:
    """`--parallel-windows`, from the days of windows on pipelines of their own, still runs
    (a nightly script using it keeps working): one note on stderr saying it is no longer
    used, exit 0, the windows loaded."""
    done = run(
        cloud,
        tmp_path,
        "backfill",
        "--since",
        "2026-05-11",
        "--until",
        "2026-05-21",
        "--parallel-windows",
        "3",
        "--levels",
        "repository",
        "--resources",
        "commits",
        "--no-reconcile",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        "note: --parallel-windows is no longer used: the windows load one after another on "
        "the pipeline, each reading `concurrency` scopes at once"
    ], done.stderr
    assert "backfill done: 1 windows, 0 already finished before" in done.stdout


PARALLEL = (
    "backfill",
    "--since",
    "2026-05-01",
    "--until",
    "2026-05-21",
    "--window-days",
    "5",
    "--levels",
    "repository",
    "--resources",
    "commits",
    "--no-reconcile",
)
PARALLEL_WINDOWS = planned("2026-05-01", "2026-05-21", 5)


@dataclass
class ParallelRuns:
    folder: Path
    first: Run  # four windows
    info: subprocess.CompletedProcess[str]  # `dlt pipeline repo_analytics info` after it
    state: Run  # `state` after it
    again: Run  # the same backfill: every window finished earlier
    reset: Run  # `reset --resource commits --windows --yes`
    after: Run  # the same backfill after the reset


@pytest.fixture(scope="module")
def parallel_runs(cloud: Simulator, tmp_path_factory: pytest.TempPathFactory) -> ParallelRuns:
    folder = tmp_path_factory.mktemp("parallel")
    first = run(cloud, folder, *PARALLEL)
    # the command the summary prints, with the `dlt` of this interpreter
    printed = re.search(r"inspect it: dlt (pipeline .*? info) \|", first.stdout)
    assert printed, first.stdout
    info = subprocess.run(
        [str(Path(sys.executable).with_name("dlt")), *shlex.split(printed[1])],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    state = run(cloud, folder, "state")
    again = run(cloud, folder, *PARALLEL)
    reset = run(cloud, folder, "reset", "--resource", "commits", "--windows", "--yes")
    after = run(cloud, folder, *PARALLEL)
    return ParallelRuns(folder, first, info, state, again, reset, after)


def test_dlt_pipeline_info_describes_the_backfill(parallel_runs: ParallelRuns) -> None:
    """The backfill's summary names its pipeline and folder with the dlt command to inspect
    it; that command (`dlt pipeline --pipelines-dir DIR repo_analytics info`) finds the
    pipeline and lists the backfill's four loads (one per window, the ids of the run
    report) and its trace."""
    p = parallel_runs
    assert p.info.returncode == 0, p.info.stdout + p.info.stderr
    assert "Found pipeline repo_analytics" in p.info.stdout, p.info.stdout
    assert "Has 4 completed load packages" in p.info.stdout, p.info.stdout
    assert p.first.report is not None
    load_ids = [i for w in p.first.report["backfill"] for i in w["report"]["load_ids"]]
    assert len(load_ids) == 4
    assert all(load_id in p.info.stdout for load_id in load_ids), p.info.stdout
    assert "has last run trace" in p.info.stdout


def test_backfill_loads_on_the_one_pipeline(cloud: Simulator, parallel_runs: ParallelRuns) -> None:
    """Four windows: each loaded once, by the pipeline `repo_analytics` (no pipeline of its
    own per window), the tables equal the truth; the rerun finds every window finished and
    requests no list."""
    p = parallel_runs
    assert len(PARALLEL_WINDOWS) == 4
    assert p.first.returncode == 0, p.first.stdout + p.first.stderr
    lines = window_lines(p.first.stdout)
    assert sorted(lines) == [1, 2, 3, 4]
    assert all("finished earlier" not in what for _, _, what in lines.values())
    ends = Counter(dated(e)[1] for e in p.first.log if e["endpoint"] == "commits.list.repository")
    assert set(ends) == {end for _, end in PARALLEL_WINDOWS}
    assert len(set(ends.values())) == 1, "every window read every repository"
    loaded_by = {
        name
        for (name,) in query(
            p.folder / "data.duckdb", "SELECT DISTINCT pipeline_name FROM _dlt_pipeline_state"
        )
    }
    assert loaded_by == {"repo_analytics"}, loaded_by
    assert p.again.returncode == 0, p.again.stdout + p.again.stderr
    again = window_lines(p.again.stdout)
    assert sorted(again) == [1, 2, 3, 4]
    assert all(what == "finished earlier, skipped" for _, _, what in again.values())
    assert "backfill done: 4 windows, 4 already finished before" in p.again.stdout
    # no list of a scope: the top-level lists only, to find scopes that appeared since
    assert not [
        e
        for e in p.again.log
        if ".list." in e["endpoint"] and not e["endpoint"].endswith((".workspace", ".global"))
    ]
    assert_tables_equal_truth(
        p.folder / "data.duckdb",
        cloud,
        "cloud",
        required=(PARALLEL_WINDOWS[0][0], PARALLEL_WINDOWS[-1][1]),
        allowed=(PARALLEL_WINDOWS[0][0] - SLACK, PARALLEL_WINDOWS[-1][1]),
        prs=False,
    )


def test_state_lists_every_finished_window(parallel_runs: ParallelRuns) -> None:
    """`state` after a backfill of four windows:
    `backfill windows finished: 4`, then one line per window key."""
    p = parallel_runs
    assert p.state.returncode == 0, p.state.stdout + p.state.stderr
    lines = [line.strip() for line in p.state.stdout.splitlines()]
    keys = [f"{start.isoformat()}/{end.isoformat()}" for start, end in PARALLEL_WINDOWS]
    assert "backfill windows finished: 4" in lines, p.state.stdout
    at = lines.index("backfill windows finished: 4")
    assert sorted(lines[at + 1 : at + 5]) == keys, p.state.stdout


def test_reset_windows_forgets_them(parallel_runs: ParallelRuns) -> None:
    """`reset --resource commits --windows --yes` after that backfill: exit 0; the same
    backfill then loads every window again (no `finished earlier` line) and reads each
    window's list again."""
    p = parallel_runs
    assert p.reset.returncode == 0, p.reset.stdout + p.reset.stderr
    assert p.reset.stdout.startswith("forgot the state of ")
    assert p.after.returncode == 0, p.after.stdout + p.after.stderr
    lines = window_lines(p.after.stdout)
    assert sorted(lines) == [1, 2, 3, 4]
    assert "finished earlier" not in p.after.stdout
    assert "backfill done: 4 windows, 0 already finished before" in p.after.stdout
    ends = Counter(dated(e)[1] for e in p.after.log if e["endpoint"] == "commits.list.repository")
    first = Counter(dated(e)[1] for e in p.first.log if e["endpoint"] == "commits.list.repository")
    assert ends == first and set(ends) == {end for _, end in PARALLEL_WINDOWS}


# F. dlt's anonymous telemetry


class TelemetryEvents(ThreadingHTTPServer):
    """A loopback stand-in for dlt's telemetry endpoint: the names of the events posted."""

    def __init__(self) -> None:
        events: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                events.append(str(json.loads(body).get("event")))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.events = events
        self.url = f"http://127.0.0.1:{self.server_address[1]}/"


@pytest.mark.parametrize("setting", [None, "true"])
def test_dlt_telemetry_only_where_the_user_turned_it_on(
    make_sim: Any, tmp_path: Path, setting: str | None
) -> None:
    """A run from a folder without `.dlt/` (as from cron) sends dlt's telemetry nowhere, as
    the project's own `.dlt/config.toml` says; a user who turns it on gets it, to the endpoint
    they name (here a loopback server standing in for dlt's)."""
    sim = make_sim(edition="cloud")
    with TelemetryEvents() as endpoint:
        serving = threading.Thread(target=endpoint.serve_forever, daemon=True)
        serving.start()
        env = cli_env(sim, RUNTIME__DLTHUB_TELEMETRY_ENDPOINT=endpoint.url)
        env.pop("RUNTIME__DLTHUB_TELEMETRY", None)
        if setting is not None:
            env["RUNTIME__DLTHUB_TELEMETRY"] = setting
        done = run_cli(
            tmp_path,
            env,
            "load",
            "--levels",
            "repository",
            "--resources",
            "commits",
            "--end-date",
            datetime.fromtimestamp(FIXED_NOW, UTC).isoformat(),
        )
        endpoint.shutdown()
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (tmp_path / ".dlt").exists()
    if setting is None:
        assert endpoint.events == []
    else:  # each of dlt's steps reports itself
        assert {"pipeline_extract", "pipeline_normalize", "pipeline_load"} <= set(endpoint.events)
