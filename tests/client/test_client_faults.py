"""The HTTP client against a misbehaving host, over real HTTP: retries, budgets, fatal errors.

Every test runs real loads (in-process through `Loader`, or the `repo-analytics` command in a
subprocess) against a tiny cloud simulator and asserts on what crossed the wire (the
simulator's request log), on what landed in DuckDB, and on what the user is told.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import duckdb
import pytest

from pipelines.cli.exits import root_cause as cause_of
from simulator import SimConfig, Simulator
from sources.repo_analytics import RetryBudgetExhausted
from sources.repo_analytics.errors import UnsafeLinkError
from tests.support import FIXED_NOW
from tests.support.loader import DATASET, FAST_RETRY, Loader

MakeSim = Callable[..., Simulator]
MakeLoader = Callable[[Simulator], Loader]

SECRET = "sim-secret-7c1e9a40d2"  # the simulator's accepted token; must never be echoed
EXPIRED = "sim-expired-token"
CLI = str(Path(sys.executable).with_name("repo-analytics"))
# Workspace level only, small pages: a dozen requests, several pages per list.
SMALL = {"levels": "workspace", "resources": "commits,pull_requests", "page_size": 50}
DATA_TABLES = ("cloud_workspace_commits", "cloud_commit_parents", "cloud_workspace_pull_requests")
NAIVE_SLACK = timedelta(hours=26)


# helpers -------------------------------------------------------------------------------------
def cloud_sim(**fields: Any) -> Simulator:
    return Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW, token=SECRET, **fields))


def data_tables(db_file: Path, tables: tuple[str, ...] = DATA_TABLES) -> dict[str, list[Any]]:
    """Rows of the data tables without dlt's columns, in a stable order; without `source`
    too, which names the host (each simulator its own port)."""
    with duckdb.connect(str(db_file), read_only=True) as con:
        found: dict[str, list[Any]] = {}
        for table in tables:
            columns = [
                c
                for (c,) in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = ? "
                    "AND table_name = ? AND column_name NOT LIKE '\\_dlt%' ESCAPE '\\' "
                    "AND column_name <> 'source' "
                    "ORDER BY column_name",
                    [DATASET, table],
                ).fetchall()
            ]
            rows = con.execute(f'SELECT {", ".join(columns)} FROM {DATASET}."{table}"').fetchall()
            found[table] = sorted(rows, key=repr)
        return found


def everything(db_file: Path) -> dict[str, list[Any]]:
    """Every table of every schema in the file, dlt's own included, in a stable order."""
    if not db_file.exists():
        return {}
    with duckdb.connect(str(db_file), read_only=True) as con:
        names = con.execute(
            "SELECT table_schema, table_name FROM information_schema.tables ORDER BY 1, 2"
        ).fetchall()
        return {
            f"{s}.{t}": sorted(con.execute(f'SELECT * FROM "{s}"."{t}"').fetchall(), key=repr)
            for s, t in names
        }


def text_of_db(db_file: Path) -> str:
    """All values of all tables as text, with dlt's compressed pipeline state decoded."""
    parts = [repr(everything(db_file))]
    with duckdb.connect(str(db_file), read_only=True) as con:
        for (blob,) in con.execute(f"SELECT state FROM {DATASET}._dlt_pipeline_state").fetchall():
            parts.append(zlib.decompress(base64.b64decode(blob)).decode())
    return "\n".join(parts)


def files_containing(root: Path, secret: str) -> list[Path]:
    """Files under `root` whose raw bytes hold `secret`."""
    needle = secret.encode()
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def in_window(sim: Simulator, kind: str, start: datetime, until: datetime) -> set[tuple[Any, ...]]:
    """Natural keys of the ground truth a load from `start` to `until` must hold."""
    if kind == "commits":
        return {
            (c["repository"]["slug"], c["hash"])
            for c in sim.truth("commits")
            if start - NAIVE_SLACK <= parse(c["_sim"]["instant"]) < until
        }
    return {
        (p["destination"]["repository"]["slug"], p["id"])
        for p in sim.truth("pull-requests")
        if start <= parse(p["updated_date"]) < until
    }


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def clock(sim: Simulator) -> datetime:
    return datetime.fromtimestamp(sim.info()["now"], UTC)


START = datetime(2026, 3, 1, tzinfo=UTC)


