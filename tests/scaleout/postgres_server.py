"""A real Postgres server from pgserver's binaries, on a free loopback TCP port with scram
passwords (a wrong password is refused, as by a real warehouse): for the scale-out tests and
`bench/bench_scaleout.py`."""

from __future__ import annotations

import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pgserver
import psycopg2
from pgserver._commands import pg_ctl

PASSWORD = "scale-out-secret"


@dataclass(frozen=True)
class PostgresServer:
    host: str
    port: int
    password: str

    def uri(self, password: str | None = None) -> str:
        secret = self.password if password is None else password
        return f"postgresql://postgres:{secret}@{self.host}:{self.port}/postgres"

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with psycopg2.connect(self.uri()) as con, con.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall() if cursor.description else []


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    """pgserver makes the data folder (and, as root, its system user) and starts the server
    on a Unix socket; it is then restarted on 127.0.0.1 with scram passwords. The folder is
    a temporary one of its own, not under pytest's (pytest makes its folder private to its
    user whenever a session starts, and as root the server runs as another user); it is
    stopped and removed at the end."""
    data = Path(tempfile.mkdtemp(prefix="repo-analytics-pg-"))
    first = pgserver.get_server(data, cleanup_mode=None)
    with psycopg2.connect(first.get_uri()) as con, con.cursor() as cursor:
        cursor.execute(f"ALTER USER postgres PASSWORD '{PASSWORD}'")
    user = first.system_user
    pg_ctl(["-w", "stop"], pgdata=data, user=user)
    (data / "pg_hba.conf").write_text(
        "local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n", encoding="utf-8"
    )
    port = free_port()
    options = ["-o", "-h 127.0.0.1", "-o", f"-p {port}", "-o", f"-k {data}"]
    pg_ctl(["-w", *options, "-l", str(data / "log"), "start"], pgdata=data, user=user)
    try:
        yield PostgresServer("127.0.0.1", port, PASSWORD)
    finally:
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data, user=user)
        shutil.rmtree(data, ignore_errors=True)
