"""HTTPS hosts and corporate networks (issue 13), end to end over real sockets.

A simulator serving HTTPS with a CA made for the run (`Simulator(tls=True)`, `sim.ca_file`)
stands for a self-hosted instance behind an internal certificate authority. The runs are
`repo-analytics load` in this process (`pipelines.cli.main.main`, the environment set per test) or
in-process loads (`Loader`); the proxy and the plain-HTTP host are small socket servers of
this module, on loopback, that count what reaches them.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import certifi
import duckdb
import pytest
import requests

from pipelines.cli.main import main
from simulator import Simulator
from tests.cloud import truth as cloud_truth
from tests.selfhosted import truth as server_truth
from tests.support import FIXED_NOW
from tests.support.helpers import data_tables, folder_flags
from tests.support.loader import Loader

MakeSim = Callable[..., Simulator]
END = datetime.fromtimestamp(FIXED_NOW, UTC).isoformat()
# requests reads these (the client once per run, see `ApiClient`); each test sets its own
NETWORK_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NO_PROXY", "no_proxy") + tuple(
    f"{scheme}_{case}" for scheme in ("HTTPS", "HTTP", "ALL") for case in ("PROXY", "proxy")
)
# one repository-level list, a few pages: a short run with several requests
NARROW = {"levels": "repository", "resources": "commits", "start_date": "2026-05-20"}


@pytest.fixture(autouse=True)
def clean_network_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("SOURCES__") or n in NETWORK_VARIABLES]:
        monkeypatch.delenv(name)


class Listener:
    """A TCP host on loopback that records every connection and the bytes it received.

    As a proxy (`proxy=True`) it relays to the host a client names: a `CONNECT host:port`
    request opens a tunnel (counted in `tunnels`), an absolute-form `GET http://...` (a
    plain-HTTP request through a proxy) is relayed as it is (counted in `forwarded`). Else it
    answers every connection with an empty 404.
    """

    def __init__(self, proxy: bool = False) -> None:
        self.proxy = proxy
        self.connections = 0
        self.tunnels: list[str] = []
        self.forwarded: list[str] = []
        self.received = b""
        self._lock = threading.Lock()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                head += chunk
            with self._lock:
                self.received += head
            if not self.proxy:
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                return
            method, target = head.split(b" ", 2)[:2]
            if method == b"CONNECT":
                host, port = target.decode().rsplit(":", 1)
                self.tunnels.append(target.decode())
                head_out = b""
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:  # absolute-form: http://host:port/path
                address = target.decode().split("/")[2]
                host, port = address.rsplit(":", 1)
                self.forwarded.append(target.decode())
                head_out = head
            with socket.create_connection((host, int(port))) as upstream:
                upstream.sendall(head_out)
                back = threading.Thread(target=pump, args=(upstream, conn), daemon=True)
                back.start()
                pump(conn, upstream)
                back.join(timeout=5)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.server.close()


def pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


@pytest.fixture
def listener() -> Iterator[Listener]:
    host = Listener()
    yield host
    host.close()


@pytest.fixture
def proxy() -> Iterator[Listener]:
    host = Listener(proxy=True)
    yield host
    host.close()


def settings_of(sim: Simulator) -> dict[str, str]:
    """The source's settings for `sim` as environment variables (the credentials too)."""
    values = {
        "EDITION": sim.config.edition,
        "BASE_URL": sim.base_url,
        "END_DATE": END,
        "RETRY__BACKOFF_BASE": "0.01",
    }
    if sim.config.edition == "cloud":
        values.update(WORKSPACE=sim.info()["workspace"], TOKEN=sim.config.token)
    else:
        values.update(USERNAME=sim.config.username, PASSWORD=sim.config.password)
    values.update({k.upper(): v for k, v in NARROW.items()})
    return {f"SOURCES__REPO_ANALYTICS__{k}": v for k, v in values.items()}


