"""Shapes of real hosts' answers the simulator does not send, read by the client
(`ApiClient` on requests) over real HTTP on loopback: encoded bodies, each framing of a body
(a length, chunks, up to the close), an interim 100 answer, connections kept alive, an idle
connection the host closed, one it drops when it is used again, answers that break off or
break the limits, and a header that would split in two.

The simulator sends no encoded bodies and keeps its connections open, so these shapes are
served here by a small server of the standard library; what crossed the wire is what it
recorded.
"""

from __future__ import annotations

import gzip
import socket
import sys
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import pytest

from sources.repo_analytics.client.api import ApiClient
from sources.repo_analytics.config import RetryConfiguration
from sources.repo_analytics.editions.cloud import CLOUD
from sources.repo_analytics.errors import FatalApiError, RetryBudgetExhausted
from sources.repo_analytics.report import RunReport

CSV = b"".join(b"%06d,commit-%d,\xc3\xa9\n" % (i, i) for i in range(20_000))  # ~400 KB
ROWS = [{"hash": f"{i:06d}", "message": f"commit-{i} \u00e9"} for i in range(5_000)]
JSON = orjson.dumps({"values": ROWS, "page": 1, "pagelen": len(ROWS)})
ENCODINGS = {
    "identity": lambda body: body,
    "gzip": gzip.compress,
    "deflate": zlib.compress,  # with its zlib header, as the standard says
    "raw-deflate": lambda body: zlib.compress(body)[2:-4],  # without it, as some servers send
}
BAD_CHUNKS = {"bad-chunk": b"zz", "negative-chunk": b"-5"}


