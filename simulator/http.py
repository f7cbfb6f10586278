"""Plain request/response records and the stdlib threaded HTTP/1.1 server that carries them.

The stdlib server is used on purpose: faults such as connection resets and truncated bodies
need the raw socket, which higher-level frameworks hide.
"""

from __future__ import annotations

import socket
import ssl
import struct
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass
class Request:
    method: str
    raw_path: str  # as received, still percent-encoded, without the query
    path: str  # percent-decoded
    query: dict[str, str]
    query_string: str
    headers: dict[str, str]  # lower-case names
    body: bytes = b""


@dataclass
class Response:
    status: int
    body: bytes | Iterable[bytes] = b""
    content_type: str = "application/json;charset=UTF-8"
    headers: dict[str, str] = field(default_factory=dict)
    # transport-level misbehaviour, set by faults: "reset" | "truncate" | None
    transport: str | None = None
    delay_s: float = 0.0


def json_response(status: int, body: bytes, headers: dict[str, str] | None = None) -> Response:
    return Response(status, body, "application/json;charset=UTF-8", headers or {})


def html_response(status: int, body: str) -> Response:
    return Response(status, body.encode(), "text/html;charset=UTF-8")


class SimHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        app: Callable[[Request], Response],
        in_flight: Callable[[int], None] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.app = app
        self.in_flight = in_flight  # told +1 / -1 around each API answer, latency included
        self.tls = tls  # HTTPS when set: each connection's handshake runs in its own thread
        super().__init__(address, SimRequestHandler)

    def finish_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        """With TLS, the handshake runs here, in the connection's thread, not in the accepting
        one: a client that refuses the certificate, or never completes the handshake, holds up
        no other connection."""
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        secured = self.tls.wrap_socket(request, server_side=True)  # SSLError: handle_error
        try:
            super().finish_request(secured, client_address)
        finally:
            secured.close()

    def handle_error(self, request: object, client_address: object) -> None:
        """Clients that hang up mid-response are normal here; a real bug is logged."""
        error = sys.exc_info()[1]
        if not isinstance(error, (ConnectionError, OSError)):
            traceback.print_exc()


class SimRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle on, a keep-alive client's
    # delayed ACK stalls every small response by ~40 ms.
    disable_nagle_algorithm = True
    server: SimHTTPServer

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
        """Quiet: the simulator keeps its own request log."""

    def _handle(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = Request(
            method=self.command,
            raw_path=parts.path,
            path=unquote(parts.path),
            query={k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()},
            query_string=parts.query,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        gauge = None if request.path.startswith("/_sim/") else self.server.in_flight
        if gauge is not None:
            gauge(1)
        try:
            response = self.server.app(request)
            if response.delay_s:
                time.sleep(response.delay_s)
        finally:
            # closed before the answer goes out: a client that got it and asks again at once
            # must not find this request still counted
            if gauge is not None:
                gauge(-1)
        self._respond(response)

    def _respond(self, response: Response) -> None:
        if response.transport == "reset":
            self._close(abort=True)
            return
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        for name, value in response.headers.items():
            self.send_header(name, value)
        if isinstance(response.body, bytes):
            self._send_whole(response.body, response.transport == "truncate")
        else:
            self._send_chunked(response.body, response.transport == "truncate")

    def _send_whole(self, body: bytes, truncate: bool) -> None:
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if truncate:
            self.wfile.write(body[: max(1, len(body) // 2)])
            self.wfile.flush()
            self._close(abort=False)
            return
        self.wfile.write(body)

    def _send_chunked(self, chunks: Iterable[bytes], truncate: bool) -> None:
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for chunk in chunks:
            if chunk:
                if truncate:  # the first chunk's full size announced, half of it sent
                    self.wfile.write(b"%x\r\n%s" % (len(chunk), chunk[: max(1, len(chunk) // 2)]))
                    self.wfile.flush()
                    self._close(abort=False)
                    return
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        self.wfile.write(b"0\r\n\r\n")

    def _close(self, abort: bool) -> None:
        """End the connection early: with a TCP RST when aborting, else with a plain FIN."""
        self.close_connection = True
        if abort:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            try:
                self.connection.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        self.connection.close()

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass  # the connection was closed on purpose by a fault

    do_GET = _handle
    do_POST = _handle
    do_PUT = _handle
    do_DELETE = _handle
    do_HEAD = _handle
