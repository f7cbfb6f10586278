"""A simulated host whose commits come from real local git repositories (`--from-git PATH ...`).

Layout: every repository goes into ONE project, key `GIT` ("Git repositories"). Parent
directories say little about how a host groups repositories, and one project keeps the
project-level paths of the self-hosted edition predictable (`/projects/GIT/...`). Each PATH is
one repository; its slug (and name) is the directory's name, made unique with `-2`, `-3`, ...
(`repo.git` of a bare repository stays `repo.git`).

Commits: one `git log --all --numstat -z` process per repository, its output parsed as it
streams. Kept as git has them: full hash, parents, author name and e-mail, author date with
the author's own UTC offset, and per-file added/deleted lines (`Commit.files`; binary files,
shown as `-`, count 0; renames are not detected, so a rename is a deletion plus an addition).
Merge commits carry no diff (git log's default), so their line counts are 0. Every commit is
visible at once (`pushed` = author time). A commit present in several repositories (clones)
is listed in each, but a look-up by hash alone (`truth/files?commit=`) finds the last one.

Authors with at least two commits become platform users (slug from the e-mail's local part,
made unique; display name the newest name they used; uuid deterministic from the seed); the
others are authors without a user. Pull requests are synthesised over that history (about one
per ten commits, each created shortly after a random commit of its repository, authored by
users in proportion to their commits). With no users there are no pull requests, and
advancing the clock needs users, so give such a host a history with a repeat author.

The clock: dates are real, never shifted, and clients need the clock after the history. The
server's default clock is the current hour, which can be before the newest commits of a
repository in active use (made in the last hour, or dated ahead), so the clock here is
`max(now_s, newest commit + 1 hour)`: an explicit `--now` later than that is kept, an earlier
one is moved forward.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import tempfile
import uuid
from collections import Counter
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path

from .generate import CLOUD_STATES, SERVER_STATES, ensure_every_state, new_pull_request, pick_state
from .model import Commit, Project, Repository, User
from .world import World

PROJECT_KEY = "GIT"
PROJECT_NAME = "Git repositories"
CLOCK_MARGIN_S = 3600
COMMITS_PER_PULL_REQUEST = 10
READ_CHUNK = 1 << 20
# %x1e starts a record; -z ends the header and each numstat entry with NUL. The name is last,
# so an odd character in it cannot shift the other fields.
LOG_FORMAT = "%x1e%H%x1f%P%x1f%ae%x1f%ad%x1f%an"
RECORD_SEP = b"\x00\x1e"  # paths cannot hold NUL, so this only ever starts a record
# Environment that would make git read another repository than the one named.
GIT_ENV_DROP = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
)


@dataclass(slots=True)
class GitCommit:
    """One commit as read from `git log`, before authors are resolved."""

    hash: str
    parents: tuple[str, ...]
    email: str
    name: str
    time: int
    tz_minutes: int
    files: tuple[tuple[str, int, int], ...]


def git_command(path: str) -> list[str]:
    return [
        "git",
        "-C",
        path,
        "-c",
        "i18n.logOutputEncoding=UTF-8",
        "-c",
        "log.showSignature=false",
        "log",
        "--all",
        "--root",
        "--no-renames",
        "--numstat",
        "-z",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--date=raw",
        f"--format={LOG_FORMAT}",
    ]


def git_env(path: str) -> dict[str, str]:
    """The caller's environment, minus overrides, with discovery stopped above `path`."""
    env = {k: v for k, v in os.environ.items() if k not in GIT_ENV_DROP}
    # A sub-directory of a work tree is not a repository of its own: do not look upwards.
    env["GIT_CEILING_DIRECTORIES"] = str(Path(path).resolve().parent)
    env["LC_ALL"] = "C"
    return env


def parse_offset(text: bytes) -> int:
    """`+0530` -> 330, `-1200` -> -720 (minutes)."""
    sign = -1 if text[:1] == b"-" else 1
    digits = text.lstrip(b"+-")
    return sign * (int(digits[:2]) * 60 + int(digits[2:4]))


def count(text: bytes) -> int:
    return 0 if text == b"-" else int(text)


def parse_record(record: bytes) -> GitCommit:
    """One `\\x1e`-less record: header NUL, then optional newline and numstat entries."""
    header, _, body = record.partition(b"\x00")
    sha, parents, email, date, name = header.split(b"\x1f", 4)
    when, _, offset = date.partition(b" ")
    files = []
    for entry in body.lstrip(b"\n").split(b"\x00"):
        if entry:
            added, deleted, file_path = entry.split(b"\t", 2)
            files.append((file_path.decode("utf-8", "replace"), count(added), count(deleted)))
    return GitCommit(
        hash=sha.decode("ascii"),
        parents=tuple(parents.decode("ascii").split()),
        email=email.decode("utf-8", "replace"),
        name=name.decode("utf-8", "replace"),
        time=int(when),
        tz_minutes=parse_offset(offset),
        files=tuple(files),
    )


