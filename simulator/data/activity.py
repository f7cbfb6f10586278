"""New activity on the host: the clock moving forward, and items inserted while a client pages."""

from __future__ import annotations

import random
from itertools import accumulate

from .generate import (
    DAY_S,
    author_weights,
    heavy_tailed_lines,
    make_users,
    new_hash,
    new_pull_request,
    repo_name,
)
from .model import Commit, Repository
from .world import Scope, World

LATE_WINDOW_S = 3 * DAY_S


def commits_per_hour(world: World) -> float:
    if not world.commits:
        return 1.0
    span_h = max(1.0, (world.now_s - min(c.time for c in world.commits)) / 3600)
    return max(1.0, len(world.commits) / span_h)


def add_commit_at(
    world: World, rng: random.Random, repo: str, when: int, pushed: int, author: int | None = None
) -> Commit:
    """A commit on top of the repository's newest commit, authored at `when`."""
    newest = world.commit_index[("repo", repo)].newest_at_or_before(when)
    parents = (world.commits[newest].hash,) if newest is not None else ()
    if author is None:
        author = rng.randrange(len(world.authors))
    added, deleted = heavy_tailed_lines(rng, False)
    commit = Commit(
        idx=0,
        hash=new_hash(rng),
        repo=repo,
        author=author,
        time=when,
        tz_minutes=world.authors[author].tz_minutes,
        parents=parents,
        added=added,
        deleted=deleted,
        pushed=pushed,
    )
    world.add_commit(commit)
    return commit


def advance(world: World, seconds: int, edition_states: tuple[str, ...]) -> dict[str, object]:
    """Move the clock; create what a busy host sees in that time. Deterministic per advance."""
    with world.lock:
        world.advances += 1
        rng = random.Random(world.seed * 1_000_003 + world.advances)
        old_now, new_now = world.now_s, world.now_s + seconds
        repos = list(world.repos)
        summary: dict[str, object] = {"from": old_now, "to": new_now}

        expected = commits_per_hour(world) * seconds / 3600
        fresh = [
            add_commit_at(world, rng, rng.choice(repos), t, t + int(rng.expovariate(1 / 600)))
            for t in sorted(
                old_now + 1 + int(rng.random() * (seconds - 1)) for _ in range(int(expected))
            )
        ]
        late = []
        for _ in range(max(2, len(fresh) // 20)):
            when = old_now - int(rng.random() * LATE_WINDOW_S)
            late.append(
                add_commit_at(
                    world,
                    rng,
                    rng.choice(repos),
                    when,
                    old_now + 1 + int(rng.random() * (seconds - 1)),
                )
            )
        summary["new_commits"] = len(fresh)
        summary["late_commits"] = [c.hash for c in late]

        world.now_s = new_now
        open_prs = [pr for pr in world.prs if pr.state == "OPEN"]
        changed = []
        for pr in rng.sample(open_prs, min(len(open_prs), max(1, len(open_prs) // 3))):
            when_ms = (old_now + 1 + int(rng.random() * (seconds - 1))) * 1000
            pr.state = rng.choice([s for s in edition_states if s != "OPEN"])
            pr.closed_ms = when_ms
            world.touch_pull_request(pr, when_ms)
            changed.append([pr.repo, pr.id, pr.state])
        for pr in rng.sample(open_prs, min(len(open_prs), 3)):
            if pr.state == "OPEN":
                pr.comment_count += 1
                when_ms = (old_now + 1 + int(rng.random() * (seconds - 1))) * 1000
                world.touch_pull_request(pr, when_ms)
        summary["pull_request_changes"] = changed

        user_cum = author_weights(len(world.users))
        new_prs = []
        for _ in range(max(1, int(len(world.prs) / max(1, len(world.commits)) * len(fresh)))):
            created = (old_now + 1 + int(rng.random() * (seconds - 1))) * 1000
            pr = new_pull_request(world, rng, rng.choice(repos), created, "OPEN", user_cum)
            world.add_pull_request(pr)
            new_prs.append([pr.repo, pr.id])
        summary["new_pull_requests"] = new_prs

        new_users = []
        new_repos = []
        if seconds >= DAY_S:
            before = set(world.users)
            make_users(world, rng, 1, first_index=len(world.users))
            new_users = sorted(set(world.users) - before)
            for slug in new_users:
                user = world.users[slug]
                author = world.author_by_email[user.email]
                add_commit_at(world, rng, rng.choice(repos), new_now - 60, new_now - 30, author)
            name = repo_name(len(world.repos) + 1000)
            project = rng.choice(list(world.projects))
            world.add_repo(
                Repository(slug=name, name=name, project_key=project, created_ms=old_now * 1000)
            )
            for k in range(3):
                add_commit_at(world, rng, name, old_now + 100 + k, old_now + 200 + k)
            new_repos.append(name)
        summary["new_users"] = new_users
        summary["new_repositories"] = new_repos
        world.version += 1
        return summary


def insert_while_paging(
    world: World, scope: Scope, kind: str, since: int | None, until: int | None
) -> None:
    """One new item inside the window being paged, so page boundaries shift under a client."""
    with world.lock:
        rng = random.Random(world.seed * 7_919 + world.version)
        repos = scope_repos(world, scope)
        if not repos:
            return
        repo = rng.choice(repos)
        if kind == "commits":
            top = min(until - 1, world.now_s) if until is not None else world.now_s
            bottom = since if since is not None else top - DAY_S
            when = max(bottom, top - int(rng.random() * 3600))
            author = None
            if scope[0] == "user":
                author = world.author_by_email[world.users[scope[1]].email]
            add_commit_at(world, rng, repo, when, min(when, world.now_s), author)
        else:
            now_ms = world.now_s * 1000
            top = min(until - 1, now_ms) if until is not None else now_ms
            created = max(since if since is not None else 0, top - int(rng.random() * 3_600_000))
            user_cum = list(accumulate(1.0 for _ in world.users))
            pr = new_pull_request(world, rng, repo, created, "OPEN", user_cum)
            if scope[0] == "user":
                pr.author_slug = scope[1]
            pr.updated_ms = created
            world.add_pull_request(pr)


def scope_repos(world: World, scope: Scope) -> list[str]:
    kind, key = scope
    if kind == "repo":
        return [key]
    if kind == "project":
        return [r.slug for r in world.repos_of_project(key)]
    return list(world.repos)
