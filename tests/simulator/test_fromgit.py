"""`--from-git`: a host built from real local git repositories, checked over real HTTP."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

from simulator import SimConfig, Simulator

NOW = 1_780_272_000  # 2026-06-01T00:00:00Z, after every commit below
BEARER = {"Authorization": "Bearer sim-server-token"}
CLOUD = {"Authorization": "sim-cloud-token"}
ALICE = ("Alice Ångström", "alice@example.com")
ALICE_OTHER = ("Alice Other", "alice@other.org")
BOB = ("Bob Builder", "bob@example.com")
CAROL = ("Carol Contractor", "carol@contractor.example")


@dataclass
class Expected:
    """One commit as the test wrote it: what the host must serve for it."""

    repo: str
    hash: str
    parents: list[str]
    email: str
    utc: str  # authorTimestamp, server edition
    local: str  # cloud `date`: author's wall time without zone
    files: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def added(self) -> int:
        return sum(f[1] for f in self.files)

    @property
    def deleted(self) -> int:
        return sum(f[2] for f in self.files)


class Repo:
    """A throw-away git repository driven through the git CLI with no global config."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True)
        self.git("init", "-q")
        self.git("symbolic-ref", "HEAD", "refs/heads/main")

    def git(self, *args: str, who: tuple[str, str] = ALICE, date: str = "") -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(
            GIT_CONFIG_NOSYSTEM="1",
            GIT_CONFIG_GLOBAL=os.devnull,
            GIT_AUTHOR_NAME=who[0],
            GIT_AUTHOR_EMAIL=who[1],
            GIT_COMMITTER_NAME=who[0],
            GIT_COMMITTER_EMAIL=who[1],
        )
        if date:
            env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
        done = subprocess.run(
            ["git", *args], cwd=self.path, env=env, check=True, capture_output=True
        )
        return done.stdout.decode().strip()

    def write(self, name: str, content: bytes) -> None:
        target = self.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)

    def commit(self, who: tuple[str, str], date: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", f"change at {date}", who=who, date=date)
        return self.git("rev-parse", "HEAD")


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], list[Expected]]:
    """Two repositories both named `alpha`: root, branch, merge, binary file, unmerged ref."""
    base = tmp_path_factory.mktemp("git")
    a = Repo(base / "one" / "alpha")
    b = Repo(base / "two" / "alpha")
    out: list[Expected] = []

    a.write("a.txt", b"1\n2\n3\n")
    a.write("logo.bin", b"\x89PNG\x00\x01\x02\x00")
    a.write("docs/ü ñ.md", b"x\n")
    c1 = a.commit(ALICE, "2026-03-01T10:00:00+05:30")
    out.append(
        Expected(
            "alpha",
            c1,
            [],
            ALICE[1],
            "2026-03-01T04:30:00Z",
            "2026-03-01T10:00:00",
            [("a.txt", 3, 0), ("docs/ü ñ.md", 1, 0), ("logo.bin", 0, 0)],
        )
    )

    a.git("checkout", "-q", "-b", "side")
    a.write("a.txt", b"1\nTWO\n3\n")
    a.write("b.txt", b"b\nb\n")
    c2 = a.commit(BOB, "2026-03-02T08:00:00-07:00")
    out.append(
        Expected(
            "alpha",
            c2,
            [c1],
            BOB[1],
            "2026-03-02T15:00:00Z",
            "2026-03-02T08:00:00",
            [("a.txt", 1, 1), ("b.txt", 2, 0)],
        )
    )

    a.git("checkout", "-q", "main")
    a.write("c.txt", b"1\n2\n3\n4\n5\n")
    c3 = a.commit(ALICE, "2026-03-02T12:00:00+00:00")
    out.append(
        Expected(
            "alpha",
            c3,
            [c1],
            ALICE[1],
            "2026-03-02T12:00:00Z",
            "2026-03-02T12:00:00",
            [("c.txt", 5, 0)],
        )
    )

    merge_date = "2026-03-03T09:15:00+13:45"
    a.git("merge", "-q", "--no-ff", "-m", "merge side", "side", date=merge_date)
    merge = a.git("rev-parse", "HEAD")
    out.append(
        Expected("alpha", merge, [c3, c2], ALICE[1], "2026-03-02T19:30:00Z", "2026-03-03T09:15:00")
    )  # git log shows no diff for merges

    a.write("c.txt", b"1\n2\n3\n")
    a.write("logo.bin", b"\x89PNG\x00\x09\x09\x00\x00")
    c5 = a.commit(CAROL, "2026-03-04T00:00:00-12:00")
    out.append(
        Expected(
            "alpha",
            c5,
            [merge],
            CAROL[1],
            "2026-03-04T12:00:00Z",
            "2026-03-04T00:00:00",
            [("c.txt", 0, 2), ("logo.bin", 0, 0)],
        )
    )

    a.git("checkout", "-q", "-b", "feature")
    a.write("d.txt", b"d\n")
    c6 = a.commit(BOB, "2026-03-05T18:30:00+01:00")
    out.append(
        Expected(
            "alpha",
            c6,
            [c5],
            BOB[1],
            "2026-03-05T17:30:00Z",
            "2026-03-05T18:30:00",
            [("d.txt", 1, 0)],
        )
    )
    a.git("checkout", "-q", "main")  # the feature commit is reachable only through --all

    b.write("x.txt", b"x\ny\n")
    r1 = b.commit(ALICE_OTHER, "2026-02-01T00:00:00+14:00")
    out.append(
        Expected(
            "alpha-2",
            r1,
            [],
            ALICE_OTHER[1],
            "2026-01-31T10:00:00Z",
            "2026-02-01T00:00:00",
            [("x.txt", 2, 0)],
        )
    )
    b.write("x.txt", b"x\ny\nz\n")
    r2 = b.commit(ALICE_OTHER, "2026-02-02T00:00:00-03:30")
    out.append(
        Expected(
            "alpha-2",
            r2,
            [r1],
            ALICE_OTHER[1],
            "2026-02-02T03:30:00Z",
            "2026-02-02T00:00:00",
            [("x.txt", 1, 0)],
        )
    )
    return [a.path, b.path], out