def keys(loader: Loader, table: str, key: str) -> list[tuple[Any, ...]]:
    return loader.rows(f"SELECT repository_slug, {key} FROM {table}")


def log_since(sim: Simulator, serial: int) -> list[dict[str, Any]]:
    return [e for e in sim.requests()["log"] if e["n"] > serial]


def last_serial(sim: Simulator) -> int:
    return sim.requests()["total"]


class Trap:
    """A second HTTP host on loopback that records every request it gets, headers included."""

    def __init__(self) -> None:
        received: list[dict[str, Any]] = []
        self.received = received

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                received.append({"path": self.path, "headers": dict(self.headers)})
                body = b'{"values": [], "page": 2, "pagelen": 5}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def trap() -> Iterator[Trap]:
    host = Trap()
    yield host
    host.close()


# the baseline: what a clean run loads ------------------------------------------------------------
@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Simulator, Loader]]:
    """A clean run (no faults) of the SMALL selection, and its simulator."""
    with cloud_sim() as sim:
        run = Loader(sim, tmp_path_factory.mktemp("clean"))
        run.load(**SMALL)
        yield sim, run


@pytest.fixture(scope="module")
def clean(baseline: tuple[Simulator, Loader]) -> dict[str, list[Any]]:
    """The data tables of the clean run."""
    return data_tables(baseline[1].db_file)


def test_clean_run_loads_the_truth(baseline: tuple[Simulator, Loader]) -> None:
    """The baseline the fault tests compare with is itself the simulator's ground truth."""
    sim, run = baseline
    assert set(keys(run, "cloud_workspace_commits", "hash")) == in_window(
        sim, "commits", START, clock(sim)
    )
    assert set(keys(run, "cloud_workspace_pull_requests", "id")) == in_window(
        sim, "pull-requests", START, clock(sim)
    )
    assert run.rows("SELECT count(*) FROM cloud_commit_parents") == [
        (sum(len(c["parents"]) for c in sim.truth("commits")),)
    ]
    assert sim.requests()["log"] and not [e for e in sim.requests()["log"] if e["fault"]]


# retryable faults ------------------------------------------------------------------------------
# (id, fault spec, retry settings on top of FAST_RETRY, status the faulted requests got,
#  how many faults fire, least total wait in seconds)
RETRYABLE: list[tuple[str, str, dict[str, Any], set[int], int | None, float]] = [
    ("429", "429=1,count=1,retry_after=1", {}, {429}, 1, 1.0),  # Retry-After: 1 is honoured
    ("429-zero", "429=1,count=3,retry_after=0", {}, {429}, 3, 0.0),
    ("429date", "429date=1,count=1,retry_after=1", {}, {429}, 1, 0.5),
    ("500", "500=1,count=2", {}, {500}, 2, 0.0),
    ("502", "502=1,count=2", {}, {502}, 2, 0.0),
    ("503", "503=1,count=2", {}, {503}, 2, 0.0),
    ("504", "504=1,count=2", {}, {504}, 2, 0.0),
    ("reset", "reset=1,count=2", {}, {0}, 2, 0.0),
    ("truncate", "truncate=1,count=2", {}, {200}, 2, 0.0),
    ("slow", "slow=1,count=2,slow_seconds=1", {"read_timeout": 0.5}, {200}, 2, 0.0),
    (
        "mixed-rates",
        "429=0.05,500=0.05,502=0.05,reset=0.05,truncate=0.05,seed=7,retry_after=0",
        {},
        {429, 500, 502, 0, 200},
        None,
        0.0,
    ),
]


