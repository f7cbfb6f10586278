"""Deterministic synthetic data: the same seed, size and clock give the same host."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from itertools import accumulate

from .model import Commit, Participant, Project, PullRequest, Repository, User
from .world import World

DAY_S = 86_400


@dataclass(frozen=True)
class SizeSpec:
    projects: int
    repos: int
    users: int
    outsiders: int
    commits: int
    pull_requests: int
    days: int


SIZES: dict[str, SizeSpec] = {
    "tiny": SizeSpec(2, 5, 10, 3, 600, 90, 90),
    "small": SizeSpec(4, 20, 60, 15, 20_000, 2_000, 365),
    "medium": SizeSpec(10, 80, 400, 80, 200_000, 20_000, 365),
    "large": SizeSpec(25, 300, 1_500, 300, 1_000_000, 100_000, 365),
}

FIRST_NAMES = (
    "Zoë",
    "José",
    "Łukasz",
    "Søren",
    "Ngozi",
    "Aiko",
    "Иван",
    "Ελένη",
    "Nguyễn",
    "Amélie",
    "Björn",
    "Chloé",
    "Dmitri",
    "Fatima",
    "Gráinne",
    "Hiroshi",
    "Ingrid",
    "Jürgen",
    "Kwame",
    "Leilani",
    "Mateus",
    "Nadia",
    "Oğuz",
    "Priya",
    "Quentin",
    "Rosa",
    "Siobhán",
    "Tomás",
    "Ulla",
    "Vikram",
    "Wen",
    "Ximena",
    "Yusuf",
    "Zhu",
    "محمد",
    "太郎",
    "Anna",
    "Ben",
    "Carl",
)
LAST_NAMES = (
    "Ångström",
    "Núñez",
    "Żółć",
    "Kierkegård",
    "Okonjo",
    "Yamada",
    "Петров",
    "Παπαδοπούλου",
    "Văn An",
    "Dubois",
    "Müller",
    "O'Brien",
    "García",
    "Kowalski",
    "Nakamura",
    "Smith",
    "Østergaard",
    "Çelik",
    "Fernández",
    "Lindqvist",
    "Mbeki",
    "Rossi",
    "Singh",
    "Tanaka",
    "علي",
    "山田",
    "van der Berg",
    "de la Cruz",
    "Schäfer",
    "Nováková",
)
PROJECT_WORDS = (
    "Core",
    "Platform",
    "Mobile",
    "Data",
    "Web",
    "Infra",
    "Payments",
    "Search",
    "Identity",
    "Analytics",
    "Billing",
    "Growth",
    "Security",
    "Tools",
    "Edge",
    "Media",
    "Maps",
    "Support",
)
REPO_WORDS = (
    "api",
    "service",
    "gateway",
    "ui",
    "worker",
    "sdk",
    "docs",
    "cli",
    "engine",
    "store",
    "importer",
    "exporter",
    "scheduler",
    "auth",
    "frontend",
    "backend",
    "infra",
    "lib",
)
# Offsets in minutes, from the Date Line west to the Line Islands, including odd ones.
TZ_OFFSETS = (
    -720,
    -600,
    -480,
    -420,
    -300,
    -240,
    -210,
    0,
    0,
    60,
    60,
    120,
    180,
    330,
    345,
    480,
    540,
    570,
    600,
    780,
    825,
    840,
)
BRANCH_TARGETS = ("main", "main", "main", "main", "develop", "release/2.x")
CLOUD_STATES = (("OPEN", 0.0), ("MERGED", 0.68), ("DECLINED", 0.14), ("SUPERSEDED", 0.06))
SERVER_STATES = (("OPEN", 0.0), ("MERGED", 0.72), ("DECLINED", 0.16))


def new_hash(rng: random.Random) -> str:
    return f"{rng.getrandbits(160):040x}"


def heavy_tailed_lines(rng: random.Random, merge: bool) -> tuple[int, int]:
    """Pareto-shaped line counts: most commits small, a few enormous."""
    if merge and rng.random() < 0.7:
        return 0, 0
    added = min(int(rng.paretovariate(1.1) * 4) - 3, 60_000)
    deleted = min(int(added * rng.random() * rng.random() * 1.6), 60_000)
    return max(added, 0), max(deleted, 0)


def push_delay(rng: random.Random) -> int:
    """Seconds between authoring and pushing; a few commits are pushed days late."""
    if rng.random() < 0.02:
        return rng.randint(DAY_S, 5 * DAY_S)
    return int(rng.expovariate(1 / 1800))


def make_users(world: World, rng: random.Random, count: int, first_index: int = 0) -> None:
    for i in range(first_index, first_index + count):
        first = FIRST_NAMES[i % len(FIRST_NAMES)]
        last = LAST_NAMES[(i * 7 + i // len(FIRST_NAMES)) % len(LAST_NAMES)]
        slug = f"user{i:04d}"
        aliases: tuple[str, ...] = ()
        if rng.random() < 0.3:
            aliases = tuple(f"{slug}.alias{k}@personal.example" for k in range(rng.randint(1, 2)))
        world.add_user(
            User(
                slug=slug,
                uuid=f"{{{uuid.UUID(int=rng.getrandbits(128), version=4)}}}",
                display_name=f"{first} {last}",
                email=f"{slug}@corp.example",
                aliases=aliases,
                tz_minutes=rng.choice(TZ_OFFSETS),
            )
        )


def make_outsiders(world: World, rng: random.Random, count: int) -> None:
    for i in range(count):
        name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)} (contractor)"
        world.add_author(
            name, f"contractor{i:04d}@partner.example", None, False, rng.choice(TZ_OFFSETS)
        )


def repo_name(i: int) -> str:
    word = REPO_WORDS[i % len(REPO_WORDS)]
    other = REPO_WORDS[(i * 5 + 3) % len(REPO_WORDS)]
    if i % 7 == 3:
        return f"{word.title()} {other.title()} {i}"  # capitals and spaces, as real hosts allow
    if i % 11 == 5:
        return f"{word.upper()}-{other}-{i}"
    return f"{word}-{other}-{i}"


def make_structure(world: World, rng: random.Random, spec: SizeSpec, start_ms: int) -> None:
    for p in range(spec.projects):
        word = PROJECT_WORDS[p % len(PROJECT_WORDS)]
        key = f"{word[:4].upper()}{p}" if p >= len(PROJECT_WORDS) else word[:4].upper()
        world.add_project(Project(key=key, name=f"{word} {p}" if p else word))
    keys = list(world.projects)
    for r in range(spec.repos):
        name = repo_name(r)
        world.add_repo(
            Repository(slug=name, name=name, project_key=keys[r % len(keys)], created_ms=start_ms)
        )


def author_weights(count: int) -> list[float]:
    """Zipf-like weights so a few authors write most of the code."""
    return list(accumulate(1.0 / (k + 1) ** 0.9 for k in range(count)))


def make_commits(world: World, rng: random.Random, spec: SizeSpec, start_s: int) -> None:
    repos = list(world.repos)
    repo_cum = list(accumulate(1.0 / (k + 1) ** 0.8 for k in range(len(repos))))
    author_ids = list(range(len(world.authors)))
    rng.shuffle(author_ids)
    author_cum = author_weights(len(author_ids))
    per_repo = [0] * len(repos)
    for r in rng.choices(range(len(repos)), cum_weights=repo_cum, k=spec.commits):
        per_repo[r] += 1
    span = world.now_s - start_s
    for r, count in enumerate(per_repo):
        repo = repos[r]
        times = sorted(start_s + int(rng.random() * span) for _ in range(max(count, 1)))
        authors = rng.choices(author_ids, cum_weights=author_cum, k=len(times))
        main_tip: str | None = None
        branches: list[str] = []
        for n, (when, author_id) in enumerate(zip(times, authors, strict=False)):
            if r == 0 and n == 1 and main_tip is not None:
                # A planted pair sharing 12 hex digits, so ambiguous short ids are testable.
                sha = main_tip[:12] + new_hash(rng)[12:]
            else:
                sha = new_hash(rng)
            roll = rng.random()
            if main_tip is None or roll < 0.001:
                parents: tuple[str, ...] = ()
                main_tip = sha
            elif branches and roll < 0.09:
                parents = (main_tip, branches.pop(rng.randrange(len(branches))))
                main_tip = sha
            elif roll < 0.25 and len(branches) < 4:
                parents = (main_tip,)
                branches.append(sha)
            elif branches and roll < 0.45:
                k = rng.randrange(len(branches))
                parents = (branches[k],)
                branches[k] = sha
            else:
                parents = (main_tip,)
                main_tip = sha
            added, deleted = heavy_tailed_lines(rng, len(parents) > 1)
            world.add_commit(
                Commit(
                    idx=0,
                    hash=sha,
                    repo=repo,
                    author=author_id,
                    time=when,
                    tz_minutes=world.authors[author_id].tz_minutes,
                    parents=parents,
                    added=added,
                    deleted=deleted,
                    pushed=when + push_delay(rng),
                ),
                indexed=False,
            )


def pick_state(rng: random.Random, states: tuple[tuple[str, float], ...]) -> str:
    roll = rng.random()
    total = 0.0
    for state, weight in states[1:]:
        total += weight
        if roll < total:
            return state
    return "OPEN"


def new_pull_request(
    world: World, rng: random.Random, repo: str, created_ms: int, state: str, user_cum: list[float]
) -> PullRequest:
    """One pull request created at `created_ms`; closed ones are closed before the clock."""
    slugs = list(world.users)
    author = rng.choices(slugs, cum_weights=user_cum, k=1)[0]
    now_ms = world.now_s * 1000
    closed_ms: int | None = None
    if state != "OPEN":
        closed_ms = created_ms + int(rng.expovariate(1 / (2 * DAY_S * 1000)))
        if closed_ms > now_ms:
            state, closed_ms = "OPEN", None
    # Real clocks move on: nothing is stamped exactly at the clock's instant.
    latest_ms = max(created_ms, now_ms - 1000)
    if closed_ms is None:
        updated_ms = min(latest_ms, created_ms + int(rng.expovariate(1 / (DAY_S * 1000))))
    elif rng.random() < 0.2:  # a comment after closing moves the updated date on
        updated_ms = min(latest_ms, closed_ms + int(rng.expovariate(1 / (DAY_S * 1000))))
    else:
        updated_ms = closed_ms
    others = [s for s in rng.sample(slugs, min(len(slugs), 7)) if s != author]
    reviewers = others[: rng.randint(0, 3)]
    participants = others[len(reviewers) : len(reviewers) + rng.randint(0, 2)]
    first_review: int | None = None
    approved: int | None = None
    if reviewers:
        limit = closed_ms if closed_ms is not None else now_ms
        candidate = created_ms + int(rng.expovariate(1 / (4 * 3600 * 1000)))
        if candidate <= limit:
            first_review = candidate
            if state == "MERGED":
                approved = min(limit, candidate + int(rng.expovariate(1 / (8 * 3600 * 1000))))
    number = world.pr_next_id[repo]
    world.pr_next_id[repo] = number + 1
    hashes = world.repo_hashes.get(repo) or [new_hash(rng)]
    return PullRequest(
        idx=0,
        id=number,
        repo=repo,
        title=f"{rng.choice(('Fix', 'Add', 'Refactor', 'Improve', 'Remove'))} "
        f"{rng.choice(REPO_WORDS)} handling #{number}",
        description=rng.choice(("", "Closes the ticket.", "Ünïcode ✓ description")),
        state=state,
        author_slug=author,
        from_branch=f"feature/{rng.choice(REPO_WORDS)}-{number}",
        to_branch=rng.choice(BRANCH_TARGETS),
        from_commit=rng.choice(hashes),
        to_commit=rng.choice(hashes),
        created_ms=created_ms,
        updated_ms=updated_ms,
        closed_ms=closed_ms,
        comment_count=int(rng.paretovariate(1.5)) - 1,
        task_count=rng.choice((0, 0, 0, 1, 2)),
        version=rng.randint(0, 6),
        reviewers=[
            Participant(
                s,
                "REVIEWER",
                state == "MERGED" or rng.random() < 0.3,
                "APPROVED" if state == "MERGED" else "UNAPPROVED",
            )
            for s in reviewers
        ],
        participants=[Participant(s, "PARTICIPANT", False, "UNAPPROVED") for s in participants],
        first_commit_ms=created_ms - int(rng.expovariate(1 / (DAY_S * 1000))),
        first_review_ms=first_review,
        approved_ms=approved,
    )


def make_pull_requests(
    world: World,
    rng: random.Random,
    spec: SizeSpec,
    start_s: int,
    states: tuple[tuple[str, float], ...],
) -> None:
    repos = list(world.repos)
    repo_cum = list(accumulate(1.0 / (k + 1) ** 0.8 for k in range(len(repos))))
    user_cum = author_weights(len(world.users))
    span_ms = (world.now_s - start_s) * 1000
    created = sorted(
        (start_s * 1000 + int(rng.random() * span_ms), repo)
        for repo in rng.choices(repos, cum_weights=repo_cum, k=spec.pull_requests)
    )
    for created_ms, repo in created:
        state = pick_state(rng, states)
        world.add_pull_request(
            new_pull_request(world, rng, repo, created_ms, state, user_cum), indexed=False
        )


def ensure_every_state(world: World, states: tuple[tuple[str, float], ...]) -> None:
    """Tiny datasets must still show every state at least once."""
    present = {pr.state for pr in world.prs}
    closed = [pr for pr in world.prs if pr.state != "OPEN"]
    for state, _ in states:
        if state in present or not closed:
            continue
        if state == "OPEN":
            victim = max(world.prs, key=lambda pr: pr.created_ms)
            victim.state, victim.closed_ms = "OPEN", None
        else:
            victim = closed.pop()
            victim.state = state
        present.add(state)


def build_world(seed: int, size: str, now_s: int, edition: str) -> World:
    """A whole host's data, deterministic in (seed, size, now_s, edition)."""
    spec = SIZES[size]
    rng = random.Random(seed)
    world = World(now_s=now_s, seed=seed)
    start_s = now_s - spec.days * DAY_S
    make_structure(world, rng, spec, start_s * 1000)
    make_users(world, rng, spec.users)
    make_outsiders(world, rng, spec.outsiders)
    make_commits(world, rng, spec, start_s)
    world.finish_bulk_load()  # the PR generator reads repo_hashes
    states = CLOUD_STATES if edition == "cloud" else SERVER_STATES
    make_pull_requests(world, rng, spec, start_s, states)
    ensure_every_state(world, states)
    world.finish_bulk_load()
    return world
