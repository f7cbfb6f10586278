"""The docs' configuration table (docs/configuration.md), tested key by key (issue 12).

Every key of the table is a setting of the source's spec (and the other way round), and each
one works both as its environment variable and as its `repo-analytics load` flag (secrets: as
the variable and in `.dlt/secrets.toml`; they have no flag), with a value whose effect shows
against a simulator over real HTTP: in the requests it received, how many requests were open
at once, or, where nothing reaches the host, in what the run reports.

The command runs in this process (`pipelines.cli.main.main`; the environment set per test), but for
`.dlt/secrets.toml`, which dlt reads from the working folder: that one runs as a subprocess.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from pipelines.cli.main import main
from pipelines.cli.parser import build_parser
from simulator import Simulator
from sources.repo_analytics.config import SECRET_KEYS, env_name, setting_keys
from tests.support import FIXED_NOW
from tests.support.helpers import folder_flags

# the configuration page; its table is generated from the spec (docs/generate.py), and this
# module checks it against the spec and the command line independently of the generator
PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
CLI = Path(sys.executable).parent / "repo-analytics"
END = datetime.fromtimestamp(FIXED_NOW, UTC)
CLOUD_PREFIX, SERVER_PREFIX = "/rest/latest/", "/rest/analytics-api/latest/"


def settings_section(page: str) -> str:
    """The page's section that lists every setting (its other tables are dlt's settings)."""
    return page.split("\n## Every setting\n", 1)[1].split("\n## ", 1)[0]


def table_keys(page: str) -> list[str]:
    """The keys of the table under `## Every setting`: each backticked name in a row's first
    cell."""
    keys: list[str] = []
    for line in settings_section(page).splitlines():
        if line.startswith("| `"):
            keys += re.findall(r"`([a-z_.]+)`", line.split("|")[1])
    return keys


def differences(table: list[str], spec: tuple[str, ...]) -> dict[str, list[str]]:
    """Keys only in the page's table, only in the spec, or twice in the table."""
    return {
        "not in the spec": sorted(set(table) - set(spec)),
        "not in the docs": sorted(set(spec) - set(table)),
        "twice in the docs": sorted(k for k, n in Counter(table).items() if n > 1),
    }


def test_docs_table_is_the_spec() -> None:
    """Every setting of the spec has its row in the page, and every row is a setting."""
    found = differences(table_keys(PAGE.read_text(encoding="utf-8")), setting_keys())
    assert found == {"not in the spec": [], "not in the docs": [], "twice in the docs": []}


def test_docs_rows_name_variable_and_flag() -> None:
    """Each row's second cell: the key's variable and (but for the credentials) its flag."""
    rows = {
        re.findall(r"`([a-z_.]+)`", line.split("|")[1])[0]: line.split("|")[2].strip()
        for line in settings_section(PAGE.read_text(encoding="utf-8")).splitlines()
        if line.startswith("| `")
    }
    assert sorted(rows) == sorted(setting_keys())
    for key, cell in rows.items():
        expected = f"`{env_name(key)}`"
        if key not in SECRET_KEYS:
            expected += f", `{option_of(key)}`"
        assert cell == expected, key


def option_of(key: str) -> str:
    return "--" + key.replace(".", "-").replace("_", "-")


def test_a_missing_or_unknown_row_is_found() -> None:
    """The comparison above fails for a page without a key's row, or with a row the spec
    does not have."""
    text = PAGE.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `page_size` |"))
    without = text.replace(row + "\n", "")
    extra = text.replace(row, row + "\n| `page_sise` | `7` | a typo |")

    assert differences(table_keys(without), setting_keys())["not in the docs"] == ["page_size"]
    assert differences(table_keys(extra), setting_keys())["not in the spec"] == ["page_sise"]


def test_every_key_has_a_flag_with_its_help() -> None:
    """`load --help` names each key's flag with its variable; secrets have no flag."""
    parser = build_parser()
    load = parser._subparsers._group_actions[0].choices["load"]  # type: ignore[union-attr]
    helps = {
        option: action.help or "" for action in load._actions for option in action.option_strings
    }
    for key in setting_keys():
        option = option_of(key)
        if key in SECRET_KEYS:
            assert option not in helps
        else:
            assert env_name(key) in helps[option], option
            assert "default" in helps[option] or "required" in helps[option], option


