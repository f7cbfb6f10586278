"""`repo-analytics report --destination postgres`: the same simulator backfilled into DuckDB
and into Postgres gives the same numbers in every chart's table (the views agree row by row:
test_views_postgres.py), and the Postgres report's sources table names the recorded run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simulator import Simulator
from tests.report.tables import html_tables
from tests.runs.test_backfill import cli_env, run_cli
from tests.scaleout.conftest import PASSWORD

RANGE = ("--since", "2026-03-01", "--until", "2026-06-01T00:00:00+00:00")


def test_the_report_of_postgres_equals_duckdbs(
    make_sim: Any, dataset: str, warehouse_env: Any, tmp_path: Path
) -> None:
    sim: Simulator = make_sim(edition="server")
    env = cli_env(sim, **warehouse_env())
    pg = ("--destination", "postgres", "--dataset", dataset)
    tables = {}
    for name, options in (("duckdb", ()), ("postgres", pg)):
        folder = tmp_path / name
        done = run_cli(folder, env, *options, "--progress", "off", "backfill", *RANGE, timeout=240)
        assert done.returncode == 0, done.stderr
        made = run_cli(folder, env, *options, "report", "--out", "report.html")
        assert made.returncode == 0, made.stderr
        text = (folder / "report.html").read_text(encoding="utf-8")
        assert PASSWORD not in text + made.stdout + made.stderr
        tables[name] = html_tables(text)
    duck, pg_tables = tables["duckdb"], tables["postgres"]
    assert set(pg_tables) == set(duck)
    for key in set(duck) - {"sources"}:
        assert duck[key], key
        assert pg_tables[key] == duck[key], key
    (source,) = pg_tables["sources"]
    assert source[1] == "server" and str(source[6]).startswith("backfill ")
    assert source[7:] == ("ok", "PASSED")
    assert source[1:4] == duck["sources"][0][1:4]  # edition, tables, rows