@pytest.mark.parametrize(
    ("spec", "retry", "statuses", "fired", "least_wait"),
    [row[1:] for row in RETRYABLE],
    ids=[row[0] for row in RETRYABLE],
)
def test_retryable_fault_is_survived(
    make_sim: MakeSim,
    loader: MakeLoader,
    clean: dict[str, list[Any]],
    spec: str,
    retry: dict[str, Any],
    statuses: set[int],
    fired: int | None,
    least_wait: float,
) -> None:
    """The run retries each faulted request and loads exactly what a clean run loads."""
    sim = make_sim(edition="cloud", token=SECRET, faults=spec)
    run = loader(sim)
    result = run.load(**SMALL, retry={**FAST_RETRY, **retry})

    log = sim.requests()["log"]
    faulted = [e for e in log if e["fault"]]
    assert faulted, "the fault never fired"
    if fired is not None:
        assert len(faulted) == fired
    assert {e["status"] for e in faulted} <= statuses
    totals = result.report.totals()
    assert totals.retries == len(faulted)
    assert totals.wait_seconds_sum >= least_wait
    for entry in faulted:  # each faulted request was sent again, later, and answered
        assert any(
            later["n"] > entry["n"]
            and later["path"] == entry["path"]
            and later["params"] == entry["params"]
            and later["status"] == 200
            and later["fault"] is None
            for later in log
        ), entry
    assert all(e["auth"] == "token" and e["accept"] == "application/json" for e in log)
    assert data_tables(run.db_file) == clean
    assert SECRET not in repr(result.report.as_dict())


def test_insert_while_paging_commits_loses_nothing(make_sim: MakeSim, loader: MakeLoader) -> None:
    """New commits arriving while later pages are read: no loss and no duplicates (oldest first)."""
    sim = make_sim(edition="cloud", token=SECRET)
    before = len(sim.truth("commits"))
    sim.set_faults(
        {
            "seed": 1,
            "rules": [{"kind": "insert", "rate": 1, "count": 4, "match": "commits.list.workspace"}],
        }
    )
    run = loader(sim)
    run.load(levels="workspace", resources="commits", page_size=50)

    inserted = [
        e
        for e in sim.requests()["log"]
        if e["fault"] == "insert" and e["params"].get("page", "1") != "1"
    ]
    assert len(inserted) == 3
    assert len(sim.truth("commits")) == before + len(inserted)
    loaded = keys(run, "cloud_workspace_commits", "hash")
    assert len(loaded) == len(set(loaded))
    assert set(loaded) == in_window(sim, "commits", START, clock(sim))
    parents = run.rows(
        "SELECT repository_slug, hash, position, parent_hash FROM cloud_commit_parents"
    )
    assert sorted(parents) == sorted(
        (c["repository"]["slug"], c["hash"], i, p["hash"])
        for c in sim.truth("commits")
        for i, p in enumerate(c["parents"])
    )


def test_insert_while_paging_pull_requests_is_caught_by_the_next_run(
    make_sim: MakeSim, loader: MakeLoader
) -> None:
    """Pull requests page newest first: no duplicates, and the look-back picks up the insert."""
    sim = make_sim(edition="cloud", token=SECRET)
    sim.set_faults(
        {
            "seed": 1,
            "rules": [
                {"kind": "insert", "rate": 1, "count": 3, "match": "pull-requests.list.workspace"}
            ],
        }
    )
    run = loader(sim)
    args = {"levels": "workspace", "resources": "pull_requests", "page_size": 20}
    run.load(**args)
    assert [
        e
        for e in sim.requests()["log"]
        if e["fault"] == "insert" and e["params"].get("page", "1") != "1"
    ]
    sim.clear_faults()
    run.load(**args)
    loaded = keys(run, "cloud_workspace_pull_requests", "id")
    assert len(loaded) == len(set(loaded))
    assert set(loaded) == in_window(sim, "pull-requests", START, clock(sim))


def test_429_holds_every_thread(make_sim: MakeSim, loader: MakeLoader) -> None:
    """One scope's 429 with Retry-After makes the other scopes' threads wait too (HostGate)."""
    sim = make_sim(edition="cloud", token=SECRET)
    sim.set_faults(
        {
            "seed": 1,
            "rules": [
                {
                    "kind": "429",
                    "rate": 1,
                    "count": 1,
                    "retry_after": 1,
                    "match": "commits.list.repository",
                }
            ],
        }
    )
    result = loader(sim).load(levels="repository", resources="commits", page_size=20)

    counts = result.report.as_dict()["resources"]
    limited = [label for label, c in counts.items() if c["retries"]]
    assert len(limited) == 1 and limited[0].startswith("commits.repository:")
    held = [
        label
        for label, c in counts.items()
        if label.startswith("commits.repository:")
        and not c["retries"]
        and c["wait_seconds_sum"] >= 0.5
    ]
    assert held, counts


