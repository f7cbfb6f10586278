"""The simulator over HTTPS (`Simulator(tls=True)`, `repo-analytics sim --tls`) and the
`redirect_base` host condition, over real sockets on loopback."""

from __future__ import annotations

import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from simulator import Simulator

MakeSim = Callable[..., Simulator]
CLI = str(Path(sys.executable).with_name("repo-analytics"))


def test_cli_tls_prints_its_ca_and_serves_https() -> None:
    """`sim --tls`: the first line gives an https URL and the CA's PEM file, which verifies
    the host (and nothing else does); the printed `load` passes it as `--ca-bundle`; the file
    is removed when the simulator stops."""
    process = subprocess.Popen(
        [CLI, "sim", "--tls", "--edition", "cloud", "--size", "tiny", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in process.stdout:  # type: ignore[union-attr]
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        banner = lines.get(timeout=30)
        _, command = lines.get(timeout=10), lines.get(timeout=10)
        fields = dict(re.findall(r"(\w+)=(\S+)", banner))
        url, ca_file = fields["url"], fields["ca_file"]
        assert re.fullmatch(r"https://127\.0\.0\.1:[1-9]\d*/rest/latest", url)
        assert Path(ca_file).read_text(encoding="ascii").startswith("-----BEGIN CERTIFICATE-----")
        commits = f"{url}/workspace/{fields['workspace']}/commits"
        headers = {"Authorization": fields["token"]}

        trusted = requests.get(commits, headers=headers, verify=ca_file, timeout=10)
        with pytest.raises(requests.exceptions.SSLError, match="CERTIFICATE_VERIFY_FAILED"):
            requests.get(commits, headers=headers, timeout=10)  # certifi's store only

        assert trusted.status_code == 200 and trusted.json()["values"]
        assert f"--base-url {url.removesuffix('/rest/latest')} " in command
        assert f" --ca-bundle {ca_file} " in command
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
        assert not Path(ca_file).exists()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=5)


@pytest.mark.parametrize("edition", ["cloud", "server"])
def test_in_process_tls_host(edition: str, make_sim: MakeSim) -> None:
    """`base_url` is https, `ca_file` is in /_sim/info, localhost is a valid name too."""
    sim = make_sim(edition=edition, tls=True)
    assert sim.base_url.startswith("https://127.0.0.1:")
    info = requests.get(sim.base_url + "/_sim/info", verify=sim.ca_file, timeout=10).json()
    assert info["ca_file"] == sim.ca_file and info["base_url"] == sim.base_url
    by_name = sim.base_url.replace("127.0.0.1", "localhost") + "/_sim/info"
    assert requests.get(by_name, verify=sim.ca_file, timeout=10).status_code == 200


def test_a_refused_handshake_does_not_stop_the_host(make_sim: MakeSim) -> None:
    """Clients that refuse the certificate, or speak plain HTTP to the TLS port, leave the
    host serving the next client."""
    sim = make_sim(edition="server", tls=True)
    for _ in range(3):
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(sim.base_url + "/_sim/info", timeout=10)
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.get(sim.base_url.replace("https", "http") + "/_sim/info", timeout=10)
    answer = requests.get(sim.base_url + "/_sim/info", verify=sim.ca_file, timeout=10)
    assert answer.status_code == 200


def test_plain_host_has_no_ca_file(make_sim: MakeSim) -> None:
    sim = make_sim(edition="cloud")
    assert sim.ca_file is None and sim.base_url.startswith("http://")


@pytest.mark.parametrize("edition", ["cloud", "server"])
def test_redirect_base_answers_302_with_path_and_query(edition: str, make_sim: MakeSim) -> None:
    """Every API request answers 302 to the base + its own path and query; /_sim/ is not
    redirected, and clearing the condition ends it."""
    sim = make_sim(edition=edition)
    sim.set_conditions(redirect_base="http://127.0.0.1:9/elsewhere/")
    path = "/workspace/sim-workspace/commits" if edition == "cloud" else "/commits"

    answer = requests.get(
        sim.api_base + path + "?a=1&b=x%20y",
        headers=sim.auth_headers,
        allow_redirects=False,
        timeout=10,
    )

    assert answer.status_code == 302
    assert answer.headers["Location"] == (
        f"http://127.0.0.1:9/elsewhere{sim.config.prefix}{path}?a=1&b=x%20y"
    )
    assert requests.get(sim.base_url + "/_sim/info", timeout=10).status_code == 200
    sim.set_conditions(redirect_base=None)
    assert requests.get(sim.api_base + path, headers=sim.auth_headers, timeout=10).ok
