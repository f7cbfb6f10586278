"""The HTTP layer under `ApiClient`: direct connections (`direct.py`) or urllib3's proxy
pools, the redirects a request follows (never to plain HTTP, the credentials only to the host
asked), and the answer.

requests spent ~0.18 ms of Python per request on top of urllib3 (preparing the request,
merging the session's settings, hooks, cookies, its adapter), and urllib3 ~0.17 ms on top of
`http.client` (`direct.py`, now over `http11.py`). What the run used of them is here: the
environment's proxies (read once, as requests reads them; urllib3's proxy managers), the CA
bundle, timeouts, redirects as requests follows them, gzip, and bodies read whole or
streamed.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Iterator, Mapping
from functools import partial
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlencode, urljoin, urlsplit

import certifi
import urllib3
from requests.utils import requote_uri
from urllib3.exceptions import DecodeError, ProtocolError, ReadTimeoutError

from .direct import BodyError, DirectConnections, DirectResponse
from .errors import DowngradeError, FatalApiError, bare_url

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MOST_REDIRECTS = 30  # requests' own bound
DEFAULT_PORTS = {"http": 80, "https": 443}
# errors while a body is read: a reset, a read timeout, fewer bytes than Content-Length
BODY_ERRORS = (ProtocolError, ReadTimeoutError, DecodeError, OSError, BodyError)


class BrokenBody(Exception):
    """The body of an answer broke off before its end."""


class Reply:
    """An answer: status, headers, the URL it came from (after redirects, `history` the URLs
    before it), its body read whole (`content`) or in chunks (`iter_content`)."""

    def __init__(
        self,
        raw: urllib3.BaseHTTPResponse | DirectResponse,
        url: str,
        history: tuple[str, ...],
    ):
        self.raw, self.url, self.history = raw, url, history
        self.status_code = raw.status
        self.headers = raw.headers
        self._content: bytes | None = None
        self._consumed = False  # the body was read to its end

    @property
    def content(self) -> bytes:
        """The whole body (read once); `BrokenBody` if it broke off."""
        if self._content is None:
            try:
                self._content = self.raw.read()
                self._consumed = True
            except BODY_ERRORS:
                self.raw.close()
                raise BrokenBody from None
            finally:
                self.raw.release_conn()
        return self._content

    def iter_content(self, chunk_size: int) -> Iterator[bytes]:
        """The body in chunks of up to `chunk_size` bytes; `BrokenBody` if it broke off."""
        try:
            yield from self.raw.stream(chunk_size)
        except BODY_ERRORS:
            raise BrokenBody from None
        self._consumed = True

    def close(self) -> None:
        """Gives the connection back: closed when its body was not read to the end."""
        if not self._consumed:
            self.raw.close()
        self.raw.release_conn()

    def __enter__(self) -> Reply:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Transport:
    """GETs on connections shared by the run's threads: direct, or through urllib3's proxy
    managers.

    Args:
        headers: sent with every request (auth): dropped on a redirect to another host.
        verify: the CA bundle file or folder to verify HTTPS hosts against; True: certifi's.
        proxies: the environment's proxies by scheme (`all` for any), as requests reads them.
        connections: connections kept per host (more are opened when needed, then closed).
    """

    def __init__(
        self,
        headers: Mapping[str, str],
        verify: str | bool,
        proxies: Mapping[str, str],
        connections: int,
    ) -> None:
        self._headers = {"Accept-Encoding": "gzip, deflate", **headers}
        ca = certifi.where() if verify is True else str(verify)
        folder = os.path.isdir(ca)
        tls: dict[str, Any] = {"cert_reqs": "CERT_REQUIRED"}
        tls["ca_cert_dir" if folder else "ca_certs"] = ca
        context = partial(
            ssl.create_default_context, cafile=None if folder else ca, capath=ca if folder else None
        )
        self._connections = DirectConnections(context, connections)
        self._proxied: dict[str, urllib3.ProxyManager] = {}
        for scheme in ("http", "https"):
            proxy = proxies.get(scheme) or proxies.get("all")
            if proxy:
                self._proxied[scheme] = urllib3.ProxyManager(
                    proxy, maxsize=connections, proxy_headers=proxy_auth(proxy), **tls
                )

    def get(
        self,
        url: str,
        params: Mapping[str, Any] | None,
        headers: Mapping[str, str],
        timeout: tuple[float, float],
    ) -> Reply:
        """The answer to a GET of `url` with `params`, redirects followed; its body unread.
        Raises urllib3's errors for a connection that failed, `DowngradeError` for a
        redirect to plain HTTP."""
        target = with_query(url, params)
        sent = {**self._headers, **headers}
        history: list[str] = []
        while True:
            raw = self._open(target, sent, timeout)
            location = raw.headers.get("Location") if raw.status in REDIRECT_STATUSES else None
            if not location:
                return Reply(raw, target, tuple(history))
            try:
                raw.drain_conn()
            except BODY_ERRORS:
                raw.close()
            raw.release_conn()
            following = requote_uri(urljoin(target, location))
            if urlsplit(target).scheme == "https" and urlsplit(following).scheme != "https":
                raise DowngradeError(following, "a redirect")
            if len(history) >= MOST_REDIRECTS:
                raise FatalApiError(
                    "redirect_loop",
                    f"more than {MOST_REDIRECTS} redirects from {bare_url(url)}: check base_url",
                )
            if strips_auth(target, following):
                sent = {k: v for k, v in sent.items() if k.lower() != "authorization"}
            history.append(target)
            target = following

    def _open(
        self, target: str, headers: Mapping[str, str], timeout: tuple[float, float]
    ) -> urllib3.BaseHTTPResponse | DirectResponse:
        """One GET of `target`, not followed, its body unread: through a proxy by urllib3,
        else on a direct connection (`direct.py`)."""
        parts = urlsplit(target)
        manager = self._proxied.get(parts.scheme)
        if manager is not None:
            return manager.urlopen(
                "GET",
                target,
                headers=headers,
                redirect=False,
                retries=False,
                timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]),
                preload_content=False,
            )
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return self._connections.get(
            parts.scheme, parts.hostname or "", parts.port, path, headers, timeout
        )


def with_query(url: str, params: Mapping[str, Any] | None) -> str:
    """`url` with `params` added to its query as requests adds them (None values left out).
    `url` is quoted already (`ApiClient.url`), the parameters are quoted here."""
    pairs = [(k, v) for k, v in (params or {}).items() if v is not None]
    if not pairs:
        return url
    return url + ("&" if urlsplit(url).query else "?") + urlencode(pairs, doseq=True)


def strips_auth(old: str, new: str) -> bool:
    """Whether a redirect from `old` to `new` drops the credentials: another host, or another
    port or scheme than an upgrade to HTTPS on the default ports (requests' rule)."""
    before, after = urlsplit(old), urlsplit(new)
    if before.hostname != after.hostname:
        return True
    if (
        before.scheme == "http"
        and after.scheme == "https"
        and before.port in (80, None)
        and after.port in (443, None)
    ):
        return False
    changed_port = before.port != after.port
    changed_scheme = before.scheme != after.scheme
    default = (DEFAULT_PORTS.get(before.scheme), None)
    if not changed_scheme and before.port in default and after.port in default:
        return False
    return changed_port or changed_scheme


def proxy_auth(proxy: str) -> dict[str, str] | None:
    """The Proxy-Authorization header of a proxy URL with user info, else None."""
    parts = urlsplit(proxy)
    if not parts.username:
        return None
    user = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    return urllib3.make_headers(proxy_basic_auth=user)