@dataclass
class Run:
    """What one `repo-analytics load` did."""

    code: int
    out: str
    err: str
    log: list[dict[str, Any]]
    open_max: int
    report: dict[str, Any] | None

    def endpoints(self, level: str | None = None) -> list[str]:
        return [
            e["endpoint"] for e in self.log if level is None or e["endpoint"].endswith("." + level)
        ]

    def at(self, level: str) -> list[dict[str, Any]]:
        return [e for e in self.log if e["endpoint"].endswith("." + level)]


@dataclass(frozen=True)
class Case:
    """One key: the simulator it runs against, the value set, the other settings (None
    removes a base setting), and what the run must show."""

    value: Callable[[Simulator], str]
    check: Callable[[Run], None]
    edition: str = "cloud"
    settings: dict[str, str | None] = field(default_factory=dict)
    sim: dict[str, Any] = field(default_factory=dict)
    conditions: dict[str, Any] = field(default_factory=dict)


def ok(run: Run) -> None:
    assert run.code == 0, run.err
    assert run.log


def all_paths_start(prefix: str) -> Callable[[Run], None]:
    def check(run: Run) -> None:
        ok(run)
        assert {e["path"][: len(prefix)] for e in run.log} == {prefix}

    return check


def only_at(level: str, part: str) -> Callable[[Run], None]:
    """Every request at `level` is for the one scope whose path holds `part`."""

    def check(run: Run) -> None:
        ok(run)
        assert run.at(level)
        assert all(part in e["path"] for e in run.at(level))

    return check


def levels_read(level: str) -> Callable[[Run], None]:
    def check(run: Run) -> None:
        ok(run)
        assert {e.rsplit(".", 1)[1] for e in run.endpoints()} == {level}

    return check


def families_read(prefix: str) -> Callable[[Run], None]:
    """The repository-level requests (what was read; discovery reads the top lists) are all
    of one family."""

    def check(run: Run) -> None:
        ok(run)
        assert run.endpoints("repository")
        assert all(e.startswith(prefix) for e in run.endpoints("repository"))

    return check


def param_is(name: str, value: str, level: str = "repository") -> Callable[[Run], None]:
    def check(run: Run) -> None:
        ok(run)
        assert run.at(level)
        assert {e["params"].get(name) for e in run.at(level)} == {value}

    return check


def with_files(run: Run) -> None:
    ok(run)
    assert [e for e in run.log if e["params"].get("withFiles") == "true"]


def window_starts(days: float) -> Callable[[Run], None]:
    def check(run: Run) -> None:
        ok(run)
        assert run.report is not None
        start = datetime.fromisoformat(run.report["load"]["window"][0])
        assert start == END - timedelta(days=days)

    return check


def daily_statistics(run: Run) -> None:
    """Every statistics request asks for one day."""
    ok(run)
    spans = {
        datetime.fromisoformat(e["params"]["until_date"])
        - datetime.fromisoformat(e["params"]["since_date"])
        for e in run.log
        if "statistics" in e["endpoint"]
    }
    assert spans == {timedelta(days=1)}


def open_at_once(count: int) -> Callable[[Run], None]:
    def check(run: Run) -> None:
        ok(run)
        assert run.open_max == count

    return check


def tries(count: int, code: int = 4, says: str = "") -> Callable[[Run], None]:
    """The run stopped at its first request, asked `count` times."""

    def check(run: Run) -> None:
        assert run.code == code, run.err
        assert list(Counter(e["path"] for e in run.log).values()) == [count]
        assert says in run.err

    return check


def skipped_after(count: int) -> Callable[[Run], None]:
    """The unindexed repository's commits were asked `count` times, then skipped (exit 3)."""

    def check(run: Run) -> None:
        assert run.code == 3, run.err
        asked = [e for e in run.at("repository") if "/repos/api-ui-0/" in e["path"]]
        assert len(asked) == count
        assert "skipped" in run.out

    return check


def fails_saying(text: str) -> Callable[[Run], None]:
    def check(run: Run) -> None:
        assert run.code == 4, run.err
        assert text in run.err

    return check


def authenticated(scheme: str) -> Callable[[Run], None]:
    def check(run: Run) -> None:
        ok(run)
        assert {e["auth"] for e in run.log} == {scheme}

    return check


FAIL_FAST = {"retry.max_attempts": "1", "retry.backoff_base": "0.01"}


