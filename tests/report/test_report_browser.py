"""`repo-analytics report` opened in a real browser: Debian's Chromium, headless, driven by
Playwright (no browser download: the system's binary). A tiny self-hosted host and a tiny
cloud workspace are backfilled into one DuckDB file by the command line (their runs recorded
in the dataset), the report is written, and the page must: ask for nothing but its own file
(everything inline), log no console error, draw marks in every chart (bars, lines or the
heatmap's image), and show in every table the numbers of the test's own SQL over the views.
A screenshot is saved to the test's temporary folder for a person to look at.

Skipped, saying why, where Chromium is not installed (.ci/run installs it with apt-get).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from simulator import SimConfig, Simulator
from tests.report.tables import as_shown, expected_tables, read_back
from tests.runs.test_backfill import cli_env, run_cli
from tests.support import FIXED_NOW
from tests.support.loader import DATASET

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="Chromium is not installed: the report's browser test drives Debian's `chromium` "
    "package (apt-get install -y chromium; .ci/run installs it)",
)
CLOCK = "2026-06-01T00:00:00+00:00"  # the simulators' fixed clock
# what Chromium needs here as root, and nothing that reaches out on its own
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
MARKS = "g.point path, path.js-line, g.hm image"


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(the DuckDB file, its report): both editions backfilled by the command line."""
    folder = tmp_path_factory.mktemp("report")
    for edition in ("server", "cloud"):
        with Simulator(SimConfig(edition=edition, size="tiny", now=FIXED_NOW)) as sim:
            done = run_cli(
                folder,
                cli_env(sim),
                "--pipeline-name",
                f"repo_analytics_{edition}",
                "--progress",
                "off",
                "backfill",
                "--since",
                "2026-03-01",
                "--until",
                CLOCK,
                timeout=240,
            )
            assert done.returncode == 0, done.stderr
    made = run_cli(folder, {}, "report", "--out", "report.html")
    assert made.returncode == 0, made.stderr
    assert made.stdout.splitlines() == [
        f"report: {folder / 'report.html'}",
        f"open it in a browser: {(folder / 'report.html').as_uri()}",
    ]
    yield folder / "data.duckdb", folder / "report.html"


@pytest.fixture(scope="module")
def browsed(dashboard: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """What the browser saw: requests, console messages, each chart's marks, each table's
    cells (after opening every `<details>`), and the screenshot's path."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="the `test` extra's playwright")
    _, report = dashboard
    shots = tmp_path_factory.mktemp("screenshot")
    seen: dict[str, Any] = {"requests": [], "console": [], "errors": []}
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(shots / "profile"),
            executable_path=CHROMIUM,
            args=FLAGS,
            headless=True,
            viewport={"width": 1400, "height": 900},
        )
        try:
            page = browser.new_page()
            page.on("request", lambda request: seen["requests"].append(request.url))
            page.on("console", lambda message: seen["console"].append((message.type, message.text)))
            page.on("pageerror", lambda error: seen["errors"].append(str(error)))
            page.goto(report.as_uri(), wait_until="load")
            page.wait_for_function(
                "() => [...document.querySelectorAll('div.chart')].every("
                "c => c.querySelector('.main-svg'))",
                timeout=30_000,
            )
            seen["charts"] = page.evaluate(
                "(marks) => Object.fromEntries([...document.querySelectorAll('div.chart')].map("
                "c => [c.closest('section').dataset.panel, [...c.querySelectorAll(marks)]"
                ".filter(m => { const b = m.getBBox(); return b.width > 0 || b.height > 0; })"
                ".length]))",
                MARKS,
            )
            seen["panels"] = page.evaluate(
                "() => [...document.querySelectorAll('section.panel')].map(s => s.dataset.panel)"
            )
            page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
            seen["tables"] = page.evaluate(
                "() => Object.fromEntries([...document.querySelectorAll('table[data-table]')]"
                ".map(t => [t.dataset.table, [...t.tBodies[0].rows].map("
                "r => [...r.cells].map(c => c.innerText))]))"
            )
            seen["screenshot"] = shots / "report.png"
            page.screenshot(path=str(seen["screenshot"]), full_page=True)
        finally:
            browser.close()
    return seen


def test_the_page_asks_for_nothing_but_itself(dashboard: tuple[Path, Path], browsed: Any) -> None:
    _, report = dashboard
    assert browsed["requests"] == [report.as_uri()]
    assert "<script src" not in report.read_text(encoding="utf-8")


def test_no_console_error(browsed: Any) -> None:
    assert browsed["errors"] == []
    assert [text for kind, text in browsed["console"] if kind == "error"] == []


def test_every_chart_drew_marks(browsed: Any) -> None:
    charts = browsed["charts"]
    expected = {"outcomes", "resolution", "open-age", "reviewers", "commits"}
    expected |= {"repositories", "authors", "activity-utc", "activity-local"}
    assert set(charts) == expected
    assert {panel: marks for panel, marks in charts.items() if marks == 0} == {}
    assert browsed["screenshot"].stat().st_size > 50_000


def test_every_table_equals_the_views(dashboard: tuple[Path, Path], browsed: Any) -> None:
    db_file, _ = dashboard
    with duckdb.connect(str(db_file), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        con.execute(f"SET schema '{DATASET}'")
        expected = expected_tables(lambda sql: con.execute(sql).fetchall())
    shown = {key: read_back(rows) for key, rows in browsed["tables"].items()}
    for key, rows in expected.items():
        assert rows, key  # not vacuous: both editions have data for every chart
        assert shown[key] == rows, key
    assert set(shown) == {*expected, "sources"}


def test_the_sources_table_has_each_source_and_its_last_run(
    dashboard: tuple[Path, Path], browsed: Any
) -> None:
    """Per source: edition, tables, rows, newest data, the last run and its reconciliation
    verdict, as the dataset's tables and the runs' records hold them."""
    db_file, _ = dashboard
    with duckdb.connect(str(db_file), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        con.execute(f"SET schema '{DATASET}'")
        tables = [
            t
            for (t,) in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND "
                "table_type = 'BASE TABLE' AND NOT starts_with(table_name, '_')",
                [DATASET],
            ).fetchall()
        ]
        rows: dict[str, list[int]] = {}
        for table in tables:
            for source, count in con.execute(
                f'SELECT source, count(*) FROM "{table}" GROUP BY 1'
            ).fetchall():
                held = rows.setdefault(source, [0, 0])
                held[0] += 1
                held[1] += count
        runs = con.execute(
            "SELECT source, edition, command, status, reconciliation "
            "FROM _repo_analytics_runs ORDER BY source"
        ).fetchall()
        newest = dict(
            con.execute("SELECT source, max(updated_at) FROM pull_requests GROUP BY 1").fetchall()
        )
    assert [run[2:] for run in runs] == [("backfill", "ok", "PASSED")] * 2
    expected = [
        (source, edition, *rows[source])
        + (f"{newest[source]:%Y-%m-%d %H:%M} UTC",)
        + (status, verdict)
        for source, edition, _, status, verdict in runs
    ]
    shown = read_back(browsed["tables"]["sources"])
    assert [row[:4] + (row[5],) + row[7:] for row in shown] == as_shown(expected)
    assert all(row[6].startswith("backfill 20") for row in shown)
