"""`repo-analytics report` from the command line, without a browser: the filters narrow every
table, partial data (one edition, no pull requests, a run with no end) gives notes in place of
charts, and bad input gets one line naming the value, exit 2, and no file."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from simulator import SimConfig, Simulator
from tests.report.tables import html_tables
from tests.runs.test_backfill import cli_args, cli_env, run_cli
from tests.support import FIXED_NOW
from tests.support.loader import DATASET

CLOCK = "2026-06-01T00:00:00+00:00"  # the simulators' fixed clock
RANGE = ("--since", "2026-03-01", "--until", CLOCK)


def charts(text: str) -> set[str]:
    """The panels of a report that drew a chart."""
    panel = r'data-panel="([\w-]+)"><h3>[^<]*</h3><p class="caption">[^<]*</p><div class="chart"'
    return set(re.findall(panel, text))


def notes(text: str) -> list[str]:
    return re.findall(r'<p class="note"[^>]*>([^<]*)</p>', text)


@pytest.fixture(scope="module")
def server_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A tiny self-hosted host's history, backfilled by the command line."""
    folder = tmp_path_factory.mktemp("report_server")
    with Simulator(SimConfig(edition="server", size="tiny", now=FIXED_NOW)) as sim:
        done = run_cli(folder, cli_env(sim), "--progress", "off", "backfill", *RANGE, timeout=240)
        assert done.returncode == 0, done.stderr
    yield folder / "data.duckdb"


def report(folder: Path, *options: str) -> tuple[Any, str]:
    out = folder / "report.html"
    out.unlink(missing_ok=True)
    done = run_cli(folder, {}, "report", "--out", str(out), *options)
    return done, out.read_text(encoding="utf-8") if out.exists() else ""


def query(db_file: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db_file), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        con.execute(f"SET schema '{DATASET}'")
        return con.execute(sql).fetchall()


def test_one_repository_since_a_day(server_file: Path) -> None:
    """`--repository KEY/slug --since DAY`: the repository's rows only, weeks and days from
    that day on."""
    folder = server_file.parent
    ((key, slug, commits),) = query(
        server_file,
        "SELECT project_key, repository_slug, count(*) FROM commits GROUP BY ALL "
        "ORDER BY 3 DESC LIMIT 1",
    )
    done, text = report(folder, "--repository", f"{key}/{slug}", "--since", "2026-04-06")
    assert done.returncode == 0, done.stderr
    tables = html_tables(text)
    assert [row[0] for row in tables["repositories"]] == [f"{key}/{slug}"]
    ((since,),) = query(
        server_file,
        "SELECT count(*) FROM commits WHERE repository_slug = "
        f"'{slug}' AND CAST(timezone('UTC', authored_at_utc) AS DATE) >= DATE '2026-04-06'",
    )
    assert 0 < since < commits
    assert tables["repositories"][0][1] == since
    assert sum(row[1] for row in tables["commits"]) == since
    assert min(row[0] for row in tables["commits"]) == "2026-04-06"
    assert min(row[0] for row in tables["outcomes"]) >= "2026-04-06"
    assert "showing since 2026-04-06, repository " + f"{key}/{slug}" in text


def test_one_edition_no_pull_requests_and_an_unfinished_backfill(
    make_sim: Any, tmp_path: Path
) -> None:
    """A cloud workspace's commits only, backfilled in 10-day windows and killed once its
    first window landed: the pull-request panels are notes, not charts; the reviewers' note
    says they are a self-hosted measure; the page says the backfill has no end; the commit
    charts show what landed."""
    sim = make_sim(edition="cloud")
    only = ("--levels", "repository", "--resources", "commits", "--window-days", "10")
    # a line per window (not a terminal): the first tells the window landed
    command = cli_args(tmp_path, "--progress", "auto", "backfill", *only, *RANGE)
    with subprocess.Popen(
        command, env=cli_env(sim), cwd=tmp_path, stdout=subprocess.PIPE, text=True
    ) as backfill:
        assert backfill.stdout is not None
        for line in backfill.stdout:
            if line.startswith("window 1/"):  # its row is written before its line
                backfill.kill()
                break
        backfill.wait(timeout=60)
    assert backfill.returncode == -signal.SIGKILL
    made, text = report(tmp_path)
    assert made.returncode == 0, made.stderr
    assert charts(text) == {"commits", "repositories", "authors", "activity-local"}
    said = notes(text)
    assert any("the backfill started" in note and "has no end recorded" in note for note in said)
    assert "No resolved pull requests." in said
    assert "No pull requests loaded." in said
    assert "Reviewers are a self-hosted measure: no pull requests with reviewers." in said
    (source,) = html_tables(text)["sources"]
    ((rows,),) = query(
        tmp_path / "data.duckdb",
        "SELECT (SELECT count(*) FROM cloud_commits) + (SELECT count(*) FROM cloud_commit_parents)",
    )
    assert source[1:4] == ("cloud", 2, rows) and rows > 0
    assert source[6:] == ("none recorded", "running", None)  # no run has finished


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (("report", "--since", "last week"), "config `since` has invalid value `last week`"),
        (("report", "--source", "elsewhere"), "config `source` has invalid value `elsewhere`"),
        (("report", "--repository", "NOPE/x"), "config `repository` has invalid value `NOPE/x`"),
        (("--destination", "nowhere", "report"), "config `destination` has invalid value"),
        (("--destination", "parquet", "report"), "a SQL destination with the canonical views"),
        (("--duckdb", "missing.duckdb", "report"), "an existing DuckDB file"),
        (("--dataset", "other", "report"), "config `dataset` has invalid value `other`"),
    ],
)
def test_bad_input_is_one_line(server_file: Path, options: tuple[str, ...], named: str) -> None:
    folder = server_file.parent
    out = folder / "bad.html"
    done = run_cli(folder, {}, *options, "--out", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert named in done.stderr
    assert not out.exists()


def test_the_valid_values_are_named(server_file: Path) -> None:
    done = run_cli(server_file.parent, {}, "report", "--source", "elsewhere")
    (source,) = {s for (s,) in query(server_file, "SELECT DISTINCT source FROM commits")}
    assert f"expected one of the dataset's: {source}" in done.stderr