# the DuckDB file's keys (issue 13): a process holds data.duckdb for the lock wait's case;
# the published copy's case runs in tmp_path, where its relative path lands
def stops_held_after(seconds: int) -> Callable[[Run], None]:
    """Stopped by the held file before any request (exit 6), saying how long it waited."""

    def check(run: Run) -> None:
        assert run.code == 6, run.err
        assert "repo-analytics: stopped: the DuckDB file " in run.err
        assert f"for more than {seconds} s;" in run.err
        assert not run.log

    return check


def out_of_memory(run: Run) -> None:
    """DuckDB stopped by the limit: exit 1, one line naming the key; the data was extracted."""
    assert run.code == 1, run.err
    assert "ran out of memory under duckdb_memory_limit" in run.err
    assert run.log


def published_at(relative: str) -> Callable[[Run], None]:
    """The run report names the copy, which holds the loaded rows."""

    def check(run: Run) -> None:
        ok(run)
        assert run.report is not None and run.report["published"] is not None
        copy = Path(run.report["published"]["path"])
        assert copy.as_posix().endswith("/" + relative) and copy.stat().st_size > 0
        with duckdb.connect(str(copy), read_only=True) as con:
            (rows,) = con.execute("SELECT count(*) FROM repo_analytics.cloud_commits").fetchone()  # type: ignore[misc]
        assert rows > 0

    return check


