"""`repo-analytics sim`, then the `load` it prints: the first try lands the host's data.

Both are the real command in subprocesses. The simulator's clock defaults to the current
hour and it prints a ready-to-paste `load` (its URL, its clock as `--end-date`, credentials
as environment variables); the load it suggests is run as printed (only the DuckDB file and
working folders are pointed under tmp_path) and what landed is compared with the truth of
its window, read from the simulator's control URL.
"""

from __future__ import annotations

import os
import queue
import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
import requests

from tests.support.loader import DATASET

CLI = Path(sys.executable).parent / "repo-analytics"
HOUR_S = 3600
DEFAULT_DAYS = timedelta(days=30)  # the load's default start: 30 days before its end
ASSIGNMENT = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$")


class SimProcess:
    """`repo-analytics sim` in a subprocess; its output lines as they come."""

    def __init__(self, stderr: Path, *args: str) -> None:
        self.started = time.time()
        self.errors = stderr.open("w")
        self.process = subprocess.Popen(
            [str(CLI), "sim", *args], stdout=subprocess.PIPE, stderr=self.errors, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def next_line(self, timeout: float = 30) -> str:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no output line within {timeout} s") from None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.errors.close()


@pytest.fixture
def server_cli(tmp_path: Path) -> Iterator[SimProcess]:
    """A tiny self-hosted simulator on the default clock, stopped after the test."""
    sim = SimProcess(tmp_path / "sim.stderr", "--edition", "server", "--size", "tiny")
    yield sim
    sim.stop()


def split_command(line: str) -> tuple[dict[str, str], list[str]]:
    """A printed shell command: its leading `NAME=value` assignments and its words."""
    words = shlex.split(line)
    env: dict[str, str] = {}
    while words and ASSIGNMENT.match(words[0]):
        name, value = ASSIGNMENT.match(words.pop(0)).groups()  # type: ignore[union-attr]
        env[name] = value
    return env, words


def rows(db_file: Path, sql: str) -> set[tuple[Any, ...]]:
    with duckdb.connect(str(db_file), read_only=True) as con:
        con.execute(f"SET schema '{DATASET}'")
        return set(con.execute(sql).fetchall())


def test_sim_then_the_printed_load_lands_the_window(server_cli: SimProcess, tmp_path: Path) -> None:
    banner = server_cli.next_line()
    assert banner.startswith("repo-analytics simulator: edition=server ")
    control = dict(re.findall(r"(\w+)=(\S+)", banner))["control"]
    printed = [server_cli.next_line(), server_cli.next_line()]
    assert printed[0].startswith("load it"), printed
    env, words = split_command(printed[1].strip())
    assert words[:2] == ["repo-analytics", "load"], printed[1]

    # the default clock is the current hour
    info = requests.get(control + "info", timeout=10).json()
    clock = info["now"]
    assert clock % HOUR_S == 0
    assert int(server_cli.started) // HOUR_S * HOUR_S <= clock <= time.time()
    end = datetime.fromtimestamp(clock, UTC)
    assert datetime.fromisoformat(words[words.index("--end-date") + 1]) == end

    # the suggested load, as printed, with files under tmp_path
    assert set(env) == {"SOURCES__REPO_ANALYTICS__USERNAME", "SOURCES__REPO_ANALYTICS__PASSWORD"}
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SOURCES__")}
    db_file = tmp_path / "data.duckdb"
    done = subprocess.run(
        [
            str(CLI),
            "--duckdb",
            str(db_file),
            "--pipelines-dir",
            str(tmp_path / "pipelines"),
            "--schemas-dir",
            str(tmp_path / "schemas"),
            *words[1:],
        ],
        env={**clean, **env},
        cwd=tmp_path,
        text=True,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr

    start = end - DEFAULT_DAYS
    commits = {
        (c["repository"]["project"]["key"], c["repository"]["slug"], c["id"])
        for c in requests.get(control + "truth/commits", timeout=30).json()
        if start <= datetime.fromisoformat(c["authorTimestamp"]) < end
    }
    prs = {
        (p["toRef"]["repository"]["project"]["key"], p["toRef"]["repository"]["slug"], p["id"])
        for p in requests.get(control + "truth/pull-requests", timeout=30).json()
        if start <= datetime.fromtimestamp(p["updatedDate"] / 1000, UTC) < end
    }
    assert len(commits) > 50 and len(prs) > 5  # not an empty window
    assert rows(db_file, "SELECT project_key, repository_slug, id FROM server_commits") == commits
    assert rows(db_file, "SELECT project_key, repository_slug, id FROM server_pull_requests") == prs