def get(sim: Simulator, path: str, headers: dict[str, str], **params: str) -> Any:
    response = requests.get(sim.api_base + path, headers=headers, params=params, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture(scope="module")
def server(history: tuple[list[Path], list[Expected]]) -> Any:
    paths, _ = history
    with Simulator(SimConfig(edition="server", from_git=tuple(map(str, paths)), now=NOW)) as sim:
        yield sim


def test_server_commit_list_is_the_git_history(
    server: Simulator, history: tuple[list[Path], list[Expected]]
) -> None:
    _, expected = history
    page = get(server, "/commits", BEARER, limit="1000")
    assert page["isLastPage"] is True
    served = {item["id"]: item for item in page["values"]}
    assert set(served) == {e.hash for e in expected}
    for e in expected:
        item = served[e.hash]
        assert item["repository"]["slug"] == e.repo
        assert item["repository"]["project"]["key"] == "GIT"
        assert item["author"]["emailAddress"] == e.email
        assert item["authorTimestamp"] == e.utc
        assert [p["id"] for p in item["parents"]] == [p[:20] for p in e.parents]
        assert item["linesOfCode"] == {"added": e.added, "deleted": e.deleted}
    # newest first by author time
    times = [item["authorTimestamp"] for item in page["values"]]
    assert times == sorted(times, reverse=True)


def test_server_users_and_outsiders(
    server: Simulator, history: tuple[list[Path], list[Expected]]
) -> None:
    _, expected = history
    served = {item["id"]: item for item in get(server, "/commits", BEARER, limit="1000")["values"]}
    by_email = {e.email: served[e.hash] for e in expected}
    assert by_email[ALICE[1]]["user"]["name"] == "alice"
    assert by_email[ALICE[1]]["user"]["displayName"] == ALICE[0]
    assert by_email[ALICE_OTHER[1]]["user"]["name"] == "alice-2"
    assert by_email[BOB[1]]["user"]["name"] == "bob"
    assert "user" not in by_email[CAROL[1]]  # one commit: not a platform user
    bob = get(server, "/users/bob/commits", BEARER, limit="1000")["values"]
    assert {c["id"] for c in bob} == {e.hash for e in expected if e.email == BOB[1]}
    second = get(server, "/projects/GIT/repos/alpha-2/commits", BEARER)["values"]
    assert {c["id"] for c in second} == {e.hash for e in expected if e.repo == "alpha-2"}


def test_server_with_files_is_the_numstat(
    server: Simulator, history: tuple[list[Path], list[Expected]]
) -> None:
    _, expected = history
    for e in expected:
        item = get(
            server, f"/projects/GIT/repos/{e.repo}/commits/{e.hash}", BEARER, withFiles="true"
        )
        assert item["id"] == e.hash
        files = sorted(
            (f["path"], f["linesOfCode"]["added"], f["linesOfCode"]["deleted"])
            for f in item["files"]
        )
        assert files == sorted(e.files)


def test_server_info_counts_and_pull_requests(server: Simulator) -> None:
    info = requests.get(server.base_url + "/_sim/info", timeout=10).json()
    assert info["now"] == NOW
    assert info["projects"] == ["GIT"]
    assert info["counts"]["commits"] == 8
    assert info["counts"]["repositories"] == 2
    assert info["counts"]["users"] == 3
    assert info["counts"]["pull_requests"] >= 1
    prs = get(server, "/pull-requests", BEARER, limit="500")["values"]
    assert len(prs) == info["counts"]["pull_requests"]
    assert {pr["author"]["user"]["name"] for pr in prs} <= {"alice", "alice-2", "bob"}


def test_cloud_dates_are_local_wall_time(history: tuple[list[Path], list[Expected]]) -> None:
    paths, expected = history
    with Simulator(SimConfig(edition="cloud", from_git=tuple(map(str, paths)), now=NOW)) as sim:
        page = get(sim, "/workspace/sim-workspace/commits", CLOUD, merges="include", pagelen="500")
        served = {item["hash"]: item for item in page["values"]}
        assert set(served) == {e.hash for e in expected}
        for e in expected:
            item = served[e.hash]
            assert item["date"] == e.local
            assert [p["hash"] for p in item["parents"]] == e.parents
            assert item["repository"]["slug"] == e.repo
            assert (item["author"]["uuid"] is None) == (e.email == CAROL[1])
        lines = get(
            sim,
            "/workspace/sim-workspace/repos/alpha/commits",
            CLOUD,
            merges="include",
            with_lines="true",
        )["values"]
        want = {
            e.hash: {"added": e.added, "deleted": e.deleted} for e in expected if e.repo == "alpha"
        }
        assert {item["hash"]: item["lines"] for item in lines} == want


def test_clock_moves_after_the_history(history: tuple[list[Path], list[Expected]]) -> None:
    paths, _ = history
    early = 1_700_000_000  # 2023, before every commit
    with Simulator(SimConfig(edition="server", from_git=(str(paths[0]),), now=early)) as sim:
        info = requests.get(sim.base_url + "/_sim/info", timeout=10).json()
        newest = 1_772_731_800  # 2026-03-05T17:30:00Z, the feature-branch commit
        assert info["now"] == newest + 3600
        assert len(get(sim, "/commits", BEARER, limit="1000")["values"]) == 6


def test_not_a_git_repository(tmp_path: Path, history: tuple[list[Path], list[Expected]]) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    for path in (plain, tmp_path / "missing", history[0][0] / "docs"):
        with pytest.raises(ValueError, match="is not a git repository"):
            Simulator(SimConfig(edition="server", from_git=(str(path),), now=NOW))