def hold_file(path: Path) -> subprocess.Popen[str]:
    """A process holding `path` open (made when missing) until its stdin closes."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('held', flush=True); "
            "sys.stdin.read()",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def let_go(holder: subprocess.Popen[str] | None) -> None:
    if holder is not None:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


CASES: dict[str, Case] = {
    "edition": Case(lambda sim: "server", all_paths_start(SERVER_PREFIX), edition="server"),
    "base_url": Case(lambda sim: sim.base_url, ok),
    "api_prefix": Case(
        lambda sim: "/custom/analytics",
        all_paths_start("/custom/analytics/"),
        sim={"api_prefix": "/custom/analytics"},
    ),
    "workspace": Case(
        lambda sim: "acme-ws", only_at("repository", "/acme-ws/"), sim={"workspace": "acme-ws"}
    ),
    "projects": Case(
        lambda sim: "PLAT",
        only_at("project", "/projects/PLAT/"),
        edition="server",
        settings={"levels": "project"},
    ),
    "levels": Case(lambda sim: "workspace", levels_read("workspace")),
    "resources": Case(lambda sim: "pull_requests", families_read("pull-requests.list.")),
    "with_files": Case(lambda sim: "true", with_files, edition="server"),
    "repositories": Case(lambda sim: "api-ui-0", only_at("repository", "/repos/api-ui-0/")),
    "users": Case(
        lambda sim: "user0001",
        only_at("user", "/users/user0001/"),
        edition="server",
        settings={"levels": "user"},
    ),
    "start_date": Case(
        lambda sim: "2026-05-29",
        param_is("sinceDate", "2026-05-29T00:00:00+00:00"),
        edition="server",
    ),
    "end_date": Case(
        lambda sim: "2026-05-31",
        param_is("untilDate", "2026-05-31T00:00:00+00:00"),
        edition="server",
        settings={"start_date": "2026-05-30"},
    ),
    "lookback_days": Case(
        lambda sim: "1.5", window_starts(1.5), settings={"start_date": "2026-05-20"}
    ),
    "page_size": Case(lambda sim: "7", param_is("pagelen", "7")),
    "statistics_period": Case(
        lambda sim: "day", daily_statistics, settings={"resources": "change_statistics"}
    ),
    "concurrency": Case(
        lambda sim: "2",
        open_at_once(2),
        sim={"faults": "slow=1,slow_seconds=0.3,match=list.repository"},
    ),
    "retry.max_attempts": Case(
        lambda sim: "2",
        tries(2, says="after 2 attempts"),
        settings={"retry.backoff_base": "0.01"},
        sim={"faults": "503=1"},
    ),
    "retry.backoff_base": Case(
        lambda sim: "0",
        tries(3, says="after 3 attempts"),
        settings={"retry.max_attempts": "3", "retry.total_wait_seconds": "0"},
        sim={"faults": "503=1"},
    ),
    "retry.max_wait_seconds": Case(
        lambda sim: "1",
        tries(1, says="max_wait_seconds=1"),
        settings={"retry.max_attempts": "3"},
        sim={"faults": "429=1,retry_after=5"},
    ),
    "retry.total_wait_seconds": Case(
        lambda sim: "0",
        tries(1, says="total_wait_seconds=0"),
        settings={"retry.max_attempts": "3", "retry.backoff_base": "0.01"},
        sim={"faults": "503=1"},
    ),
    "retry.skip_retry_attempts": Case(
        lambda sim: "2",
        skipped_after(2),
        settings={"retry.backoff_base": "0.01"},
        conditions={"unindexed": {"api-ui-0": -1}},
    ),
    # a host slow to accept (reached with the default: see the test after the cases)
    "retry.connect_timeout": Case(
        lambda sim: "0.2", fails_saying("timeout from"), settings=FAIL_FAST
    ),
    # 1 s answers: well within the default 60 s (the run would succeed), not within 0.2 s
    "retry.read_timeout": Case(
        lambda sim: "0.2",
        fails_saying("timeout from"),
        settings=FAIL_FAST,
        sim={"faults": "slow=1,slow_seconds=1,match=list.repository"},
    ),
    # an HTTPS host whose CA only this file holds: the run fails without it (test_tls.py)
    "ca_bundle": Case(lambda sim: str(sim.ca_file), ok, sim={"tls": True}),
    "duckdb_lock_wait_seconds": Case(lambda sim: "1", stops_held_after(1)),
    # 1MB cannot hold even a small load's merge: the run stops, naming the key
    "duckdb_memory_limit": Case(lambda sim: "1MB", out_of_memory),
    "publish_duckdb_to": Case(lambda sim: "bi/copy.duckdb", published_at("bi/copy.duckdb")),
    "token": Case(lambda sim: sim.config.token, authenticated("token")),
    "username": Case(lambda sim: sim.config.username, authenticated("basic"), edition="server"),
    "password": Case(lambda sim: sim.config.password, authenticated("basic"), edition="server"),
}


def test_every_documented_key_has_a_case() -> None:
    assert sorted(CASES) == sorted(table_keys(PAGE.read_text(encoding="utf-8")))


def base_settings(sim: Simulator) -> dict[str, str]:
    """A narrow run: one day, the repository-level commits."""
    values = {
        "edition": sim.config.edition,
        "base_url": sim.base_url,
        "start_date": "2026-05-31",
        "end_date": END.isoformat(),
        "levels": "repository",
        "resources": "commits",
    }
    if sim.config.edition == "cloud":
        values.update(workspace=sim.info()["workspace"], token=sim.config.token)
    else:
        values.update(username=sim.config.username, password=sim.config.password)
    return values


class SlowToAccept:
    """A port that answers a connection attempt only once it has waited about a second.

    Its listening queue is kept full (one connection of its own waits in it), so the kernel
    drops a client's SYN: the client retries it after 1 s, then 3 s. Once a client's attempt
    has been seen waiting (`SYN_SENT` in /proc/net/tcp) for `hold` seconds, the port accepts
    every connection and relays it to `target`. A connect timeout below `hold` ends the
    attempt; the default (10 s) gets through.
    """

    def __init__(self, target: str, hold: float = 1.2) -> None:
        self.target = target.removeprefix("http://").split(":")
        self.hold = hold
        self.server = socket.create_server(("127.0.0.1", 0), backlog=0)
        self.port = self.server.getsockname()[1]
        self.filler = socket.create_connection(("127.0.0.1", self.port))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def waiting(self) -> bool:
        """A connection attempt to this port not answered yet."""
        lines = Path("/proc/net/tcp").read_text(encoding="ascii").splitlines()[1:]
        return any(
            f.split()[2].endswith(f":{self.port:04X}") and f.split()[3] == "02" for f in lines
        )

    def serve(self) -> None:
        while not self.stop.is_set() and not self.waiting():
            time.sleep(0.02)
        if self.stop.wait(self.hold):
            return
        self.server.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            upstream = socket.create_connection((self.target[0], int(self.target[1])))
            for a, b in ((conn, upstream), (upstream, conn)):
                relay = threading.Thread(target=self.pump, args=(a, b), daemon=True)
                relay.start()

    @staticmethod
    def pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.filler.close()
        self.server.close()


def flag(key: str, value: str) -> list[str]:
    option = option_of(key)
    if value in ("true", "false"):  # a switch
        return [option if value == "true" else "--no-" + option[2:]]
    return [option, value]


def run_load(
    sim: Simulator,
    folder: Path,
    settings: dict[str, str],
    flags: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Run:
    """`repo-analytics load` in this process with `settings` as environment variables."""
    for name in [n for n in os.environ if n.startswith("SOURCES__")]:
        monkeypatch.delenv(name)
    for key, value in settings.items():
        monkeypatch.setenv(env_name(key), value)
    before = sim.requests()["total"]
    capsys.readouterr()
    code = main([*folder_flags(folder), "load", "--no-reconcile", *flags])
    out = capsys.readouterr()
    seen = sim.requests(since=before)
    report_file = folder / "data.report.json"
    report = json.loads(report_file.read_text()) if report_file.exists() else None
    return Run(code, out.out, out.err, list(seen["log"]), seen["open_max"], report)


# every key as its variable and its flag; the credentials, which have no flag, as their
# variable here and in `.dlt/secrets.toml` below
RUNS = [
    (key, form)
    for key in sorted(CASES)
    for form in ("env", "flag")
    if not (form == "flag" and key in SECRET_KEYS)
]


@pytest.mark.parametrize(("key", "form"), RUNS, ids=[f"{k}-{f}" for k, f in RUNS])
def test_key_changes_the_run(
    key: str,
    form: str,
    make_sim: Callable[..., Simulator],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The key's value, as its variable or its flag, shows in what the run did."""
    case = CASES[key]
    sim = make_sim(edition=case.edition, **case.sim)
    if case.conditions:
        sim.set_conditions(**case.conditions)
    settings = {**base_settings(sim), **case.settings}
    slow = SlowToAccept(sim.base_url) if key == "retry.connect_timeout" else None
    if slow is not None:
        settings["base_url"] = slow.url
    holder = hold_file(tmp_path / "data.duckdb") if key == "duckdb_lock_wait_seconds" else None
    if key == "publish_duckdb_to":
        monkeypatch.chdir(tmp_path)
    settings.pop(key, None)
    value = case.value(sim)
    if form == "env":
        settings[key] = value
        flags: list[str] = []
    else:
        flags = flag(key, value)

    try:
        run = run_load(
            sim,
            tmp_path,
            {k: v for k, v in settings.items() if v is not None},
            flags,
            monkeypatch,
            capsys,
        )
    finally:
        if slow is not None:
            slow.close()
        let_go(holder)

    case.check(run)


