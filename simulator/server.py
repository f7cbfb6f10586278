"""Starting and stopping a simulated host, in-process or from the command line."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .app import HostApp
from .cloud import CloudEdition
from .config import EDITIONS, SimConfig
from .control import info, make_control
from .data import activity
from .data.generate import SIZES, build_world
from .data.world import World
from .edition import EditionBase
from .selfhosted import ServerEdition
from .tls import RunCertificates

EDITION_CLASSES: dict[str, Callable[[HostApp], EditionBase]] = {
    "cloud": CloudEdition,
    "server": ServerEdition,
}
HOUR_S = 3600


def default_now() -> int:
    """The current hour (the wall clock rounded down): a client's default end, "now", reads
    the whole history. A client that advances the clock passes its own end date."""
    return (int(time.time()) // HOUR_S) * HOUR_S


def build(config: SimConfig) -> World:
    if config.edition not in EDITIONS:
        raise ValueError(f"unknown edition `{config.edition}`; valid: {', '.join(EDITIONS)}")
    if config.size not in SIZES:
        raise ValueError(f"unknown size `{config.size}`; valid: {', '.join(SIZES)}")
    now = config.now if config.now is not None else default_now()
    if config.from_git:
        from .data.fromgit import build_world_from_git

        return build_world_from_git(config.from_git, config.seed, now, config.edition)
    return build_world(config.seed, config.size, now, config.edition)


class Simulator:
    """A simulated host serving real HTTP on loopback.

    Example:
        with Simulator(SimConfig(edition="server", size="tiny")) as sim:
            requests.get(sim.api_base + "/commits", auth=sim.basic_auth)
    """

    def __init__(self, config: SimConfig | None = None, **overrides: Any) -> None:
        self.config = config or SimConfig(**overrides)
        self.app = HostApp(self.config, build(self.config), EDITION_CLASSES[self.config.edition])
        self.app.control = make_control(self.app)
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._certificates: RunCertificates | None = None

    def start(self) -> Simulator:
        from .http import SimHTTPServer

        if self.config.tls:
            self._certificates = RunCertificates(self.config.host)
        self._server = SimHTTPServer(
            (self.config.host, self.config.port),
            self.app,
            self.app.log.in_flight,
            self._certificates.server_context() if self._certificates else None,
        )
        host, port = self._server.server_address[:2]
        self.app.base_url = f"{'https' if self.config.tls else 'http'}://{host}:{port}"
        self.app.ca_file = str(self._certificates.ca_file) if self._certificates else None
        self.app.store.forget_rendering()  # links carry the base URL
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._certificates is not None:
            self._certificates.remove()
            self._certificates = None
            self.app.ca_file = None

    def __enter__(self) -> Simulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # connection facts ------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return self.app.base_url

    @property
    def api_base(self) -> str:
        return self.app.api_base

    @property
    def ca_file(self) -> str | None:
        """With `tls`, the PEM file of the CA that signed the host's certificate (for clients
        to trust; removed when the simulator stops); else None."""
        return self.app.ca_file

    @property
    def basic_auth(self) -> tuple[str, str]:
        return (self.config.username, self.config.password)

    @property
    def auth_headers(self) -> dict[str, str]:
        if self.config.edition == "cloud":
            return {"Authorization": self.config.token}
        return {"Authorization": f"Bearer {self.config.server_token}"}

    def info(self) -> dict[str, Any]:
        return info(self.app)

    def banner(self) -> str:
        """The first line printed by `repo-analytics sim`."""
        data = self.info()
        if self.config.edition == "cloud":
            scope = f"workspace={data['workspace']}"
            creds = f"token={self.config.token}"
        else:
            scope = f"projects={','.join(data['projects'])}"
            creds = (
                f"user={self.config.username} password={self.config.password} "
                f"bearer={self.config.server_token}"
            )
        ca = f" ca_file={self.ca_file}" if self.ca_file else ""
        return (
            f"repo-analytics simulator: edition={self.config.edition} "
            f"url={self.api_base}{ca} {scope} {creds} control={self.base_url}/_sim/"
        )

    # control, in-process ---------------------------------------------------------------------
    def truth(self, kind: str, **query: str) -> list[dict[str, Any]]:
        with self.app.world.lock:
            return self.app.edition.truth(kind, query)

    def advance(self, **duration: float) -> dict[str, Any]:
        from .control import advance_seconds

        return activity.advance(self.app.world, advance_seconds(duration), self.app.edition.states)

    def set_faults(self, spec: str | dict[str, Any]) -> None:
        self.app.faults.set_from(spec)

    def clear_faults(self) -> None:
        self.app.faults.clear()

    def set_conditions(self, **changes: Any) -> None:
        self.app.apply_conditions(changes)

    def requests(self, since: int = 0) -> dict[str, Any]:
        return self.app.log.describe(since)

    def reset_requests(self) -> None:
        self.app.log.reset()
