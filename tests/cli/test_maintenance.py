"""`repo-analytics check`, `state` and `reset` over a real simulator and DuckDB file."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from simulator import Simulator

CLI = [sys.executable, "-m", "pipelines.cli.main"]
ROOT = Path(__file__).resolve().parents[2]


def run(
    sim: Simulator, path: Path, *args: str, token: str | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOURCES__")}
    env.update(
        {
            "SOURCES__REPO_ANALYTICS__EDITION": "cloud",
            "SOURCES__REPO_ANALYTICS__BASE_URL": sim.base_url,
            "SOURCES__REPO_ANALYTICS__WORKSPACE": "sim-workspace",
            "SOURCES__REPO_ANALYTICS__TOKEN": token or sim.config.token,
        }
    )
    return subprocess.run(
        [
            *CLI,
            "--duckdb",
            str(path / "d.duckdb"),
            "--pipelines-dir",
            str(path / "p"),
            "--schemas-dir",
            str(path / "s"),
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        input=stdin,
        timeout=120,
    )


def test_check_names_what_is_wrong_and_sends_nothing_on_bad_config(
    make_sim: Callable[..., Simulator], tmp_path: Path
) -> None:
    """Good config: two ok lines and one request; bad config: exit 2 and no request;
    an expired token: exit 1 with the token advice."""
    sim = make_sim(edition="cloud")
    good = run(sim, tmp_path, "check")
    assert good.returncode == 0, good.stderr
    assert good.stdout.splitlines()[0].startswith("config: ok (cloud, ")
    assert "credentials, licence and app version: ok" in good.stdout
    assert sim.requests()["total"] == 1
    bad = run(sim, tmp_path, "check", "--levels", "galaxy")
    assert bad.returncode == 2 and "`galaxy`" in bad.stderr and "workspace" in bad.stderr
    assert sim.requests()["total"] == 1
    expired = run(sim, tmp_path, "check", token="sim-expired-token")
    assert expired.returncode == 1 and "access token was refused" in expired.stderr
    assert "sim-expired-token" not in expired.stderr + expired.stdout


def test_state_shows_cursors_and_reset_forgets_them(
    make_sim: Callable[..., Simulator], tmp_path: Path
) -> None:
    """After a load, `state` lists each scope's cursor; `reset` asks (and refuses without a
    terminal unless --yes), then forgets exactly the matching cursors; the next load re-reads
    those scopes from the start date."""
    sim = make_sim(edition="cloud")
    window = ("--start-date", "2026-05-01", "--end-date", "2026-06-01")
    loaded = run(sim, tmp_path, "load", "--levels", "repository", "--resources", "commits", *window)
    assert loaded.returncode == 0, loaded.stderr
    state = run(sim, tmp_path, "state").stdout.splitlines()
    cursors = [line for line in state if ": cursor date_local = " in line]
    repos = {r["slug"] for r in sim.truth("repositories")}
    assert {line.split(":")[1] for line in cursors} == repos
    assert any(line.startswith("last successful load: 20") for line in state)
    refused = run(sim, tmp_path, "reset", "--resource", "commits.repository", stdin="")
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert run(sim, tmp_path, "state").stdout.splitlines() == state
    reset = run(sim, tmp_path, "reset", "--resource", "commits.repository:api", "--yes")
    assert reset.returncode == 0, reset.stderr
    after = run(sim, tmp_path, "state").stdout
    forgotten = {r for r in repos if r.startswith("api")}
    assert forgotten and all(f"commits.repository:{r}: cursor" not in after for r in forgotten)
    assert all(f"commits.repository:{r}: cursor" in after for r in repos - forgotten)
    sim.reset_requests()
    again = run(sim, tmp_path, "load", "--levels", "repository", "--resources", "commits", *window)
    assert again.returncode == 0, again.stderr
    since = {
        entry["path"].split("/repos/")[1].split("/")[0]: entry["params"]["since_date"]
        for entry in sim.requests()["log"]
        if entry["endpoint"] == "commits.list.repository"
    }
    for repo in forgotten:
        assert since[repo] == "2026-04-29T22:00:00+00:00"  # start date minus the 26 h slack
    for repo in repos - forgotten:
        assert since[repo] > "2026-05-20"  # cursor minus look-back