def test_default_connect_timeout_reaches_the_slow_host(
    make_sim: Callable[..., Simulator],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The host of the `retry.connect_timeout` case is reached with the default timeout: what
    ends that case's run is its short timeout."""
    sim = make_sim(edition="cloud")
    slow = SlowToAccept(sim.base_url)
    try:
        run = run_load(
            sim,
            tmp_path,
            {**base_settings(sim), **FAIL_FAST, "base_url": slow.url},
            [],
            monkeypatch,
            capsys,
        )
    finally:
        slow.close()

    ok(run)


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_secret_from_secrets_toml(
    key: str, make_sim: Callable[..., Simulator], tmp_path: Path
) -> None:
    """A secret in the working folder's `.dlt/secrets.toml`, not in the environment."""
    case = CASES[key]
    sim = make_sim(edition=case.edition)
    settings = base_settings(sim)
    settings.pop(key)
    (tmp_path / ".dlt").mkdir()
    (tmp_path / ".dlt" / "secrets.toml").write_text(
        f'[sources.repo_analytics]\n{key} = "{case.value(sim)}"\n', encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOURCES__")}
    env.update({env_name(k): v for k, v in settings.items()})
    before = sim.requests()["total"]

    done = subprocess.run(
        [
            str(CLI),
            "--duckdb",
            "data.duckdb",
            "--pipelines-dir",
            "pipelines",
            "--schemas-dir",
            "schemas",
            "--progress",
            "off",
            "load",
            "--no-reconcile",
        ],
        env=env,
        cwd=tmp_path,
        text=True,
        capture_output=True,
        timeout=300,
        check=False,
    )

    seen = sim.requests(since=before)
    case.check(
        Run(done.returncode, done.stdout, done.stderr, list(seen["log"]), seen["open_max"], None)
    )


def test_flag_wins_over_variable(
    make_sim: Callable[..., Simulator],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A flag and the same key's variable: the flag's value is used."""
    sim = make_sim(edition="cloud")
    settings = {**base_settings(sim), "page_size": "9"}

    run = run_load(sim, tmp_path, settings, ["--page-size", "7"], monkeypatch, capsys)

    param_is("pagelen", "7")(run)
