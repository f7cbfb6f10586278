"""One HTTP/1.1 connection for GETs: the request written in one send, each answer's head and
body read through the one buffered reader the connection keeps.

`http.client` took ~0.44 ms of Python a request on the medium self-hosted nightly (2,949
requests of small answers, a run bound by one core): it parses every answer's headers with
the `email` package (0.49 s of that run) and wraps the socket in a new buffered file for each
answer. What a GET needs of it is here, with its exceptions (`http.client.HTTPException`, its
`RemoteDisconnected` for a connection the host closed) and its limits on a line and on the
number of headers: the status line, the headers (the first of a repeated name, as
`http.client`'s `get`), and the body by Content-Length, chunked, or up to the connection's
close.
"""

from __future__ import annotations

import http.client
import re
import socket
import ssl
from collections.abc import Callable, Iterator, Mapping
from typing import Final, Protocol

MAX_LINE: Final = 65536  # as http.client
MAX_HEADERS: Final = 100  # as http.client
DEFAULT_PORTS: Final = {"http": 80, "https": 443}
NO_BODY: Final = frozenset((204, 304))
# what http.client refuses in a target and in a header value (a line break: a second header)
BAD_TARGET: Final = re.compile(r"[\x00-\x20\x7f]")
BAD_VALUE: Final = re.compile(r"\n(?![ \t])|\r(?![ \t\n])")


class Reader(Protocol):
    """What is read of a connection: its socket's buffered reader."""

    def read(self, size: int | None = -1, /) -> bytes: ...

    def readline(self, size: int | None = -1, /) -> bytes: ...


class Headers(Mapping[str, str]):
    """An answer's headers by name in any case; of a repeated name, the first."""

    def __init__(self, by_name: dict[str, str]) -> None:
        self._by_name = by_name  # lower-cased names

    def __getitem__(self, name: str) -> str:
        return self._by_name[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)


class Answer:
    """An answer's status and headers, its body read from the connection on demand."""

    def __init__(self, reader: Reader, head: tuple[str, int, Headers]) -> None:
        version, self.status, self.headers = head
        self._reader = reader
        connection = self.headers.get("connection", "").lower()
        self.will_close = "close" in connection or (
            version == "HTTP/1.0" and "keep-alive" not in connection
        )
        self._chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        self._chunk_left = 0
        self._left: int | None = None  # bytes of the body still to read; None: to the close
        self.ended = self.status in NO_BODY or 100 <= self.status < 200
        if not (self.ended or self._chunked):
            length = self.headers.get("content-length")
            if length is None:
                self.will_close = True  # the body ends where the host closes the connection
            else:
                try:
                    self._left = int(length)
                except ValueError:
                    raise http.client.HTTPException("bad Content-Length") from None
                if self._left < 0:
                    raise http.client.HTTPException("bad Content-Length")
                self.ended = self._left == 0

    def read(self, amount: int | None = None) -> bytes:
        """The body's next `amount` bytes (None: all the rest); b"" once it is read to its end.
        Raises `http.client.IncompleteRead` where it breaks off."""
        if self.ended:
            return b""
        if self._chunked:
            return self._read_chunked(amount)
        if self._left is None:  # up to the close
            data = self._reader.read() if amount is None else self._reader.read(amount)
            self.ended = not data or amount is None
            return data
        wanted = self._left if amount is None else min(amount, self._left)
        data = self._reader.read(wanted)
        if len(data) < wanted and (amount is None or not data):
            raise http.client.IncompleteRead(data, self._left - len(data))
        self._left -= len(data)
        self.ended = self._left == 0
        return data

    def _read_chunked(self, amount: int | None) -> bytes:
        parts: list[bytes] = []
        size = 0
        while amount is None or size < amount:
            if self._chunk_left == 0:
                self._chunk_left = self._chunk_size()
                if self._chunk_left == 0:
                    skip_fields(self._reader)  # the trailer
                    self.ended = True
                    break
            wanted = self._chunk_left if amount is None else min(self._chunk_left, amount - size)
            data = self._reader.read(wanted)
            if len(data) < wanted:
                raise http.client.IncompleteRead(b"".join(parts) + data, wanted - len(data))
            parts.append(data)
            size += len(data)
            self._chunk_left -= len(data)
            if self._chunk_left == 0 and self._reader.read(2) != b"\r\n":
                raise http.client.IncompleteRead(b"".join(parts))
        return b"".join(parts)

    def _chunk_size(self) -> int:
        line = read_line(self._reader)
        try:
            size = int(line.split(b";", 1)[0], 16)
        except ValueError:
            raise http.client.IncompleteRead(b"") from None
        if size < 0:
            raise http.client.IncompleteRead(b"")
        return size


