"""Direct requests (`direct.py` over `http11.py`) against a real HTTP server on loopback:
encoded bodies, each framing of a body (a length, chunks, up to the close), an interim 100
answer, connections kept alive, an idle connection the server closed, a refused port, answers
that break off or break the limits.

The simulator sends no encoded bodies and keeps its connections open, so these shapes of real
hosts are served here by a small server of the standard library.
"""

from __future__ import annotations

import gzip
import http.client
import socket
import sys
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from sources.repo_analytics.connection import BrokenBody, Transport
from sources.repo_analytics.direct import HostUnreachable

BODY = b"".join(b"%06d,commit-%d,\xc3\xa9\n" % (i, i) for i in range(20_000))  # ~400 KB
ENCODED = {
    "identity": BODY,
    "gzip": gzip.compress(BODY),
    "deflate": zlib.compress(BODY),  # with its zlib header, as the standard says
    "raw-deflate": zlib.compress(BODY)[2:-4],  # without it, as some servers send
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        server: Server = self.server  # type: ignore[assignment]
        with server.lock:
            again = self.client_address[1] in server.requests
            if again and server.drop_reused:  # closed on the next request, unanswered
                server.dropped += 1
                self.close_connection = True
                return
            server.requests.append(self.client_address[1])
            server.hosts.append(self.headers["Host"])
        framing, _, kind = self.path.strip("/").split("?")[0].rpartition("/")
        body = ENCODED[kind]
        if framing == "continue":  # an interim answer first
            self.send_response_only(100)
            self.end_headers()
        self.send_response(200)
        self.send_header("Content-Type", "text/csv")
        self.send_header("content-type", "text/plain")  # a repeated name: the first counts
        if kind != "identity":
            self.send_header("Content-Encoding", kind.replace("raw-", ""))
        if framing == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for start in range(0, len(body), 7_000):
                part = body[start : start + 7_000]
                self.wfile.write(b"%x;ext=1\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\nX-Trailer: yes\r\n\r\n")
        elif framing == "close":  # no length: the body ends where the connection closes
            self.close_connection = True
            self.end_headers()
            self.wfile.write(body)
        elif framing == "short":  # a length the body never reaches
            self.close_connection = True
            self.send_header("Content-Length", str(len(body) + 100))
            self.end_headers()
            self.wfile.write(body)
        elif framing == "bad-chunk":  # a chunk size that is no size
            self.close_connection = True
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"-5\r\nabcde\r\n0\r\n\r\n")
        elif framing == "many-headers":
            for number in range(101):
                self.send_header(f"X-Header-{number}", "x")
            self.end_headers()
        else:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        if server.close_after_answer:  # closed without saying so: the client finds out later
            self.close_connection = True

    def log_message(self, *args: Any) -> None:
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: str = "127.0.0.1") -> None:
        self.address_family = socket.AF_INET6 if ":" in address else socket.AF_INET
        super().__init__((address, 0), Handler)
        self.lock = threading.Lock()
        self.requests: list[int] = []  # the client port of each request
        self.hosts: list[str] = []  # the Host header of each request
        self.close_after_answer = False
        self.drop_reused = False
        self.dropped = 0
        self.closed = threading.Event()  # set each time the server closed a connection

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that hung up: quiet
            super().handle_error(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        super().shutdown_request(request)
        self.closed.set()


def serving(address: str) -> Iterator[Server]:
    served = Server(address)
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    yield served
    served.shutdown()
    served.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    yield from serving("127.0.0.1")


def transport() -> Transport:
    return Transport({}, True, {}, 4)


def url(server: Server, kind: str) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/{kind}"


@pytest.mark.parametrize("kind", sorted(ENCODED))
def test_a_body_is_decoded_whole_and_streamed(server: Server, kind: str) -> None:
    client = transport()
    with client.get(url(server, kind), None, {}, (5, 5)) as whole:
        assert whole.status_code == 200
        assert whole.content == BODY
    with client.get(url(server, kind), {"part": 2}, {}, (5, 5)) as streamed:
        chunks = list(streamed.iter_content(chunk_size=4096))
    assert len(chunks) > 1 and b"".join(chunks) == BODY


def test_an_ipv6_literal_host_is_asked_directly() -> None:
    """`http://[::1]:PORT/`: the connection goes to the address, the Host header keeps the
    brackets, and the body reads whole."""
    for served in serving("::1"):
        port = served.server_address[1]
        with transport().get(f"http://[::1]:{port}/gzip", None, {}, (5, 5)) as reply:
            assert reply.status_code == 200 and reply.content == BODY
        assert served.hosts == [f"[::1]:{port}"]


def test_one_connection_serves_requests_one_after_another(server: Server) -> None:
    client = transport()
    for _ in range(5):
        with client.get(url(server, "gzip"), None, {}, (5, 5)) as reply:
            assert reply.content == BODY
    assert len(server.requests) == 5 and len(set(server.requests)) == 1


def test_an_idle_connection_the_server_closed_is_replaced_before_use(server: Server) -> None:
    """Each answer's connection is closed by the server after it, unannounced: every next
    request finds its kept connection at its end and opens another, none fails."""
    server.close_after_answer = True
    client = transport()
    for _ in range(4):
        server.closed.clear()
        with client.get(url(server, "identity"), None, {}, (5, 5)) as reply:
            assert reply.content == BODY
        assert server.closed.wait(5)  # the server's side is closed before the next request
    assert len(server.requests) == 4 and len(set(server.requests)) == 4


def test_a_kept_connection_the_server_drops_on_the_next_request_fails_and_is_not_kept(
    server: Server,
) -> None:
    """The server closes a kept connection when its next request comes, unanswered (an idle
    timeout at that moment): the request fails as a dropped connection (the client retries
    it, counted: see test_client_faults), and the next one opens a new connection."""
    server.drop_reused = True
    client = transport()
    with client.get(url(server, "gzip"), None, {}, (5, 5)) as reply:
        assert reply.content == BODY
    with pytest.raises(ConnectionError):  # http.client's RemoteDisconnected, or a reset
        client.get(url(server, "gzip"), None, {}, (5, 5))
    with client.get(url(server, "gzip"), None, {}, (5, 5)) as reply:
        assert reply.content == BODY
    assert server.dropped == 1
    assert len(server.requests) == 2 and len(set(server.requests)) == 2


def test_a_port_nobody_listens_on_is_unreachable() -> None:
    with socket.socket() as probe:  # a free port, closed again
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(HostUnreachable):
        transport().get(f"http://127.0.0.1:{port}/identity", None, {}, (5, 5))


def test_a_body_read_halfway_closes_its_connection(server: Server) -> None:
    """A reply closed before its body's end does not give its connection back: the next
    request opens another and reads its answer whole."""
    client = transport()
    with client.get(url(server, "identity"), None, {}, (5, 5)) as partial:
        next(partial.iter_content(chunk_size=1024))
    with client.get(url(server, "identity"), None, {}, (5, 5)) as reply:
        assert reply.content == BODY
    assert len(set(server.requests)) == 2


@pytest.mark.parametrize("kind", ["identity", "gzip"])
@pytest.mark.parametrize("framing", ["chunked", "close", "continue"])
def test_each_framing_of_a_body_is_read_whole_and_streamed(
    server: Server, framing: str, kind: str
) -> None:
    """Chunks (with an extension and a trailer), a body up to the connection's close, an
    interim 100 answer before the final one: the body reads whole and streamed, the first
    of a repeated header counts, a chunked answer's connection serves the next request and
    one read up to its close does not."""
    client = transport()
    with client.get(url(server, f"{framing}/{kind}"), None, {}, (5, 5)) as whole:
        assert whole.status_code == 200 and whole.content == BODY
        assert whole.headers.get("CONTENT-TYPE") == "text/csv"
    with client.get(url(server, f"{framing}/{kind}"), {"part": 2}, {}, (5, 5)) as streamed:
        chunks = list(streamed.iter_content(chunk_size=4096))
    assert len(chunks) > 1 and b"".join(chunks) == BODY
    assert len(set(server.requests)) == (2 if framing == "close" else 1)


@pytest.mark.parametrize("framing", ["short", "bad-chunk"])
def test_a_body_shorter_than_its_length_or_with_a_bad_chunk_is_broken(
    server: Server, framing: str
) -> None:
    client = transport()
    with client.get(url(server, f"{framing}/identity"), None, {}, (5, 5)) as reply:
        with pytest.raises(BrokenBody):
            _ = reply.content
    with client.get(url(server, "identity"), None, {}, (5, 5)) as reply:
        assert reply.content == BODY
    assert len(set(server.requests)) == 2


def test_an_answer_with_more_than_100_headers_is_refused(server: Server) -> None:
    with pytest.raises(http.client.HTTPException, match="more than 100 headers"):
        transport().get(url(server, "many-headers/identity"), None, {}, (5, 5))


def test_a_header_value_with_a_line_break_is_never_sent(server: Server) -> None:
    """A value that would start a second header (a token pasted with its newline) fails
    before anything is sent, and the message does not carry the value."""
    with pytest.raises(ValueError, match="invalid header 'Authorization'") as raised:
        transport().get(url(server, "identity"), None, {"Authorization": "t0k\r\nX: 1"}, (5, 5))
    assert "t0k" not in str(raised.value)
    assert server.requests == []