# retry budget ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("retry", "says"),
    [
        (
            {"backoff_base": 10, "max_wait_seconds": 100, "total_wait_seconds": 0.001},
            "retry.total_wait_seconds=0.001",
        ),
        ({"max_attempts": 2}, "still failing after 2 attempts"),
    ],
    ids=["total-wait", "max-attempts"],
)
def test_retry_budget_stops_the_run_and_writes_nothing(
    make_sim: MakeSim, loader: MakeLoader, retry: dict[str, Any], says: str
) -> None:
    """Past the budget the run stops; tables and cursors stay as the last good run left them."""
    sim = make_sim(edition="cloud", token=SECRET)
    run = loader(sim)
    run.load(**SMALL)
    before, state = everything(run.db_file), run.pipeline().state["sources"]
    sim.advance(days=1)  # new commits and pull requests that a good run would load
    sim.set_faults("503=1,match=pull-requests")
    serial = last_serial(sim)

    with pytest.raises(Exception) as caught:
        run.load(**SMALL, retry={**FAST_RETRY, **retry})
    cause = cause_of(caught.value)
    assert isinstance(cause, RetryBudgetExhausted), cause
    assert says in str(cause) and "rerun" in str(cause)
    assert any(e["status"] == 503 for e in log_since(sim, serial))
    assert everything(run.db_file) == before
    assert run.pipeline().state["sources"] == state

    sim.clear_faults()
    run.load(**SMALL)  # the next good run catches up
    assert set(keys(run, "cloud_workspace_commits", "hash")) == in_window(
        sim, "commits", START, clock(sim)
    )


# a CSV export cut mid-stream (self-hosted) ----------------------------------------------------
EXPORTS = {"levels": ["global"], "resources": ["commit_exports"]}


def exported_hashes(sim: Simulator, start: datetime) -> list[str]:
    """Commit hashes a global commit export from `start` to the clock must hold, one each."""
    until = clock(sim)
    return sorted(
        c["id"] for c in sim.truth("commits") if start <= parse(c["authorTimestamp"]) < until
    )


def export_requests(sim: Simulator, serial: int = 0) -> list[dict[str, Any]]:
    return [e for e in log_since(sim, serial) if e["endpoint"] == "commits.csv.global"]


def test_truncated_csv_export_is_requested_again_whole(
    make_sim: MakeSim, loader: MakeLoader
) -> None:
    """A CSV body cut mid-stream is retried like a cut JSON body: the export is asked for
    again, the table holds each exported commit once, the report counts the retry."""
    sim = make_sim(
        edition="server",
        faults={
            "seed": 1,
            "rules": [{"kind": "truncate", "rate": 1, "count": 1, "match": "commits.csv"}],
        },
    )
    result = loader(sim).load(**EXPORTS)

    exports = export_requests(sim)
    assert [e["fault"] for e in exports] == ["truncate", None]
    assert exports[0]["status"] == exports[1]["status"] == 200
    assert exports[0]["params"] == exports[1]["params"]
    assert result.report.totals().retries == 1
    assert result.report.as_dict()["resources"]["commit_exports.global:global"]["retries"] == 1
    landed = [h for (h,) in loader(sim).rows("SELECT commit_hash FROM server_commit_exports")]
    assert sorted(landed) == exported_hashes(sim, START)


def test_csv_export_cut_every_time_stops_past_the_budget_and_writes_nothing(
    make_sim: MakeSim, loader: MakeLoader
) -> None:
    """Cut on every attempt: the run stops as any exhausted retry budget does, having asked
    `max_attempts` times, and nothing of the window is written."""
    sim = make_sim(edition="server")
    run = loader(sim)
    run.load(**EXPORTS)
    before, state = everything(run.db_file), run.pipeline().state["sources"]
    sim.advance(days=1)
    sim.set_faults("truncate=1,match=commits.csv")
    serial = last_serial(sim)

    with pytest.raises(Exception) as caught:
        run.load(**EXPORTS, retry={**FAST_RETRY, "max_attempts": 3})
    cause = cause_of(caught.value)
    assert isinstance(cause, RetryBudgetExhausted), cause
    assert "still failing after 3 attempts" in str(cause) and "rerun" in str(cause)
    assert [e["fault"] for e in export_requests(sim, serial)] == ["truncate"] * 3
    assert everything(run.db_file) == before
    assert run.pipeline().state["sources"] == state


