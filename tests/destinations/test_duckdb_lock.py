"""A DuckDB file another process holds (issue 13): the run waits for it up to
`duckdb_lock_wait_seconds`, stops past that with exit 6 and one line naming the holder, keeps
what it extracted for the next run; and the copy `publish_duckdb_to` swaps in for readers.

Real simulators over HTTP, the real `repo-analytics` command in subprocesses, and real reader
processes (`sys.executable` with DuckDB) holding the files. Expected rows come from the
simulator's ground truth; the holder's PID from the holder process itself.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from simulator import Simulator
from tests.runs.test_backfill import (
    assert_tables_equal_truth,
    cli_args,
    cli_env,
    run_cli,
    snapshot,
)

START, FIRST_END = datetime(2026, 5, 10, tzinfo=UTC), datetime(2026, 5, 20, tzinfo=UTC)
HELD_END, LAST_END = datetime(2026, 5, 25, tzinfo=UTC), datetime(2026, 5, 31, tzinfo=UTC)
NARROW = ("--levels", "repository", "--resources", "commits,pull_requests")
# repository lists answer after a second: the run is still extracting when a holder that
# waits for its first request takes the file
SLOW_LISTS = "slow=1,slow_seconds=1,match=list.repository"

# A reader process: `path`, then `start` (take the file at once) or a simulator's control URL
# (take it once the run's first API request arrived: the run is extracting), then the seconds
# to hold it (0: until stdin closes). Prints `held` once it holds the file.
HOLDER = r"""
import json, sys, time, urllib.request
import duckdb
path, when, hold = sys.argv[1], sys.argv[2], float(sys.argv[3])
if when != "start":
    base = json.load(urllib.request.urlopen(when + "requests"))["total"]
    print("watching", flush=True)
    while json.load(urllib.request.urlopen(when + "requests"))["total"] == base:
        time.sleep(0.02)
while True:
    try:
        con = duckdb.connect(path, read_only=True)
        break
    except duckdb.IOException:  # the run holds it this instant
        time.sleep(0.01)
print("held", con.execute("SELECT count(*) FROM information_schema.tables").fetchone()[0],
      flush=True)
if hold:
    time.sleep(hold)
else:
    sys.stdin.read()
"""


class Holders:
    """Reader processes holding DuckDB files; all stopped after the test."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[str]] = []

    def hold(self, path: Path, when: str = "start", seconds: float = 0) -> subprocess.Popen[str]:
        """A reader of `path`; returns once it holds the file (`start`) or watches the
        simulator's requests (a control URL)."""
        process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(path), when, str(seconds)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.started.append(process)
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("held" if when == "start" else "watching"), line
        return process

    @staticmethod
    def release(process: subprocess.Popen[str]) -> None:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=30)

    def stop_all(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.fixture
def holders() -> Iterator[Holders]:
    made = Holders()
    yield made
    made.stop_all()


def load(
    sim: Simulator, folder: Path, end: datetime, *extra: str
) -> subprocess.CompletedProcess[str]:
    return run_cli(
        folder,
        cli_env(sim),
        "--progress",
        "off",
        "load",
        "--start-date",
        START.date().isoformat(),
        "--end-date",
        end.isoformat(),
        *NARROW,
        *extra,
    )


def control(sim: Simulator) -> str:
    return sim.base_url + "/_sim/"


def counts(db_file: Path) -> dict[str, int]:
    """Every table's row count, dlt's own tables too."""
    with duckdb.connect(str(db_file), read_only=True) as con:
        tables = con.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_type = 'BASE TABLE'"
        ).fetchall()
        return {
            f"{schema}.{table}": con.execute(
                f'SELECT count(*) FROM "{schema}"."{table}"'
            ).fetchone()[0]  # type: ignore[index]
            for schema, table in tables
        }


def load_releasing(
    sim: Simulator, folder: Path, reader: subprocess.Popen[str], *extra: str
) -> tuple[int, str, str]:
    """`load` up to HELD_END that lets `reader` go as soon as the run says it waits for the
    file: (exit code, stdout, stderr)."""
    command = ("load", "--start-date", START.date().isoformat(), "--end-date")
    return releasing(sim, folder, reader, *command, HELD_END.isoformat(), *NARROW, *extra)