def load(
    sim: Simulator,
    folder: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *flags: str,
    env: dict[str, str] | None = None,
) -> tuple[int, str, str]:
    """`repo-analytics load` against `sim` in this process: (exit code, stdout, stderr)."""
    for name, value in {**settings_of(sim), **(env or {})}.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    code = main([*folder_flags(folder), "load", "--no-reconcile", *flags])
    out = capsys.readouterr()
    return code, out.out, out.err


def everything(db_file: Path) -> dict[str, list[Any]]:
    """Every table of every schema in the file, dlt's own included, in a stable order."""
    with duckdb.connect(str(db_file), read_only=True) as con:
        names = con.execute(
            "SELECT table_schema, table_name FROM information_schema.tables ORDER BY 1, 2"
        ).fetchall()
        return {
            f"{s}.{t}": sorted(con.execute(f'SELECT * FROM "{s}"."{t}"').fetchall(), key=repr)
            for s, t in names
        }


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


# a load over HTTPS equals the truth ------------------------------------------------------------
def test_cloud_load_over_https_equals_truth(make_sim: MakeSim, tmp_path: Path) -> None:
    """Every cloud table of a load over HTTPS, verified against the run's CA (`ca_bundle`),
    equals the simulator's ground truth."""
    sim = make_sim(edition="cloud", tls=True)
    assert sim.base_url.startswith("https://")
    run = Loader(sim, tmp_path)
    truth = cloud_truth.Truth.read(sim)

    result = run.load(ca_bundle=sim.ca_file)

    assert not result.report.partial
    cloud_truth.check_everything(run, truth, cloud_truth.Window(cloud_truth.START, truth.clock))


def test_server_load_over_https_equals_truth(make_sim: MakeSim, tmp_path: Path) -> None:
    """Every self-hosted list table (all levels, with reviewers and participants) of a load
    over HTTPS equals the ground truth."""
    sim = make_sim(edition="server", tls=True)
    run = Loader(sim, tmp_path)
    truth = server_truth.Truth.read(sim)
    window = server_truth.Window(server_truth.START, truth.clock)

    result = run.load(ca_bundle=sim.ca_file)

    assert not result.report.partial
    server_truth.check_lists(run, truth, window, server_truth.expected_scopes(truth, window))
    server_truth.check_primary_keys(run)