# a next link to another host ---------------------------------------------------------------------
def test_next_link_to_another_host_is_never_followed(
    make_sim: MakeSim, loader: MakeLoader, trap: Trap
) -> None:
    """A `next` link to another port: the run fails, the other host gets no request at all."""
    sim = make_sim(edition="cloud", token=SECRET)
    run = loader(sim)
    run.load(**SMALL)
    before = everything(run.db_file)
    sim.advance(days=1)
    sim.set_conditions(next_link_base=trap.url)
    serial = last_serial(sim)

    with pytest.raises(Exception) as caught:
        run.load(**{**SMALL, "page_size": 5})
    cause = cause_of(caught.value)
    assert isinstance(cause, UnsafeLinkError), cause
    assert trap.url in str(cause) and SECRET not in str(cause)
    assert trap.received == []
    assert all(e["status"] == 200 for e in log_since(sim, serial))  # page 1s were read...
    assert everything(run.db_file) == before  # ...and nothing of them was written


# secrets ---------------------------------------------------------------------------------------
def test_token_is_stored_nowhere(make_sim: MakeSim, loader: MakeLoader) -> None:
    """Not in the report, the pipeline state, any table of the DuckDB file, or any file."""
    sim = make_sim(edition="cloud", token=SECRET)
    run = loader(sim)
    result = run.load(levels="workspace", resources="commits,pull_requests,users")
    assert result.report.totals().rows > 0
    assert SECRET not in json.dumps(result.report.as_dict())
    assert SECRET not in json.dumps(run.pipeline().state, default=str)
    text = text_of_db(run.db_file)
    assert "cloud_users" in text and "last_value" in text  # the search saw tables and state
    assert SECRET not in text
    assert files_containing(run.path, SECRET) == []


# the command: exit codes and one-line messages ---------------------------------------------------
BASE_ARGS = (
    "--start-date",
    "2026-03-01",
    "--end-date",
    "2026-06-01",
    "--levels",
    "workspace",
    "--resources",
    "commits,pull_requests",
    "--page-size",
    "50",
)