def read_history(path: str) -> list[GitCommit]:
    """Every commit reachable from any ref of the repository at `path`, via one `git log`."""
    if not Path(path).is_dir():
        raise ValueError(f"`{path}` is not a git repository (no such directory)")
    commits: list[GitCommit] = []
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(
            git_command(path), stdout=subprocess.PIPE, stderr=errors, env=git_env(path)
        )
        assert process.stdout is not None
        pending = b""
        with process.stdout:
            while chunk := process.stdout.read(READ_CHUNK):
                records = (pending + chunk).split(RECORD_SEP)
                pending = records.pop()
                for record in records:
                    commits.append(parse_record(record.lstrip(b"\x1e")))
        status = process.wait()
        errors.seek(0)
        message = errors.read().decode("utf-8", "replace").strip()
    if status != 0:
        if "not a git repository" in message:
            raise ValueError(f"`{path}` is not a git repository (git: {message})")
        raise ValueError(f"`{path}`: git log failed with status {status}: {message}")
    pending = pending.lstrip(b"\x1e")
    if pending:
        commits.append(parse_record(pending))
    return commits


def unique(base: str, taken: set[str]) -> str:
    """`base`, or `base-2`, `base-3`, ... whichever is free; the result is added to `taken`."""
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}-{n}"
    taken.add(candidate)
    return candidate


def user_slug_base(email: str) -> str:
    local = email.split("@", 1)[0].lower()
    return re.sub(r"[^a-z0-9._-]+", "-", local).strip("-.") or "user"


def add_authors(world: World, histories: list[list[GitCommit]], seed: int) -> dict[str, int]:
    """Users for repeat authors, plain authors for the others; e-mail -> author index."""
    counts: Counter[str] = Counter()
    newest: dict[str, GitCommit] = {}
    for history in histories:
        for commit in history:
            counts[commit.email] += 1
            known = newest.get(commit.email)
            if known is None or commit.time > known.time:
                newest[commit.email] = commit
    rng = random.Random(seed)
    slugs: set[str] = set()
    for email in sorted(e for e, n in counts.items() if n >= 2):
        latest = newest[email]
        world.add_user(
            User(
                slug=unique(user_slug_base(email), slugs),
                uuid=f"{{{uuid.UUID(int=rng.getrandbits(128), version=4)}}}",
                display_name=latest.name,
                email=email,
                tz_minutes=latest.tz_minutes,
            )
        )
    for email in sorted(e for e, n in counts.items() if n < 2):
        latest = newest[email]
        world.add_author(latest.name, email, None, False, latest.tz_minutes)
    return dict(world.author_by_email)


def add_pull_requests(world: World, rng: random.Random, edition: str) -> None:
    """About one pull request per ten commits, each shortly after a commit of its repository."""
    if not world.users or not world.commits:
        return
    states = CLOUD_STATES if edition == "cloud" else SERVER_STATES
    commits_by_user = Counter(world.authors[c.author].user_slug for c in world.commits)
    user_cum = list(accumulate(commits_by_user.get(slug, 0) + 1.0 for slug in world.users))
    now_ms = world.now_s * 1000
    wanted = max(1, len(world.commits) // COMMITS_PER_PULL_REQUEST)
    created = sorted(
        (min(now_ms - 1, (c.time + rng.randint(60, 3600)) * 1000), c.repo)
        for c in rng.choices(world.commits, k=wanted)
    )
    for created_ms, repo in created:
        state = pick_state(rng, states)
        world.add_pull_request(
            new_pull_request(world, rng, repo, created_ms, state, user_cum), indexed=False
        )
    ensure_every_state(world, states)


def build_world_from_git(paths: tuple[str, ...], seed: int, now_s: int, edition: str) -> World:
    """A host whose repositories and commits are those of the git repositories at `paths`.

    Raises ValueError when a path is not a git repository or git fails on it.
    """
    histories = [read_history(path) for path in paths]
    newest = max((c.time for history in histories for c in history), default=None)
    clock = now_s if newest is None else max(now_s, newest + CLOCK_MARGIN_S)
    world = World(now_s=clock, seed=seed)
    world.add_project(Project(key=PROJECT_KEY, name=PROJECT_NAME))
    author_of = add_authors(world, histories, seed)
    taken: set[str] = set()
    for path, history in zip(paths, histories, strict=True):
        name = Path(path).resolve().name or "repo"
        slug = unique(name, taken)
        first = min((c.time for c in history), default=clock)
        world.add_repo(
            Repository(slug=slug, name=slug, project_key=PROJECT_KEY, created_ms=first * 1000)
        )
        for c in history:
            world.add_commit(
                Commit(
                    idx=0,
                    hash=c.hash,
                    repo=slug,
                    author=author_of[c.email],
                    time=c.time,
                    tz_minutes=c.tz_minutes,
                    parents=c.parents,
                    added=sum(f[1] for f in c.files),
                    deleted=sum(f[2] for f in c.files),
                    pushed=c.time,
                    files=c.files,
                ),
                indexed=False,
            )
    world.finish_bulk_load()  # the pull-request generator reads repo_hashes
    add_pull_requests(world, random.Random(seed * 1_000_033 + 17), edition)
    world.finish_bulk_load()
    return world
