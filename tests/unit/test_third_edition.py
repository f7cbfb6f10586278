"""A third edition is one module with its table: nothing else in the extractor changes.

The `forge` edition below is what a new edition module would hold: its endpoints, columns,
paging schemes with its own parameter names, its auth header, its error body. It is
registered the way an edition outside this package is (an entry point in the
`repo_analytics.editions` group, here in a distribution written under `tmp_path`), served by
a small stub host on a loopback port, and loaded into a real DuckDB file by the same
`run_load` the other editions use. The rows that land are compared with what the stub
served, the requests with what the edition's table says they carry, and the extractor's own
files are checked to hold no word of `forge`.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, urlencode, urlsplit

import dlt
import duckdb
import pyarrow as pa
import pytest

from pipelines.cli.parser import build_parser
from pipelines.runs.load import make_pipeline, run_load
from sources.repo_analytics import EDITION_SPECS, ConfigError
from sources.repo_analytics.client.paging import NextLink, StartLimit
from sources.repo_analytics.dates import utc_from_iso
from sources.repo_analytics.editions import ENTRY_POINT_GROUP
from sources.repo_analytics.editions.spec import (
    EditionSpec,
    Endpoint,
    ErrorEnvelope,
    ErrorRule,
    column,
)

ROOT = Path(__file__).resolve().parents[2]
KEY: Final = "forge-key-1"
STR: Final = pa.string()
UTC_TS: Final = pa.timestamp("us", tz="UTC")

# --- the edition module: its table, as a new edition would write it ---------------------------

COMMIT_PAGING: Final = NextLink(
    page_size_param="per_page", next_key="next_page_url", items_key="items"
)
MERGE_REQUEST_PAGING: Final = StartLimit(
    start_param="offset",
    page_size_param="count",
    last_page_key="done",
    next_start_key="next_offset",
    items_key="results",
)
FORGE_ENDPOINTS: Final = (
    Endpoint(
        "commits",
        "site",
        "list",
        "/commits",
        "forge_commits",
        ("repo", "sha"),
        (
            column("repo", "repo.name", STR, nullable=False),
            column("sha", "sha", STR, nullable=False),
            column("author", "author.login", STR),
            column("committed_at", "committed_at", UTC_TS, utc_from_iso, nullable=False),
        ),
        cursor="committed_at",
        page_size=3,
        paging=COMMIT_PAGING,
    ),
    Endpoint(
        "pull_requests",
        "site",
        "list",
        "/merge-requests",
        "forge_merge_requests",
        ("repo", "number"),
        (
            column("repo", "repo", STR, nullable=False),
            column("number", "number", pa.int64(), nullable=False),
            column("title", "title", STR),
            column("updated_at", "updated_at", UTC_TS, utc_from_iso, nullable=False),
        ),
        cursor="updated_at",
        page_size=2,
        paging=MERGE_REQUEST_PAGING,
    ),
)


def forge_error_message(body: Any) -> str:
    return "; ".join(str(error.get("detail") or "") for error in body.get("problems") or ())


def forge_auth(credentials: Any) -> dict[str, str]:
    """The key in a header of the forge's own."""
    return {"X-Forge-Key": str(credentials["token"])}


FORGE: Final = EditionSpec(
    name="forge",
    default_prefix="/api/v3",
    since_param="after",
    until_param="before",
    error_message=forge_error_message,
    error_rules=(
        ErrorRule(
            "key_refused",
            "fatal",
            "the forge refused the key (HTTP {status}: "
            "{message}): set SOURCES__REPO_ANALYTICS__TOKEN",
            statuses=(401,),
        ),
    ),
    error_envelope=ErrorEnvelope("problems"),
    endpoints=FORGE_ENDPOINTS,
    auth_headers=forge_auth,
    top_level="site",
    repository_key=("repo",),
    repository_path=("repo",),
    user_key="author",
    credential_forms=(("token",),),
    credentials_expected="the forge API key, in SOURCES__REPO_ANALYTICS__TOKEN",
)

# --- the stub host ----------------------------------------------------------------------------

START: Final = datetime(2026, 5, 1, tzinfo=UTC)
END: Final = datetime(2026, 5, 20, tzinfo=UTC)


def at(day: int, hour: int = 12) -> str:
    return (START + timedelta(days=day, hours=hour)).isoformat().replace("+00:00", "Z")


