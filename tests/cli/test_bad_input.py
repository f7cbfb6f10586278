"""Bad input that used to slip past the checks (issue 10 item 9): every value is checked before
the first request, and a bad one stops `repo-analytics load` with one line naming it and the
valid values, exit code 2, no request, and nothing written.

The real command in subprocesses against a real simulator; what crossed the wire comes from
the simulator's request log, what was written from the run's folder.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from simulator import SimConfig, Simulator
from tests.runs.test_backfill import cli_env, log_since
from tests.support import FIXED_NOW
from tests.support.helpers import folder_flags

CLI = Path(sys.executable).parent / "repo-analytics"
RETRY_ENV = "SOURCES__REPO_ANALYTICS__RETRY__"
RETRY_KEYS = (
    "connect_timeout",
    "read_timeout",
    "max_attempts",
    "backoff_base",
    "max_wait_seconds",
    "total_wait_seconds",
    "skip_retry_attempts",
)
LOAD = ("load", "--start-date", "2026-05-25", "--no-reconcile")


@pytest.fixture(scope="module")
def cloud() -> Iterator[Simulator]:
    with Simulator(SimConfig(edition="cloud", size="tiny", now=FIXED_NOW)) as sim:
        yield sim


def run_load(
    folder: Path,
    env: Mapping[str, str],
    *options: str,
    timeout: float = 300,
    load_flags: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """`repo-analytics [options] load [load_flags]` in `folder`; later options override the
    defaults."""
    folder.mkdir(parents=True, exist_ok=True)
    command = [
        str(CLI),
        *folder_flags(folder),
        *options,
        *LOAD,
        *load_flags,
    ]
    return subprocess.run(
        command,
        env=dict(env),
        cwd=folder,
        text=True,
        capture_output=True,
        timeout=timeout,
        check=False,
    )


def listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def write_config(folder: Path, text: str) -> None:
    (folder / ".dlt").mkdir(parents=True)
    (folder / ".dlt" / "config.toml").write_text(text, encoding="utf-8")


def make_folder(folder: Path) -> None:
    (folder / "a_folder.duckdb").mkdir(parents=True)


def make_file(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "a_file").write_text("not a folder", encoding="utf-8")


# (id, extra environment, global options, prepare the run's folder, the bad value as shown,
#  words the line must hold: the key and the valid values)
BAD_INPUT: list[
    tuple[str, dict[str, str], tuple[str, ...], Callable[[Path], None] | None, str, tuple[str, ...]]
] = [
    (
        "edition-env",
        {"SOURCES__REPO_ANALYTICS__EDITION": "bogus"},
        (),
        None,
        "bogus",
        ("config `edition`", "expected one of cloud, server"),
    ),
    (
        "retry-env-attempts-0",
        {RETRY_ENV + "MAX_ATTEMPTS": "0"},
        (),
        None,
        "0",
        ("`retry.max_attempts`", "whole number from 1"),
    ),
    (
        "retry-env-attempts-abc",
        {RETRY_ENV + "MAX_ATTEMPTS": "abc"},
        (),
        None,
        "abc",
        ("`retry.max_attempts`", "whole number from 1"),
    ),
    (
        "retry-env-attempts-fraction",
        {RETRY_ENV + "MAX_ATTEMPTS": "2.5"},
        (),
        None,
        "2.5",
        ("`retry.max_attempts`", "whole number from 1"),
    ),
    (
        "retry-env-skip-attempts-0",
        {RETRY_ENV + "SKIP_RETRY_ATTEMPTS": "0"},
        (),
        None,
        "0",
        ("`retry.skip_retry_attempts`", "whole number from 1"),
    ),
    (
        "retry-env-backoff-negative",
        {RETRY_ENV + "BACKOFF_BASE": "-5"},
        (),
        None,
        "-5",
        ("`retry.backoff_base`", "number from 0"),
    ),
    (
        "retry-env-total-wait-nan",
        {RETRY_ENV + "TOTAL_WAIT_SECONDS": "nan"},
        (),
        None,
        "nan",
        ("`retry.total_wait_seconds`", "number from 0"),
    ),
    (
        "retry-env-connect-timeout-0",
        {RETRY_ENV + "CONNECT_TIMEOUT": "0"},
        (),
        None,
        "0",
        ("`retry.connect_timeout`", "above 0"),
    ),
    (
        "retry-env-read-timeout-text",
        {RETRY_ENV + "READ_TIMEOUT": "slow"},
        (),
        None,
        "slow",
        ("`retry.read_timeout`", "above 0"),
    ),
    (
        "retry-env-unknown-key",
        {RETRY_ENV + "MAX_ATTEMPS": "3"},
        (),
        None,
        "max_attemps",
        ("`retry`", *RETRY_KEYS),
    ),
    (
        "retry-toml-attempts-0",
        {},
        (),
        lambda folder: write_config(folder, "[sources.repo_analytics.retry]\nmax_attempts = 0\n"),
        "0",
        ("`retry.max_attempts`", "whole number from 1"),
    ),
    (
        "retry-toml-timeout-0",
        {},
        (),
        lambda folder: write_config(folder, "[sources.repo_analytics.retry]\nread_timeout = 0\n"),
        "0",
        ("`retry.read_timeout`", "above 0"),
    ),
    (
        "retry-toml-unknown-key",
        {},
        (),
        lambda folder: write_config(folder, "[sources.repo_analytics.retry]\ntimeout = 5\n"),
        "timeout",
        ("`retry`", *RETRY_KEYS),
    ),
    (
        "dataset-odd-characters",
        {},
        ("--dataset", "a b;\"x'y"),
        None,
        "a b;\"x'y",
        ("`dataset`", "letters", "digits", "underscore"),
    ),
    (
        "dataset-upper-case",
        {},
        ("--dataset", "RepoData"),
        None,
        "RepoData",
        ("`dataset`", "lower-case"),
    ),
    (
        "dataset-leading-digit",
        {},
        ("--dataset", "1data"),
        None,
        "1data",
        ("`dataset`", "not starting with a digit"),
    ),
    (
        "duckdb-is-a-folder",
        {},
        ("--duckdb", "a_folder.duckdb"),
        make_folder,
        "a_folder.duckdb",
        ("`duckdb`", "a file", "writable folder"),
    ),
    (
        "duckdb-under-a-file",
        {},
        ("--duckdb", "a_file/data.duckdb"),
        make_file,
        "a_file/data.duckdb",
        ("`duckdb`", "a file", "writable folder"),
    ),
    (
        "duckdb-named-as-the-dataset",
        {},
        ("--duckdb", "Repo_Analytics.v1.duckdb"),
        None,
        "Repo_Analytics.v1.duckdb",
        ("`duckdb`", "not the dataset's (`repo_analytics`)", "--dataset"),
    ),
    (
        "duckdb-named-as-a-given-dataset",
        {},
        ("--dataset", "sales", "--duckdb", "sales.duckdb"),
        None,
        "sales.duckdb",
        ("`duckdb`", "not the dataset's (`sales`)", "rename the file"),
    ),
    (
        "publish-named-as-the-dataset",
        {"SOURCES__REPO_ANALYTICS__PUBLISH_DUCKDB_TO": "bi/repo_analytics.duckdb"},
        (),
        None,
        "bi/repo_analytics.duckdb",
        ("`publish_duckdb_to`", "not the dataset's (`repo_analytics`)"),
    ),
    (
        "destination-unknown",
        {},
        ("--destination", "nosuch"),
        None,
        "nosuch",
        ("`destination`", "duckdb", "parquet", "postgres", "bigquery"),
    ),
]


@pytest.mark.parametrize(
    ("env", "options", "prepare", "shown", "words"),
    [row[1:] for row in BAD_INPUT],
    ids=[row[0] for row in BAD_INPUT],
)
def test_bad_input_stops_before_the_first_request(
    cloud: Simulator,
    tmp_path: Path,
    env: dict[str, str],
    options: tuple[str, ...],
    prepare: Callable[[Path], None] | None,
    shown: str,
    words: tuple[str, ...],
) -> None:
    folder = tmp_path / "run"
    if prepare is not None:
        prepare(folder)
    folder.mkdir(parents=True, exist_ok=True)
    before_files = listing(folder)
    before = cloud.requests()["total"]

    done = run_load(folder, cli_env(cloud, **env), *options)

    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert lines[0].startswith("repo-analytics: config error: ")
    assert f"`{shown}`" in lines[0]
    for word in words:
        assert word in lines[0]
    assert log_since(cloud, before) == []
    assert listing(folder) == before_files  # no DuckDB file, no pipeline folder, no report


def test_a_mistyped_edition_is_named_before_a_missing_setting(
    cloud: Simulator, tmp_path: Path
) -> None:
    """`--edition clould` with no base URL set anywhere: the one line names the edition typed
    and the valid ones (the base URL's turn comes once the edition is right)."""
    folder = tmp_path / "run"
    folder.mkdir()
    env = cli_env(cloud)
    del env["SOURCES__REPO_ANALYTICS__BASE_URL"]
    before = cloud.requests()["total"]

    done = run_load(folder, env, load_flags=("--edition", "clould"))

    lines = done.stderr.splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0] == (
        "repo-analytics: config error: config `edition` has invalid value `clould`: "
        "expected one of cloud, server"
    )
    assert log_since(cloud, before) == []
    assert listing(folder) == set()

    del env["SOURCES__REPO_ANALYTICS__EDITION"]
    done = run_load(folder, env, load_flags=("--edition", "cloud"))
    assert done.returncode == 2 and "`base_url` not set" in done.stderr, done.stderr