class Http11Connection:
    """A connection to one host that asks one GET at a time; `sock` is None once closed."""

    def __init__(self, sock: socket.socket, host_header: str) -> None:
        self.sock: socket.socket | None = sock
        self._host_header = host_header
        self._reader = sock.makefile("rb")

    @classmethod
    def open(
        cls,
        scheme: str,
        host: str,
        port: int | None,
        connect_timeout: float,
        tls: Callable[[], ssl.SSLContext],
    ) -> Http11Connection:
        """Connected (TLS verified with the host's name for https). Raises `OSError`s:
        `ConnectionRefusedError`, `socket.gaierror`, `TimeoutError`, `ssl.SSLError`."""
        default = DEFAULT_PORTS[scheme]
        sock = socket.create_connection((host, port or default), connect_timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if scheme == "https":
                sock = tls().wrap_socket(sock, server_hostname=host)
        except BaseException:
            sock.close()
            raise
        name = f"[{host}]" if ":" in host else host
        return cls(sock, name if port in (None, default) else f"{name}:{port}")

    def ask(self, target: str, headers: Mapping[str, str], read_timeout: float) -> Answer:
        """The GET of `target` (path and query) sent, its answer's head read."""
        if self.sock is None:
            raise http.client.NotConnected()
        if BAD_TARGET.search(target):
            raise http.client.InvalidURL("the target contains a control character or space")
        lines = [f"GET {target} HTTP/1.1", f"Host: {self._host_header}"]
        for name, value in headers.items():
            if BAD_VALUE.search(value) or ":" in name or BAD_TARGET.search(name):
                raise ValueError(f"invalid header {name!r}")  # never its value: a secret
            lines.append(f"{name}: {value}")
        if not any(name.lower() == "accept-encoding" for name in headers):
            lines.append("Accept-Encoding: identity")
        self.sock.settimeout(read_timeout)
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        return Answer(self._reader, read_head(self._reader))

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            self._reader.close()
            sock.close()


def read_head(reader: Reader) -> tuple[str, int, Headers]:
    """The version, status and headers of the next final answer (1xx answers skipped)."""
    while True:
        line = reader.readline(MAX_LINE + 1)
        if not line:
            raise http.client.RemoteDisconnected("the host closed the connection without answer")
        if len(line) > MAX_LINE:
            raise http.client.LineTooLong("status line")
        parts = line.decode("iso-8859-1").split(None, 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise http.client.BadStatusLine(line[:80].decode("iso-8859-1"))
        status = int(parts[1])
        if not 100 <= status <= 999:
            raise http.client.BadStatusLine(line[:80].decode("iso-8859-1"))
        headers = read_fields(reader)
        if status != 100 and not 101 < status < 200:  # 101 is final (a protocol switch)
            return parts[0], status, headers


def read_fields(reader: Reader) -> Headers:
    """Header lines up to the empty line: name to value, the first of a repeated name."""
    by_name: dict[str, str] = {}
    last = None
    for _ in range(MAX_HEADERS + 1):
        line = read_line(reader)
        if line in (b"\r\n", b"\n", b""):
            return Headers(by_name)
        text = line.decode("iso-8859-1")
        if text[0] in " \t" and last is not None:  # a folded line continues the last value
            by_name[last] = f"{by_name[last]} {text.strip()}"
            continue
        name, colon, value = text.partition(":")
        if not colon:
            raise http.client.HTTPException("a header line without a colon")
        last = name.strip().lower()
        by_name.setdefault(last, value.strip())
    raise http.client.HTTPException(f"got more than {MAX_HEADERS} headers")


def skip_fields(reader: Reader) -> None:
    """Lines up to the empty line (a chunked body's trailer)."""
    for _ in range(MAX_HEADERS + 1):
        if read_line(reader) in (b"\r\n", b"\n", b""):
            return
    raise http.client.HTTPException(f"got more than {MAX_HEADERS} trailer lines")


def read_line(reader: Reader) -> bytes:
    line = reader.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise http.client.LineTooLong("header line")
    return line