@dataclass
class ForgeHost:
    """A forge serving `commits` and `merge_requests` over loopback; every request kept."""

    commits: list[dict[str, Any]]
    merge_requests: list[dict[str, Any]]
    requests: list[tuple[str, dict[str, str], dict[str, str]]] = field(default_factory=list)
    base_url: str = ""

    def answer(self, path: str, query: dict[str, str], headers: dict[str, str]) -> tuple[int, Any]:
        self.requests.append((path, query, headers))
        if headers.get("x-forge-key") != KEY:
            return 401, {"problems": [{"detail": "unknown key"}]}
        after, before = utc_from_iso(query["after"]), utc_from_iso(query["before"])
        assert after is not None and before is not None

        def window(items: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
            return sorted(
                (i for i in items if after <= utc_from_iso(i[key]) < before),
                key=lambda i: str(i[key]),
            )

        if path == "/api/v3/commits":
            items = window(self.commits, "committed_at")
            size, page = int(query["per_page"]), int(query.get("page", "1"))
            body: dict[str, Any] = {"items": items[(page - 1) * size : page * size]}
            if page * size < len(items):
                body["next_page_url"] = f"{self.base_url}/api/v3/commits?" + urlencode(
                    {**query, "page": page + 1}
                )
            return 200, body
        if path == "/api/v3/merge-requests":
            items = window(self.merge_requests, "updated_at")
            offset, count = int(query["offset"]), int(query["count"])
            done = offset + count >= len(items)
            return 200, {
                "results": items[offset : offset + count],
                "done": done,
                **({} if done else {"next_offset": offset + count}),
            }
        return 404, {"problems": [{"detail": f"no such path {path}"}]}


@pytest.fixture
def forge_host() -> Iterator[ForgeHost]:
    commits = [
        {
            "sha": f"c{n:02d}",
            "repo": {"name": ("api", "web")[n % 2]},
            "author": {"login": f"dev{n % 3}"},
            "committed_at": at(n),
        }
        for n in range(7)
    ]
    merge_requests = [
        {"repo": ("api", "web")[n % 2], "number": n, "title": f"change {n}", "updated_at": at(n, 9)}
        for n in range(1, 6)
    ]
    host = ForgeHost(commits, merge_requests)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server name
            parts = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                status, body = host.answer(parts.path, query, headers)
            except KeyError as missing:  # a parameter the forge requires was not sent
                status, body = 400, {"problems": [{"detail": f"missing parameter {missing}"}]}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    host.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield host
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def forge_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The edition installed as a package outside this project would install it: a
    distribution whose entry point names the edition's table."""
    site = tmp_path / "site"
    dist = site / "forge_edition-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: forge-edition\nVersion: 1.0\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nforge = {__name__}:FORGE\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(site))


# --- the tests --------------------------------------------------------------------------------


def landed(db_file: Path, sql: str) -> set[tuple[Any, ...]]:
    with duckdb.connect(str(db_file), read_only=True) as con:
        return set(con.execute(sql).fetchall())


def served_commits(host: ForgeHost) -> set[tuple[Any, ...]]:
    return {
        (c["repo"]["name"], c["sha"], c["author"]["login"], utc_from_iso(c["committed_at"]))
        for c in host.commits
    }


def served_merge_requests(host: ForgeHost) -> set[tuple[Any, ...]]:
    return {
        (m["repo"], m["number"], m["title"], utc_from_iso(m["updated_at"]))
        for m in host.merge_requests
    }


@pytest.mark.usefixtures("forge_installed")
def test_a_third_edition_loads_from_its_table_alone(tmp_path: Path, forge_host: ForgeHost) -> None:
    """Registered by entry point, read with its own paging names and auth, loaded twice
    (the second run picks up a late commit by its cursor): the tables equal what was served."""
    assert EDITION_SPECS["forge"] is FORGE
    pipeline = make_pipeline(
        destination=dlt.destinations.duckdb(str(tmp_path / "f.duckdb")),
        dataset_name="forge_data",
        pipelines_dir=str(tmp_path / "p"),
        schemas_dir=tmp_path / "schemas",
    )
    args: dict[str, Any] = {
        "edition": "forge",
        "base_url": forge_host.base_url,
        "token": KEY,
        "start_date": START.isoformat(),
    }
    first = run_load(pipeline, end_date=END.isoformat(), **args)
    assert not first.report.partial

    db = tmp_path / "f.duckdb"
    commits_sql = "SELECT repo, sha, author, committed_at FROM forge_data.forge_commits"
    merge_sql = "SELECT repo, number, title, updated_at FROM forge_data.forge_merge_requests"
    assert landed(db, commits_sql) == served_commits(forge_host)
    assert landed(db, merge_sql) == served_merge_requests(forge_host)

    # What crossed the wire: the edition's key header, date and paging parameter names.
    commit_calls = [q for path, q, _ in forge_host.requests if path.endswith("/commits")]
    assert [q.get("page", "1") for q in commit_calls] == ["1", "2", "3"]  # 7 commits, 3 a page
    assert all(q["per_page"] == "3" and {"after", "before"} <= set(q) for q in commit_calls)
    merge_calls = [q for path, q, _ in forge_host.requests if path.endswith("/merge-requests")]
    assert [(q["offset"], q["count"]) for q in merge_calls] == [("0", "2"), ("2", "2"), ("4", "2")]
    assert {h.get("x-forge-key") for _, _, h in forge_host.requests} == {KEY}
    assert not any("authorization" in h for _, _, h in forge_host.requests)

    # A commit pushed late, inside the look-back: the nightly run reads it, nothing doubles.
    forge_host.commits.append(
        {
            "sha": "late",
            "repo": {"name": "api"},
            "author": {"login": "dev9"},
            "committed_at": at(18, 20),
        }
    )
    forge_host.requests.clear()
    second = run_load(pipeline, end_date=(END + timedelta(days=1)).isoformat(), **args)
    assert not second.report.partial
    assert landed(db, commits_sql) == served_commits(forge_host)
    assert landed(
        db, "SELECT count(*) = count(DISTINCT (repo, sha)) FROM forge_data.forge_commits"
    ) == {(True,)}
    after = {q["after"] for path, q, _ in forge_host.requests if path.endswith("/commits")}
    assert after and all(utc_from_iso(a) > START for a in after)  # from the cursor, not start


@pytest.mark.usefixtures("forge_installed")
def test_a_third_edition_is_offered_and_checked_like_the_others() -> None:
    """The CLI's demo choices come from the registry; the edition's own credential message."""
    assert build_parser().parse_args(["demo", "--edition", "forge"]).edition == "forge"
    from sources.repo_analytics.reading.plan import build_plan

    with pytest.raises(ConfigError, match="the forge API key"):
        build_plan(FORGE, {"base_url": "https://forge.example"})


def test_without_the_entry_point_there_is_no_third_edition() -> None:
    """Nothing in the project itself knows the edition: it exists only where installed."""
    assert "forge" not in EDITION_SPECS
    for folder in ("sources", "pipelines"):
        for path in (ROOT / folder).rglob("*.py"):
            assert not re.search(r"\bforge\b", path.read_text(encoding="utf-8"), re.I), path