def test_nested_retry_env_is_used(make_sim: Callable[..., Simulator], tmp_path: Path) -> None:
    """`SOURCES__REPO_ANALYTICS__RETRY__MAX_ATTEMPTS=2` with a host that always answers 503:
    the first request is tried exactly twice, then the run stops (exit 4)."""
    sim = make_sim(edition="cloud", faults="503=1")
    env = cli_env(sim, **{RETRY_ENV + "MAX_ATTEMPTS": "2", RETRY_ENV + "BACKOFF_BASE": "0.01"})

    done = run_load(tmp_path, env)

    assert done.returncode == 4, done.stderr
    log = log_since(sim, 0)
    assert {e["status"] for e in log} == {503}
    assert list(Counter(e["path"] for e in log).values()) == [2]
    assert "after 2 attempts" in done.stderr


def test_nested_retry_key_overrides_the_config_table(
    make_sim: Callable[..., Simulator], tmp_path: Path
) -> None:
    """An environment variable beats `.dlt/config.toml`, key by key, as everywhere in dlt."""
    sim = make_sim(edition="cloud", faults="503=1")
    write_config(
        tmp_path, "[sources.repo_analytics.retry]\nmax_attempts = 5\nbackoff_base = 0.01\n"
    )
    env = cli_env(sim, **{RETRY_ENV + "MAX_ATTEMPTS": "3"})

    done = run_load(tmp_path, env)

    assert done.returncode == 4, done.stderr
    assert list(Counter(e["path"] for e in log_since(sim, 0)).values()) == [3]


def free_port() -> int:
    """A loopback port with nothing listening on it (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_unreachable_host_says_it_once(cloud: Simulator, tmp_path: Path) -> None:
    """Connection refused on every attempt: the retries happen, quietly, and the one line on
    stderr names the host and what to do (exit 4: rerun later)."""
    port = free_port()
    env = cli_env(
        cloud,
        SOURCES__REPO_ANALYTICS__BASE_URL=f"http://127.0.0.1:{port}",
        SOURCES__REPO_ANALYTICS__RETRY='{"backoff_base": 0.01, "max_attempts": 4}',
    )

    done = run_load(tmp_path, env)

    lines = done.stderr.splitlines()
    assert done.returncode == 4, done.stderr
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert f"127.0.0.1:{port}" in lines[0]
    assert "4 attempts" in lines[0]
    assert "base_url" in lines[0]