class Handler(BaseHTTPRequestHandler):
    """`/<framing>/<encoding>.<csv|json>`; the server's switches say how it misbehaves."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        server: Server = self.server  # type: ignore[assignment]
        with server.lock:
            again = self.client_address[1] in server.ports
            if again and server.drop_reused:  # closed on the next request, unanswered
                server.dropped += 1
                self.close_connection = True
                return
            server.ports.append(self.client_address[1])
            server.hosts.append(self.headers["Host"])
            server.headers.append(dict(self.headers))
            broken = server.broken > 0
            server.broken -= 1
        framing, _, name = self.path.split("?")[0].strip("/").rpartition("/")
        kind, _, extension = name.partition(".")
        body = ENCODINGS[kind](CSV if extension == "csv" else JSON)
        if framing == "continue":  # an interim answer first
            self.send_response_only(100)
            self.end_headers()
        self.send_response(200)
        self.send_header("Content-Type", "text/csv" if extension == "csv" else "application/json")
        self.send_header("content-type", "text/plain")  # a repeated name: the first counts
        if kind != "identity":
            self.send_header("Content-Encoding", kind.replace("raw-", ""))
        if broken and framing == "short":  # a length the body never reaches
            self.close_connection = True
            self.send_header("Content-Length", str(len(body) + 100))
            self.end_headers()
            self.wfile.write(body)
        elif broken and framing in BAD_CHUNKS:  # a chunk size that is no size
            self.close_connection = True
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(BAD_CHUNKS[framing] + b"\r\nabcde\r\n0\r\n\r\n")
        elif framing == "chunked" or framing in BAD_CHUNKS:
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
        elif framing == "many-headers":
            for number in range(101):
                self.send_header(f"X-Header-{number}", "x")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
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
        self.ports: list[int] = []  # the client port of each request answered
        self.hosts: list[str] = []  # the Host header of each request answered
        self.headers: list[dict[str, str]] = []  # the headers of each request answered
        self.close_after_answer = False
        self.drop_reused = False
        self.dropped = 0
        self.broken = 0  # answers still to break (`short`, `bad-chunk`)
        self.closed = threading.Event()  # set each time the server closed a connection

    @property
    def base(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{f'[{host}]' if ':' in str(host) else host}:{port}"

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


def client(base: str, headers: dict[str, str] | None = None, attempts: int = 4) -> ApiClient:
    settings = RetryConfiguration()
    settings.backoff_base, settings.max_attempts = 0.01, attempts
    settings.connect_timeout = settings.read_timeout = 5.0
    return ApiClient(
        base,
        headers if headers is not None else {"Authorization": "secret-token"},
        CLOUD.error_rules,
        CLOUD.error_message,
        CLOUD.error_envelope,
        settings,
        RunReport(),
    )


def csv_of(api: ApiClient, path: str) -> bytes:
    with api.get_body(path, {"part": 2}, "test") as body:
        return body.read()


def retries(api: ApiClient) -> int:
    return api.report.totals().retries


@pytest.mark.parametrize("kind", sorted(ENCODINGS))
def test_an_encoded_body_is_decoded_whole_and_streamed(server: Server, kind: str) -> None:
    """gzip, deflate with and without its zlib header: a JSON page read whole, a CSV export
    streamed, both as sent; the client asks for the encodings it reads."""
    api = client(server.base)
    assert api.get_json(f"/plain/{kind}.json", None, "test").body["values"] == ROWS
    assert csv_of(api, f"/plain/{kind}.csv") == CSV
    assert all("gzip" in h["Accept-Encoding"] for h in server.headers)
    assert retries(api) == 0


@pytest.mark.parametrize("kind", ["identity", "gzip"])
@pytest.mark.parametrize("framing", ["chunked", "close", "continue"])
def test_each_framing_of_a_body_is_read_whole_and_streamed(
    server: Server, framing: str, kind: str
) -> None:
    """Chunks (with an extension and a trailer), a body up to the connection's close, an
    interim 100 answer before the final one: read whole and streamed, the first of a
    repeated header counting (JSON, not `text/plain`); a chunked answer's connection serves
    the next request, one read up to its close does not."""
    api = client(server.base)
    assert api.get_json(f"/{framing}/{kind}.json", None, "test").body["values"] == ROWS
    assert csv_of(api, f"/{framing}/{kind}.csv") == CSV
    assert len(set(server.ports)) == (2 if framing == "close" else 1)
    assert retries(api) == 0


def test_one_connection_serves_requests_one_after_another(server: Server) -> None:
    """Keep-alive: five requests of one thread, one connection, the credentials on each."""
    api = client(server.base)
    for _ in range(5):
        assert api.get_json("/plain/gzip.json", None, "test").body["values"] == ROWS
    assert len(server.ports) == 5 and len(set(server.ports)) == 1
    assert [h["Authorization"] for h in server.headers] == ["secret-token"] * 5


def test_threads_share_the_kept_connections(server: Server) -> None:
    """Each thread has its own session, the connections are the client's: a thread that
    comes later (a next resource's reader) reuses the one an earlier thread left open."""
    api = client(server.base)
    for _ in range(3):
        reader = threading.Thread(target=api.get_json, args=("/plain/identity.json", None, "t"))
        reader.start()
        reader.join()
    assert len(server.ports) == 3 and len(set(server.ports)) == 1


def test_an_idle_connection_the_host_closed_is_replaced_before_use(server: Server) -> None:
    """The host closes each answer's connection after it, unannounced: every next request
    finds its kept connection closed and opens another; none fails, none is retried."""
    server.close_after_answer = True
    api = client(server.base)
    for _ in range(4):
        server.closed.clear()
        assert csv_of(api, "/plain/identity.csv") == CSV
        assert server.closed.wait(5)  # the server's side is closed before the next request
    assert len(server.ports) == 4 and len(set(server.ports)) == 4
    assert retries(api) == 0


def test_a_kept_connection_the_host_drops_when_used_again_is_retried(server: Server) -> None:
    """The host closes a kept connection when its next request comes, unanswered (an idle
    timeout at that moment): the request fails as a dropped connection, is retried once on a
    new connection, and answered."""
    server.drop_reused = True
    api = client(server.base)
    assert api.get_json("/plain/gzip.json", None, "test").body["values"] == ROWS
    assert api.get_json("/plain/gzip.json", None, "test").body["values"] == ROWS
    assert server.dropped == 1 and retries(api) == 1
    assert len(server.ports) == 2 and len(set(server.ports)) == 2


def test_an_ipv6_literal_host_is_asked_directly() -> None:
    """`http://[::1]:PORT/`: the connection goes to the address, the Host header keeps the
    brackets, and the body reads whole."""
    for served in serving("::1"):
        api = client(served.base)
        assert api.get_json("/plain/gzip.json", None, "test").body["values"] == ROWS
        assert served.hosts == [served.base.removeprefix("http://")]


@pytest.mark.parametrize("framing", ["short", *BAD_CHUNKS])
@pytest.mark.parametrize("extension", ["json", "csv"])
def test_a_body_shorter_than_its_length_or_with_a_bad_chunk_is_asked_again_whole(
    server: Server, framing: str, extension: str
) -> None:
    """The first answer breaks off (fewer bytes than its length says, a chunk size that is no
    number or below zero): it is retried, and the second answer is read whole; nothing of the
    broken one counts."""
    server.broken = 1
    api = client(server.base)
    path = f"/{framing}/identity.{extension}"
    if extension == "json":
        assert api.get_json(path, None, "test").body["values"] == ROWS
    else:
        assert csv_of(api, path) == CSV
    assert retries(api) == 1 and len(server.ports) == 2


def test_a_body_broken_every_time_stops_past_the_budget(server: Server) -> None:
    server.broken = 100
    api = client(server.base, attempts=3)
    with pytest.raises(RetryBudgetExhausted, match="after 3 attempts.*truncated body from"):
        api.get_json("/short/identity.json", None, "test")
    assert len(server.ports) == 3


def test_an_answer_with_more_than_100_headers_is_refused(server: Server) -> None:
    """requests (`http.client` under it) refuses an answer with more than 100 headers: a
    failed request, retried until the budget ends."""
    api = client(server.base, attempts=2)
    with pytest.raises(RetryBudgetExhausted, match="after 2 attempts.*connection error from"):
        api.get_json("/many-headers/identity.json", None, "test")


def test_a_port_nobody_listens_on_is_unreachable() -> None:
    with socket.socket() as probe:  # a free port, closed again
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(RetryBudgetExhausted, match=f"cannot connect to 127.0.0.1:{port} "):
        client(f"http://127.0.0.1:{port}", attempts=2).get_json("/plain/a.json", None, "test")


def test_a_header_value_with_a_line_break_is_never_sent(server: Server) -> None:
    """A value that would start a second header (a token pasted with its newline) fails
    before anything is sent, at once, and the message does not carry the value."""
    api = client(server.base, {"Authorization": "t0k\r\nX: 1"})
    with pytest.raises(FatalApiError, match="holds a line break") as raised:
        api.get_json("/plain/identity.json", None, "test")
    assert "t0k" not in str(raised.value)
    assert server.ports == [] and retries(api) == 0