# an untrusted certificate ----------------------------------------------------------------------
@pytest.mark.parametrize("edition", ["cloud", "server"])
def test_untrusted_certificate_stops_at_once_changing_nothing(
    edition: str,
    make_sim: MakeSim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without the CA: exit 1, one line naming the setting that fixes it, no retry (no request
    ever reached the API: every handshake failed), and the DuckDB file as it was."""
    sim = make_sim(edition=edition, tls=True)
    code, _, err = load(sim, tmp_path, monkeypatch, capsys, "--ca-bundle", str(sim.ca_file))
    assert code == 0, err
    before = everything(tmp_path / "data.duckdb")
    served = sim.requests()["total"]

    code, out, err = load(sim, tmp_path, monkeypatch, capsys)

    line = one_line(err)
    assert code == 1
    origin = sim.base_url
    assert line == (
        f"repo-analytics: failed: the certificate of {origin} is not trusted (unable to get "
        "local issuer certificate; self-signed or an internal CA): set ca_bundle "
        "(SOURCES__REPO_ANALYTICS__CA_BUNDLE, --ca-bundle) to the PEM file of the CA that "
        "signed it; nothing of this run was written"
    )
    assert "retry" not in out + err
    assert sim.requests()["total"] == served
    assert everything(tmp_path / "data.duckdb") == before


def test_untrusted_certificate_writes_nothing_on_a_first_run(
    make_sim: MakeSim, tmp_path: Path
) -> None:
    """A first run without the CA leaves no data table behind (the `repo-analytics`
    command in a process of its own: one line, no traceback)."""
    import subprocess
    import sys

    sim = make_sim(edition="cloud", tls=True)
    env = {k: v for k, v in os.environ.items() if k not in NETWORK_VARIABLES}
    env.update(settings_of(sim))
    cli = str(Path(sys.executable).with_name("repo-analytics"))

    done = subprocess.run(
        [cli, "--duckdb", "data.duckdb", "--pipelines-dir", "pipelines", "load"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 1, done.stderr
    assert "set ca_bundle" in one_line(done.stderr)
    assert sim.config.token not in done.stdout + done.stderr
    assert data_tables(Loader(sim, tmp_path)) == set()


class Relay:
    """Connections to 127.0.0.3 (another loopback address) relayed to `target`'s port: the
    same host under a name its certificate does not hold."""

    def __init__(self, target: str) -> None:
        self.target = ("127.0.0.1", int(target.rsplit(":", 1)[1]))
        self.server = socket.create_server(("127.0.0.3", 0))
        self.url = f"https://127.0.0.3:{self.server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.server.accept()
                upstream = socket.create_connection(self.target)
                for a, b in ((conn, upstream), (upstream, conn)):
                    threading.Thread(target=pump, args=(a, b), daemon=True).start()


def test_a_certificate_for_another_name_says_so(
    make_sim: MakeSim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The CA is trusted, but base_url names the host by an address its certificate does
    not hold: exit 1, one line saying so."""
    sim = make_sim(edition="cloud", tls=True)
    relay = Relay(sim.base_url)
    try:
        code, _, err = load(
            sim,
            tmp_path,
            monkeypatch,
            capsys,
            "--ca-bundle",
            str(sim.ca_file),
            env={"SOURCES__REPO_ANALYTICS__BASE_URL": relay.url},
        )
    finally:
        relay.server.close()

    assert code == 1
    assert one_line(err) == (
        f"repo-analytics: failed: the certificate of {relay.url} is not valid for that host "
        "name (IP address mismatch, certificate is not valid for '127.0.0.3'): use in base_url "
        "a host name the certificate names; nothing of this run was written"
    )


def test_https_to_a_plain_http_port_stops_at_once(
    make_sim: MakeSim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """base_url says https, the port speaks plain HTTP: exit 1 at the first request (no
    retries), one line pointing at the scheme."""
    sim = make_sim(edition="cloud")
    https = sim.base_url.replace("http://", "https://")

    code, out, err = load(
        sim, tmp_path, monkeypatch, capsys, env={"SOURCES__REPO_ANALYTICS__BASE_URL": https}
    )

    assert code == 1
    line = one_line(err)
    assert line.startswith(f"repo-analytics: failed: {https}/rest/latest/")
    assert "does not answer TLS" in line and "check the scheme of base_url" in line
    assert "retry" not in out + err


# REQUESTS_CA_BUNDLE ----------------------------------------------------------------------------
def test_requests_ca_bundle_is_used_without_ca_bundle(
    make_sim: MakeSim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sim = make_sim(edition="server", tls=True)

    code, out, err = load(
        sim, tmp_path, monkeypatch, capsys, env={"REQUESTS_CA_BUNDLE": str(sim.ca_file)}
    )

    assert code == 0, err
    assert "load ok" in out
    assert sim.requests()["total"] > 0


def test_ca_bundle_wins_over_a_wrong_requests_ca_bundle(
    make_sim: MakeSim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """REQUESTS_CA_BUNDLE names certifi's store, which does not hold the run's CA: alone it
    fails verification; with `ca_bundle` (variable or flag) the run succeeds."""
    sim = make_sim(edition="cloud", tls=True)
    wrong = {"REQUESTS_CA_BUNDLE": certifi.where()}

    alone = load(sim, tmp_path / "alone", monkeypatch, capsys, env=wrong)
    by_flag = load(
        sim, tmp_path / "flag", monkeypatch, capsys, "--ca-bundle", str(sim.ca_file), env=wrong
    )
    by_variable = load(
        sim,
        tmp_path / "variable",
        monkeypatch,
        capsys,
        env={**wrong, "SOURCES__REPO_ANALYTICS__CA_BUNDLE": str(sim.ca_file)},
    )

    assert alone[0] == 1 and "set ca_bundle" in one_line(alone[2])
    assert by_flag[0] == 0, by_flag[2]
    assert by_variable[0] == 0, by_variable[2]


@pytest.mark.parametrize("variable", ["SOURCES__REPO_ANALYTICS__CA_BUNDLE", "REQUESTS_CA_BUNDLE"])
def test_a_missing_ca_file_is_a_config_error(
    variable: str,
    make_sim: MakeSim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Exit 2 before any request, one line naming the setting and the path."""
    sim = make_sim(edition="cloud", tls=True)
    missing = str(tmp_path / "no-such-ca.pem")
    key = "ca_bundle" if variable.startswith("SOURCES") else variable

    code, _, err = load(sim, tmp_path, monkeypatch, capsys, env={variable: missing})

    assert code == 2
    assert one_line(err).startswith(f"repo-analytics: config error: config `{key}` has invalid ")
    assert missing in err
    assert sim.requests()["total"] == 0


def test_a_file_without_certificates_is_a_config_error(
    make_sim: MakeSim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sim = make_sim(edition="cloud", tls=True)
    bogus = tmp_path / "bogus.pem"
    bogus.write_text("not a certificate\n", encoding="utf-8")

    code, _, err = load(sim, tmp_path, monkeypatch, capsys, "--ca-bundle", str(bogus))

    assert code == 2
    assert "config `ca_bundle` has invalid value" in one_line(err)
    assert "holds no certificate" in err
    assert sim.requests()["total"] == 0


# proxies ---------------------------------------------------------------------------------------
def test_https_proxy_carries_the_run_and_no_proxy_bypasses_it(
    make_sim: MakeSim,
    proxy: Listener,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With HTTPS_PROXY the run goes through CONNECT tunnels of the proxy (still verified
    against `ca_bundle` end to end); with NO_PROXY naming the host it goes direct."""
    sim = make_sim(edition="server", tls=True)
    address = sim.base_url.removeprefix("https://")
    ca = ("--ca-bundle", str(sim.ca_file))

    through = load(
        sim, tmp_path / "through", monkeypatch, capsys, *ca, env={"HTTPS_PROXY": proxy.url}
    )
    tunnels = list(proxy.tunnels)
    bypassed = load(
        sim,
        tmp_path / "bypassed",
        monkeypatch,
        capsys,
        *ca,
        env={"HTTPS_PROXY": proxy.url, "NO_PROXY": "127.0.0.1"},
    )

    assert through[0] == 0, through[2]
    assert tunnels and set(tunnels) == {address}
    assert proxy.forwarded == []
    assert bypassed[0] == 0, bypassed[2]
    assert proxy.tunnels == tunnels  # none more
    assert b"analyst-pass" not in proxy.received and b"Authorization" not in proxy.received


def test_http_proxy_carries_a_plain_http_run(
    make_sim: MakeSim,
    proxy: Listener,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sim = make_sim(edition="cloud")

    code, _, err = load(sim, tmp_path, monkeypatch, capsys, env={"HTTP_PROXY": proxy.url})

    assert code == 0, err
    assert proxy.forwarded and all(f.startswith(sim.base_url + "/") for f in proxy.forwarded)
    assert proxy.tunnels == []


# ~/.netrc ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("edition", ["cloud", "server"])
def test_a_netrc_entry_for_the_host_does_not_replace_the_credentials(
    edition: str,
    make_sim: MakeSim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A netrc file naming the host with other credentials (a git login, say) is not read:
    the run authenticates with its configured token or password and loads."""
    sim = make_sim(edition=edition)
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone-else password not-the-api-password\n")
    netrc.chmod(0o600)

    code, _, err = load(sim, tmp_path / "run", monkeypatch, capsys, env={"NETRC": str(netrc)})

    assert code == 0, err
    statuses = {status for counts in sim.requests()["by_endpoint"].values() for status in counts}
    assert statuses == {"200"}


# no downgrade ----------------------------------------------------------------------------------
@pytest.mark.parametrize("edition", ["cloud", "server"])
def test_a_redirect_to_plain_http_is_refused(
    edition: str,
    make_sim: MakeSim,
    listener: Listener,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The HTTPS host answers 302 to the plain-HTTP listener: exit 1, one line naming the
    target; the listener gets no connection at all, and nothing is written."""
    sim = make_sim(edition=edition, tls=True)
    sim.set_conditions(redirect_base=listener.url)

    code, _, err = load(sim, tmp_path, monkeypatch, capsys, "--ca-bundle", str(sim.ca_file))

    line = one_line(err)
    assert code == 1
    assert line.startswith(
        "repo-analytics: failed: refused to follow a redirect to plain HTTP "
        f"`{listener.url}{sim.config.prefix}/"
    )
    assert "credentials are never sent over plain HTTP" in line
    assert listener.connections == 0
    assert data_tables(Loader(sim, tmp_path)) == set()


def test_the_redirect_reaches_the_listener_for_a_client_that_follows_it(
    make_sim: MakeSim, listener: Listener
) -> None:
    """The control for the test above: the simulator's redirect and the listener work, and
    plain requests would follow the redirect to plain HTTP (dropping only Authorization)."""
    sim = make_sim(edition="server", tls=True)
    sim.set_conditions(redirect_base=listener.url)

    answer = requests.get(
        sim.api_base + "/commits", headers=sim.auth_headers, verify=sim.ca_file, timeout=10
    )

    assert answer.history and answer.history[0].status_code == 302
    assert listener.connections == 1
    assert b"GET /rest/analytics-api/latest/commits HTTP/1.1" in listener.received
    assert b"Authorization" not in listener.received


@pytest.mark.parametrize("edition", ["cloud", "server"])
def test_a_redirect_to_another_https_host_is_followed_without_the_credentials(
    edition: str,
    make_sim: MakeSim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The HTTPS host answers 302 to another HTTPS host (a second simulator, reached as
    `localhost` where the first is `127.0.0.1`): the run follows it, as requests does, but
    sends that host no credentials; it refuses the request, and the run stops with one line
    that says so (not that the credentials are wrong), nothing written."""
    sim = make_sim(edition=edition, tls=True)
    other = make_sim(edition=edition, tls=True)
    both = tmp_path / "both-cas.pem"
    both.write_bytes(Path(str(sim.ca_file)).read_bytes() + Path(str(other.ca_file)).read_bytes())
    # `localhost`, not `127.0.0.1`: another host to requests
    other_host = f"localhost:{urlsplit(other.base_url).port}"
    sim.set_conditions(redirect_base=f"https://{other_host}")

    code, _, err = load(sim, tmp_path / "run", monkeypatch, capsys, "--ca-bundle", str(both))

    line = one_line(err)
    assert code == 1
    assert line.startswith(f"repo-analytics: failed: the host redirected {sim.api_base}/"), line
    assert f"to another host, https://{other_host}{other.config.prefix}/" in line
    assert "without the credentials: they are sent only to the host of base_url" in line
    sent = {entry["auth"] for entry in sim.requests()["log"]}
    reached = other.requests()["log"]
    assert sent == {"token" if edition == "cloud" else "basic"}  # the configured host: all
    assert reached and {entry["auth"] for entry in reached} == {"none"}  # the other: none
    assert reached[0]["path"].startswith(other.config.prefix)  # the redirect's target
    assert data_tables(Loader(sim, tmp_path / "run")) == set()


def test_a_next_link_to_plain_http_is_refused(
    make_sim: MakeSim,
    listener: Listener,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The cloud host's `next` links point to plain HTTP: the first pages are read, the link
    is refused (exit 1, one line naming it without its query), the listener gets nothing,
    and nothing of the pages read is written."""
    sim = make_sim(edition="cloud", tls=True)
    sim.set_conditions(next_link_base=listener.url)

    code, _, err = load(
        sim, tmp_path, monkeypatch, capsys, "--ca-bundle", str(sim.ca_file), "--page-size", "5"
    )

    line = one_line(err)
    assert code == 1
    assert line.startswith(
        "repo-analytics: failed: refused to follow a next link to plain HTTP "
        f"`{listener.url}/rest/latest/"
    )
    assert "?" not in line and sim.config.token not in line
    assert sim.requests()["total"] > 0
    assert listener.connections == 0
    assert data_tables(Loader(sim, tmp_path)) == set()
