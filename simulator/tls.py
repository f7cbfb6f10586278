"""HTTPS for a simulated host: a certificate authority and a server certificate made for the run.

Self-hosted instances often sit behind an internal certificate authority; a host started with
`tls=True` (`repo-analytics sim --tls`) serves HTTPS with a certificate signed by a CA made by
`trustme` when it starts. The CA's certificate is written to a PEM file (`ca_file`) for
clients to trust; no system store trusts it, just as no system store trusts an internal CA.
"""

from __future__ import annotations

import shutil
import ssl
import tempfile
from pathlib import Path

import trustme


class RunCertificates:
    """A CA and a server certificate for `host`, 127.0.0.1 and localhost, made for one run.

    `ca_file` is the CA's PEM file, in a folder of its own that `remove` deletes.
    """

    def __init__(self, host: str) -> None:
        self._ca = trustme.CA(organization_name="repo-analytics simulator")
        names = dict.fromkeys((host, "127.0.0.1", "localhost"))
        self._cert = self._ca.issue_cert(*names)
        self._folder = Path(tempfile.mkdtemp(prefix="repo-analytics-sim-ca-"))
        self.ca_file = self._folder / "ca.pem"
        self._ca.cert_pem.write_to_path(str(self.ca_file))

    def server_context(self) -> ssl.SSLContext:
        """The listening side's context: the server certificate and its chain."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._cert.configure_cert(context)
        return context

    def remove(self) -> None:
        shutil.rmtree(self._folder, ignore_errors=True)