def run_cli(
    sim: Simulator,
    path: Path,
    *args: str,
    env: dict[str, str | None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`repo-analytics load` against `sim`, with its DuckDB file and state under `path`."""
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "EXTRACT__"))
    }
    settings: dict[str, str | None] = {
        "SOURCES__REPO_ANALYTICS__EDITION": "cloud",
        "SOURCES__REPO_ANALYTICS__BASE_URL": sim.base_url,
        "SOURCES__REPO_ANALYTICS__WORKSPACE": sim.config.workspace,
        "SOURCES__REPO_ANALYTICS__TOKEN": SECRET,
        "SOURCES__REPO_ANALYTICS__RETRY": json.dumps(FAST_RETRY),
        **(env or {}),
    }
    environment.update({k: v for k, v in settings.items() if v is not None})
    command = [
        CLI,
        "--duckdb",
        str(path / "data.duckdb"),
        "--pipelines-dir",
        str(path / "pipelines"),
        "--schemas-dir",
        str(path / "schemas"),
        "load",
        *BASE_ARGS,
        *args,
    ]
    done = subprocess.run(
        command, env=environment, cwd=path, capture_output=True, text=True, timeout=60
    )
    for secret in (SECRET, EXPIRED):
        assert secret not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return done


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Simulator, Path, Any]]:
    """A module's simulator, and a DuckDB file holding one good load made by the command."""
    path = tmp_path_factory.mktemp("cli")
    with cloud_sim() as sim:
        done = run_cli(sim, path)
        yield sim, path, done


def test_cli_clean_run_exits_0_with_a_summary(host: tuple[Simulator, Path, Any]) -> None:
    """Exit 0, a summary line, the pipeline's folder and the report's path, the truth loaded,
    no token stored."""
    sim, path, done = host
    assert done.returncode == 0, done.stderr
    summary = done.stdout.strip().splitlines()
    assert len(summary) == 4
    assert summary[1] == (
        f"pipeline repo_analytics in {path / 'pipelines'} (inspect it: dlt pipeline "
        f"--pipelines-dir {path / 'pipelines'} repo_analytics info | trace | show)"
    )
    # a workspace-level run has no repository-level rows to reconcile, and says so
    assert summary[2] == (
        "reconciliation with the API's statistics: not run (the run read no "
        "repository-level commits, pull requests or statistics into this "
        "dataset)"
    )
    assert summary[3] == f"run report: {path / 'data.report.json'}"
    assert (path / "data.report.json").is_file()
    assert summary[0].startswith("load ok: ") and "0 retries" in summary[0]
    assert summary[0].endswith("0 skipped scopes")
    run = Loader(sim, path)
    commits = in_window(sim, "commits", START, clock(sim))
    pulls = in_window(sim, "pull-requests", START, clock(sim))
    assert set(keys(run, "cloud_workspace_commits", "hash")) == commits
    assert set(keys(run, "cloud_workspace_pull_requests", "id")) == pulls
    assert f"load ok: {len(commits) + len(pulls)} rows read" in summary[0]
    assert SECRET not in text_of_db(path / "data.duckdb")
    assert files_containing(path, SECRET) == []


# (id, condition changes, environment changes, extra flags, fragments of the one-line message)
FATAL: list[tuple[str, dict[str, Any], dict[str, str | None], tuple[str, ...], tuple[str, ...]]] = [
    (
        "expired-token",
        {},
        {"SOURCES__REPO_ANALYTICS__TOKEN": EXPIRED},
        (),
        ("token was refused", "401", "Create a new one", "SOURCES__REPO_ANALYTICS__TOKEN"),
    ),
    (
        "unlicensed",
        {"licensed": False},
        {},
        (),
        ("no active commercial or trial licence", "plan details"),
    ),
    (
        "old-app",
        {"app_version": "5.1.0"},
        {},
        (),
        ("404 with a web page", "app is not installed", "base_url"),
    ),
    (
        "login-page",
        {"proxy_login": True},
        {},
        (),
        ("text/html", "instead of JSON", "login page", "base_url"),
    ),
    (
        "next-link-elsewhere",
        {"next_link_base": "TRAP"},
        {},
        ("--page-size", "5"),
        ("refused to follow pagination link", "credentials are never sent elsewhere"),
    ),
]
DEFAULT_CONDITIONS = {
    "licensed": True,
    "app_version": "5.4.0",
    "proxy_login": False,
    "next_link_base": None,
}


@pytest.mark.parametrize(
    ("conditions", "env", "flags", "says"),
    [row[1:] for row in FATAL],
    ids=[row[0] for row in FATAL],
)
def test_cli_fatal_error_exits_1_and_writes_nothing(
    host: tuple[Simulator, Path, Any],
    trap: Trap,
    conditions: dict[str, Any],
    env: dict[str, str | None],
    flags: tuple[str, ...],
    says: tuple[str, ...],
) -> None:
    """Exit 1, one line that says what to do, the earlier good load untouched."""
    sim, path, _ = host
    before = everything(path / "data.duckdb")
    assert before
    changes = {k: trap.url if v == "TRAP" else v for k, v in conditions.items()}
    sim.set_conditions(**changes)
    try:
        done = run_cli(sim, path, *flags, env=env)
    finally:
        sim.set_conditions(**{k: DEFAULT_CONDITIONS[k] for k in changes})
    assert done.returncode == 1, (done.stdout, done.stderr)
    line = one_line(done.stderr)
    assert line.startswith("repo-analytics: failed: ")
    for fragment in says:
        assert fragment in line
    assert done.stdout == ""
    assert trap.received == []
    assert everything(path / "data.duckdb") == before


def test_a_first_run_that_fails_leaves_no_duckdb_file(make_sim: MakeSim, tmp_path: Path) -> None:
    """A first run refused by the host (an expired token) stops with exit 1 and creates no
    DuckDB file (an empty one was left before: state restore opened it); the run with a
    good token then loads as any first run does."""
    sim = make_sim(edition="cloud", token=SECRET)
    done = run_cli(sim, tmp_path, env={"SOURCES__REPO_ANALYTICS__TOKEN": EXPIRED})
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "token was refused" in one_line(done.stderr)
    assert not (tmp_path / "data.duckdb").exists()

    done = run_cli(sim, tmp_path, "--levels", "workspace", "--resources", "commits")
    assert done.returncode == 0, (done.stdout, done.stderr)
    run = Loader(sim, tmp_path)
    commits = in_window(sim, "commits", START, clock(sim))
    assert commits and set(keys(run, "cloud_workspace_commits", "hash")) == commits


# (id, extra flags, environment changes, fragments of the one-line message)
CONFIG: list[tuple[str, tuple[str, ...], dict[str, str | None], tuple[str, ...]]] = [
    (
        "levels",
        ("--levels", "bogus"),
        {},
        ("config `levels` has invalid value `bogus`", "workspace, repository, user"),
    ),
    (
        "page-size",
        ("--page-size", "1001"),
        {},
        ("config `page_size` has invalid value `1001`", "a number from 1 to 1000"),
    ),
    (
        "start-after-end",
        ("--start-date", "2026-07-01"),
        {},
        ("config `start_date` has invalid value `2026-07-01`", "a date before end_date"),
    ),
    (
        "no-base-url",
        (),
        {"SOURCES__REPO_ANALYTICS__BASE_URL": None},
        ("`base_url` not set", "SOURCES__REPO_ANALYTICS__BASE_URL"),
    ),
    (
        "no-token",
        (),
        {"SOURCES__REPO_ANALYTICS__TOKEN": None},
        ("config `token` has invalid value `(empty)`", "SOURCES__REPO_ANALYTICS__TOKEN"),
    ),
    (
        "duckdb-memory-limit",
        ("--duckdb-memory-limit", "lots"),
        {},
        ("config `duckdb_memory_limit` has invalid value `lots`", "256MB or 2GB", "`default`"),
    ),
    (
        "retry-key",
        (),
        {"SOURCES__REPO_ANALYTICS__RETRY": '{"max_attemps": 3}'},
        ("config `retry` has invalid value `max_attemps`", "max_attempts, backoff_base"),
    ),
]


@pytest.mark.parametrize(
    ("flags", "env", "says"), [row[1:] for row in CONFIG], ids=[row[0] for row in CONFIG]
)
def test_cli_config_error_exits_2_before_any_request(
    host: tuple[Simulator, Path, Any],
    flags: tuple[str, ...],
    env: dict[str, str | None],
    says: tuple[str, ...],
) -> None:
    """Exit 2 naming the bad value and the valid ones; no request reached the host."""
    sim, path, _ = host
    before, serial = everything(path / "data.duckdb"), last_serial(sim)
    done = run_cli(sim, path, *flags, env=env)
    assert done.returncode == 2, (done.stdout, done.stderr)
    line = one_line(done.stderr)
    assert line.startswith("repo-analytics: config error: ")
    for fragment in says:
        assert fragment in line
    assert last_serial(sim) == serial
    assert everything(path / "data.duckdb") == before


def test_cli_skipped_scope_exits_3(make_sim: MakeSim, tmp_path: Path) -> None:
    """A forbidden repository is skipped and listed; the others load; exit 3."""
    sim = make_sim(edition="cloud", token=SECRET)
    sim.set_conditions(forbidden=["service-engine-1"])
    done = run_cli(
        sim,
        tmp_path,
        "--levels",
        "repository",
        "--resources",
        "commits",
        "--repositories",
        "service-engine-1,api-ui-0",
    )
    assert done.returncode == 3, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("load partial: ") and lines[0].endswith("1 skipped scopes")
    assert lines[1].startswith("  skipped commits.repository:service-engine-1: forbidden: ")
    loaded = Loader(sim, tmp_path).rows("SELECT DISTINCT repository_slug FROM cloud_commits")
    assert loaded == [("api-ui-0",)]


def test_cli_retry_budget_exits_4_and_writes_nothing(make_sim: MakeSim, tmp_path: Path) -> None:
    """503 on every request: exit 4 with one line; the DuckDB file holds no table."""
    sim = make_sim(edition="cloud", token=SECRET, faults="503=1")
    budget = {
        **FAST_RETRY,
        "backoff_base": 10,
        "max_wait_seconds": 100,
        "total_wait_seconds": 0.001,
    }
    done = run_cli(sim, tmp_path, env={"SOURCES__REPO_ANALYTICS__RETRY": json.dumps(budget)})
    assert done.returncode == 4, (done.stdout, done.stderr)
    line = one_line(done.stderr)
    assert line.startswith("repo-analytics: stopped: ")
    assert "retry.total_wait_seconds" in line and "rerun later" in line
    assert sim.requests()["by_endpoint"]  # it did try
    assert everything(tmp_path / "data.duckdb") == {}