def releasing(
    sim: Simulator, folder: Path, reader: subprocess.Popen[str], *command: str
) -> tuple[int, str, str]:
    """A command that lets `reader` go as soon as it says it waits for the file."""
    process = subprocess.Popen(
        cli_args(folder, "--progress", "off", *command),
        env=cli_env(sim),
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None and process.stdout is not None
    err = []
    for line in process.stderr:
        err.append(line)
        if "waiting up to" in line:
            Holders.release(reader)
    out = process.stdout.read()
    return process.wait(timeout=120), out, "".join(err)


@pytest.mark.parametrize("when", ["start", "extract"])
def test_a_reader_that_lets_go_within_the_wait_costs_nothing(
    when: str,
    make_sim: Callable[..., Simulator],
    holders: Holders,
    tmp_path: Path,
) -> None:
    """A reader holding the file when the run starts (restoring the state waits), or taking
    it while the run extracts (the load step waits), and letting go once the run says it
    waits (60 s at most): exit 0, the tables equal the truth."""
    sim = make_sim(edition="server", faults=SLOW_LISTS if when == "extract" else "")
    first = load(sim, tmp_path, FIRST_END)
    assert first.returncode == 0, first.stderr
    db_file = tmp_path / "data.duckdb"
    reader = holders.hold(db_file, "start" if when == "start" else control(sim))

    code, out, err = load_releasing(sim, tmp_path, reader, "--duckdb-lock-wait-seconds", "60")

    assert code == 0, out + err
    assert err.count(f"is held by process {reader.pid} (python") == 1, err  # logged once
    assert "waiting up to 60 s (duckdb_lock_wait_seconds)" in err
    assert_tables_equal_truth(db_file, sim, "server", (START, HELD_END), (START, HELD_END))


def test_past_the_wait_exit_6_then_the_next_run_lands_both(
    make_sim: Callable[..., Simulator], holders: Holders, tmp_path: Path
) -> None:
    """A reader that takes the file while the run extracts and holds it past a 1 s wait: exit
    6, one line naming its PID and the key, no traceback, nothing written to the file. Once
    it lets go, the next run lands the kept package and its own: the tables equal the truth
    of both runs' ranges, each key once."""
    sim = make_sim(edition="server", faults=SLOW_LISTS)
    assert load(sim, tmp_path, FIRST_END).returncode == 0
    db_file = tmp_path / "data.duckdb"
    before = snapshot(db_file), counts(db_file)
    reader = holders.hold(db_file, control(sim))

    held = load(sim, tmp_path, HELD_END, "--duckdb-lock-wait-seconds", "1")

    assert held.returncode == 6, held.stdout + held.stderr
    assert reader.stdout is not None and reader.stdout.readline().startswith("held")
    last = held.stderr.strip().splitlines()[-1]
    assert last.startswith(f"repo-analytics: stopped: the DuckDB file {db_file} is held by ")
    assert f"process {reader.pid} (python" in last
    assert "for more than 1 s; the extracted data is kept and lands on the next run" in last
    assert last.endswith("or raise duckdb_lock_wait_seconds")
    assert "Traceback" not in held.stderr
    Holders.release(reader)
    # nothing of the stopped run in the file: neither data nor loads nor saved state
    assert (snapshot(db_file), counts(db_file)) == before

    sim.clear_faults()
    rerun = load(sim, tmp_path, LAST_END)

    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    # the kept package held [start .. 2026-05-25); the rerun read from its cursors on
    assert_tables_equal_truth(db_file, sim, "server", (START, LAST_END), (START, LAST_END))


def test_wait_0_stops_at_once_before_extracting(
    make_sim: Callable[..., Simulator], holders: Holders, tmp_path: Path
) -> None:
    """With `duckdb_lock_wait_seconds = 0` a held file stops the run at its first opening of
    the file (restoring state), before any request to the host: exit 6."""
    sim = make_sim(edition="server")
    assert load(sim, tmp_path, FIRST_END).returncode == 0
    reader = holders.hold(tmp_path / "data.duckdb")
    asked = sim.requests()["total"]

    done = load(sim, tmp_path, HELD_END, "--duckdb-lock-wait-seconds", "0")

    assert done.returncode == 6, done.stderr
    assert f"process {reader.pid} " in done.stderr
    assert "nothing of this run was extracted yet" in done.stderr
    assert sim.requests()["total"] == asked


def test_a_reader_of_the_published_copy_never_blocks_a_load(
    make_sim: Callable[..., Simulator], holders: Holders, tmp_path: Path
) -> None:
    """Readers pointed at `publish_duckdb_to` (here one holds the copy for the whole load):
    the load does not wait for them (no warning) and exits 0; the reader keeps its old copy;
    a fresh connection sees the new rows; the copy's tables equal the loaded file's, and no
    temporary file is left beside it."""
    sim = make_sim(edition="server")
    published = tmp_path / "bi" / "published.duckdb"
    first = load(sim, tmp_path, FIRST_END, "--publish-duckdb-to", str(published))
    assert first.returncode == 0, first.stderr
    db_file = tmp_path / "data.duckdb"
    assert counts(published) == counts(db_file)
    old = counts(published)["repo_analytics.server_commits"]
    reader = holders.hold(published)

    done = load(sim, tmp_path, LAST_END, "--publish-duckdb-to", str(published))

    assert done.returncode == 0, done.stderr
    assert "is held by" not in done.stderr
    assert f"published a copy for readers: {published} (" in done.stdout
    new = counts(db_file)
    assert new["repo_analytics.server_commits"] > old
    assert counts(published) == new
    assert_tables_equal_truth(published, sim, "server", (START, LAST_END), (START, LAST_END))
    assert sorted(p.name for p in published.parent.iterdir()) == ["published.duckdb"]
    assert reader.poll() is None  # still reading its copy, which the swap left as it was
    Holders.release(reader)


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (("--duckdb-lock-wait-seconds", "-1"), "`duckdb_lock_wait_seconds` has invalid value `-1`"),
        (
            ("--duckdb-lock-wait-seconds", "86401"),
            "`duckdb_lock_wait_seconds` has invalid value `86401`",
        ),
        (("--publish-duckdb-to", "data.duckdb"), "`publish_duckdb_to` has invalid value"),
        (("--publish-duckdb-to", "."), "`publish_duckdb_to` has invalid value `.`"),
    ],
)
def test_bad_values_exit_2_before_any_request(
    flags: tuple[str, str], named: str, make_sim: Callable[..., Simulator], tmp_path: Path
) -> None:
    """A wait out of range, or a published path that is a folder or the loaded file itself:
    exit 2, one line naming the value, no request, nothing written."""
    sim = make_sim(edition="server")
    flags = (flags[0], str(tmp_path / flags[1])) if flags[1] == "data.duckdb" else flags

    done = load(sim, tmp_path, FIRST_END, *flags)

    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("repo-analytics: config error:") and named in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert sim.requests()["total"] == 0
    assert not (tmp_path / "data.duckdb").exists()


def test_a_backfill_waits_and_publishes(
    make_sim: Callable[..., Simulator], holders: Holders, tmp_path: Path
) -> None:
    """A backfill into a file a reader holds waits for it (here until the reader lets go),
    loads every window, and publishes a copy equal to the loaded file."""
    sim = make_sim(edition="server")
    assert load(sim, tmp_path, START.replace(day=12)).returncode == 0  # the file exists
    db_file, published = tmp_path / "data.duckdb", tmp_path / "bi" / "copy.duckdb"
    reader = holders.hold(db_file)
    command = ("backfill", "--since", START.date().isoformat(), "--until", LAST_END.isoformat())

    code, out, err = releasing(
        sim,
        tmp_path,
        reader,
        *command,
        "--window-days",
        "7",
        *NARROW,
        "--publish-duckdb-to",
        str(published),
    )

    assert code == 0, out + err
    assert err.count(f"is held by process {reader.pid} (python") == 1, err
    assert "backfill done: 3 windows, 0 already finished before" in out
    assert counts(published) == counts(db_file)
    assert_tables_equal_truth(published, sim, "server", (START, LAST_END), (START, LAST_END))
