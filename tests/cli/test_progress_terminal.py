"""Live progress on a real (pseudo-)terminal: `backfill` with the default `--progress auto`.

The real `repo-analytics` command runs with its stdin, stdout and stderr on a pseudo-terminal
of 160 x 50 (python's pty module); the test reads everything it wrote, escape sequences
included, and checks what a terminal would show: the windows bar from the start, retry
warnings (429s from the simulator) on lines of their own, seconds waited as a figure, and
the summary after the bars from the start of its line.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from collections.abc import Mapping
from pathlib import Path

from simulator import SimConfig, Simulator
from tests.runs.test_backfill import cli_args, cli_env
from tests.support import FIXED_NOW

WINDOWS = 5  # 2026-03-01 .. 2026-06-01 in 20-day windows
BACKFILL = (
    "backfill",
    "--since",
    "2026-03-01",
    "--until",
    "2026-06-01",
    "--window-days",
    "20",
    "--parallel-windows",
    "1",
    "--levels",
    "repository",
    "--resources",
    "commits",
    "--no-reconcile",
)
WARNING = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\|\[WARNING\]\|")
FIRST_WINDOW_LINE = re.compile(rf"window \d+/{WINDOWS} \[")
WINDOWS_AT_ZERO = re.compile(rf"windows:\s+0%\|[^|\n]*\|\s*0/{WINDOWS}\b")
# cursor up or down, erase in line, colours: none of them moves the cursor along its line
IN_PLACE = re.compile(r"\x1b\[[0-9;]*[ABKm]")
COLUMNS, LINES = 160, 50  # the terminal's size: the bars are as wide


def run_on_terminal(
    folder: Path, env: Mapping[str, str], *command: str, timeout: float = 120
) -> tuple[int, str]:
    """The command's exit code and all it wrote to a `COLUMNS` x `LINES` pseudo-terminal."""
    folder.mkdir(parents=True, exist_ok=True)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
    sized = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
    process = subprocess.Popen(
        cli_args(folder, *command),
        env=sized,
        cwd=folder,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the command closed the terminal: all of it was read
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()
    return process.wait(timeout=10), out.decode("utf-8", "replace")


def at_line_start(shown: str, position: int) -> bool:
    """Whether a terminal's cursor is in the first column when `position` is written: only
    escape sequences that keep the column came since the last carriage return or newline."""
    last = max(shown.rfind("\r", 0, position), shown.rfind("\n", 0, position))
    return IN_PLACE.sub("", shown[last + 1 : position]) == ""


def test_bars_on_a_terminal_keep_warnings_apart(tmp_path: Path) -> None:
    """Two 429s (Retry-After 1 s) in the first window: the windows bar is drawn at 0/5
    from the start and again after every retry warning before the first window ends (it is
    not lost under the warning); each warning starts a line of its own and ends it, with no
    bar drawn into it; waited seconds are a figure after the retries (`waited N.N s`), not a
    bar counting them in `it/s`; the summary after the bars starts its own line (a bar
    closed below the first left the cursor where its blanks ended: at the last column, the
    summary's first letter stood alone there)."""
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        sim.set_faults(
            {
                "rules": [
                    {
                        "kind": "429",
                        "rate": 1,
                        "count": 2,
                        "retry_after": 1,
                        "match": "commits.list.repository",
                    }
                ]
            }
        )
        code, shown = run_on_terminal(tmp_path, cli_env(sim), *BACKFILL)
        retried = [e for e in sim.requests()["log"] if e["fault"] == "429"]
    assert code == 0, shown[-3000:]
    assert len(retried) == 2

    first_window = FIRST_WINDOW_LINE.search(shown)
    assert first_window, shown[-3000:]
    warnings = list(WARNING.finditer(shown))
    before = [w for w in warnings if w.start() < first_window.start()]
    assert len(warnings) == 2 and before, shown[:3000]
    assert WINDOWS_AT_ZERO.search(shown, 0, before[0].start()), shown[: before[0].start()]
    for warning in before:
        assert WINDOWS_AT_ZERO.search(shown, warning.end(), first_window.start()), shown[
            warning.start() : first_window.start()
        ]

    for warning in warnings:
        assert at_line_start(shown, warning.start()), shown[warning.start() - 300 : warning.end()]
        line = shown[warning.start() : shown.index("\n", warning.start())]
        assert "retrying commits.repository:" in line and "HTTP 429" in line, line
        assert "\x1b" not in line and "it/s" not in line, line

    assert not re.search(r"seconds waited: \d+", shown), shown[-3000:]
    assert re.search(r"retries: 2it \[[^\]\n]*waited \d+\.\d s\]", shown), shown[-3000:]

    done = shown.index("backfill done: ")
    assert done > first_window.start()
    assert at_line_start(shown, done), repr(shown[done - 400 : done + 40])
