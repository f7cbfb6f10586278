"""Direct requests: GETs over `http11` connections, kept open per host.

urllib3 spent ~0.17 ms of Python per request on top of `http.client` (its response wrapper and
header dictionary, parsing the target again and percent-encoding it byte by byte, the pool's
bookkeeping), and `http.client` itself ~0.44 ms (see `http11`): on the medium self-hosted
nightly, 2,947 requests of small answers, a run bound by one core. What a direct request needs
of them is here: connections kept alive per host (one found closed by the host is replaced
before it is used; one the host closes just as it is used fails like any dropped connection,
and the client's retry asks again, as with urllib3), TLS verified against the CA bundle with
the host's name, separate connect and read timeouts, and gzip or deflate bodies. A request
through a proxy goes through urllib3 (`connection.Transport`).
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping

from sources.repo_analytics.http11 import Answer, Http11Connection


class HostUnreachable(OSError):
    """No connection could be made: refused, or no such host name."""


class BodyError(Exception):
    """The body broke off or could not be decoded."""


class Decoder:
    """A body's Content-Encoding undone chunk by chunk: gzip, or deflate with or without
    its zlib header (servers send both, as urllib3 allows)."""

    def __init__(self, encoding: str) -> None:
        self._raw_deflate = encoding == "deflate"
        wbits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
        self._inflate = zlib.decompressobj(wbits)
        self._first = True

    def feed(self, data: bytes) -> bytes:
        try:
            out = self._inflate.decompress(data)
        except zlib.error:
            if not (self._first and self._raw_deflate):
                raise BodyError("undecodable body") from None
            self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
            out = self._inflate.decompress(data)
        self._first = False
        return out

    def end(self) -> bytes:
        return self._inflate.flush()


class DirectResponse:
    """An answer over a direct connection, with the surface `connection.Reply` reads of
    urllib3's: status, headers, the body read whole or streamed, the connection given back
    once the body was read to its end (closed otherwise)."""

    def __init__(self, raw: Answer, release: Callable[[bool], None]) -> None:
        """`release(reusable)` gives the connection back (True) or closes it (False)."""
        self._raw = raw
        self._release: Callable[[bool], None] | None = release
        self._ended = False  # the body was read to its end: the connection can serve again
        self.status = raw.status
        self.headers = raw.headers
        encoding = raw.headers.get("Content-Encoding", "").strip().lower()
        self._decoder = Decoder(encoding) if encoding in ("gzip", "deflate") else None

    def read(self) -> bytes:
        """The whole body, decoded."""
        try:
            data = self._raw.read()
            if self._decoder is not None:
                data = self._decoder.feed(data) + self._decoder.end()
        except (http.client.HTTPException, zlib.error) as error:
            raise BodyError(type(error).__name__) from None
        self._ended = True
        return data

    def stream(self, chunk_size: int) -> Iterator[bytes]:
        """The body in decoded chunks (of about `chunk_size` bytes read)."""
        try:
            while data := self._raw.read(chunk_size):
                if self._decoder is not None:
                    data = self._decoder.feed(data)
                if data:
                    yield data
            if self._decoder is not None and (rest := self._decoder.end()):
                yield rest
        except (http.client.HTTPException, zlib.error) as error:
            raise BodyError(type(error).__name__) from None
        self._ended = True

    def drain_conn(self) -> None:
        """The rest of the body read and dropped, so the connection can serve again."""
        self._raw.read()
        self._ended = True

    def release_conn(self) -> None:
        """The connection back to its host's idle ones when the body was read to its end,
        else closed; once only (a connection given back twice would serve two requests at
        once)."""
        release, self._release = self._release, None
        if release is not None:
            release(self._ended and not self._raw.will_close)

    def close(self) -> None:
        """Nothing to free here: `release_conn` closes a connection whose body was not read
        to its end."""


class DirectConnections:
    """Idle connections per host (scheme, name, port), at most `keep` of each; more are
    opened when all are busy and closed when given back beyond `keep`."""

    def __init__(self, tls: Callable[[], ssl.SSLContext], keep: int) -> None:
        # the TLS context is made at the first HTTPS connection: loading a CA bundle takes
        # 40-150 ms of a run's Python time, for each window's client of a backfill
        self._make_tls, self._keep = tls, keep
        self._tls: ssl.SSLContext | None = None
        self._idle: dict[tuple[str, str, int | None], list[Http11Connection]] = {}
        self._lock = threading.Lock()

    def get(
        self,
        scheme: str,
        host: str,
        port: int | None,
        target: str,
        headers: Mapping[str, str],
        timeout: tuple[float, float],
    ) -> DirectResponse:
        """The answer to a GET of `target` (path and query) on the host, its body unread.
        Raises `HostUnreachable`, `TimeoutError`, `ssl.SSLError`, `OSError` or
        `http.client.HTTPException`."""
        key = (scheme, host, port)
        conn = self._take(key) or self._open(scheme, host, port, timeout[0])
        raw = self._ask(conn, target, headers, timeout[1])

        def release(reusable: bool) -> None:
            if reusable and conn.sock is not None:
                self._give_back(key, conn)
            else:  # the rest of a body unread, or the host closes it
                conn.close()

        return DirectResponse(raw, release)

    @staticmethod
    def _ask(
        conn: Http11Connection, target: str, headers: Mapping[str, str], read_timeout: float
    ) -> Answer:
        """The GET sent on `conn` and its answer's head read; `conn` closed if that failed."""
        try:
            return conn.ask(target, headers, read_timeout)
        except BaseException:
            conn.close()
            raise

    def _open(
        self, scheme: str, host: str, port: int | None, connect_timeout: float
    ) -> Http11Connection:
        try:
            return Http11Connection.open(scheme, host, port, connect_timeout, self._tls_context)
        except (ConnectionRefusedError, socket.gaierror) as error:
            raise HostUnreachable(str(error)) from None

    def _tls_context(self) -> ssl.SSLContext:
        with self._lock:
            if self._tls is None:
                self._tls = self._make_tls()
            return self._tls

    def _take(self, key: tuple[str, str, int | None]) -> Http11Connection | None:
        """An idle connection the host has not closed meanwhile (a readable idle socket is
        one at its end), or None."""
        while True:
            with self._lock:
                idle = self._idle.get(key)
                if not idle:
                    return None
                conn = idle.pop()
            sock = conn.sock
            if sock is not None and not select.select([sock], [], [], 0)[0]:
                return conn
            conn.close()

    def _give_back(self, key: tuple[str, str, int | None], conn: Http11Connection) -> None:
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < self._keep:
                idle.append(conn)
                return
        conn.close()
