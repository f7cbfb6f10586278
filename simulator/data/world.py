"""The simulated host's data and its time indexes.

A `World` owns every entity and keeps, per scope (global, project, repository, user), the
items sorted by the date the API filters on, so a date-bounded query is a bisection rather
than a scan. All mutation goes through `add_commit`, `add_pull_request` and
`touch_pull_request`, which keep the indexes and the data version right.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, insort
from collections import defaultdict

from .model import Author, Commit, Project, PullRequest, Repository, User

Scope = tuple[str, str]  # ("global", ""), ("project", key), ("repo", slug), ("user", slug)
GLOBAL: Scope = ("global", "")


class TimeIndex:
    """Item indexes sorted by a time; `between` answers a half-open or closed range."""

    __slots__ = ("_keys",)

    def __init__(self) -> None:
        self._keys: list[tuple[int, int]] = []

    def append(self, key: tuple[int, int]) -> None:
        """Append without keeping order; call `sort` once after a bulk load."""
        self._keys.append(key)

    def sort(self) -> None:
        self._keys.sort()

    def add(self, time: int, idx: int) -> None:
        insort(self._keys, (time, idx))

    def remove(self, time: int, idx: int) -> None:
        pos = bisect_left(self._keys, (time, idx))
        if pos < len(self._keys) and self._keys[pos] == (time, idx):
            del self._keys[pos]

    def between(self, since: int | None, until: int | None, until_inclusive: bool) -> list[int]:
        """Indexes with since <= time < until (or <= until), oldest first."""
        keys = self._keys
        lo = 0 if since is None else bisect_left(keys, (since, -1))
        if until is None:
            hi = len(keys)
        elif until_inclusive:
            hi = bisect_left(keys, (until + 1, -1))
        else:
            hi = bisect_left(keys, (until, -1))
        return [idx for _, idx in keys[lo:hi]]

    def newest_at_or_before(self, time: int) -> int | None:
        pos = bisect_left(self._keys, (time + 1, -1))
        return self._keys[pos - 1][1] if pos else None

    def __len__(self) -> int:
        return len(self._keys)


class World:
    """Every entity of one simulated host, its clock and its indexes."""

    def __init__(self, now_s: int, seed: int) -> None:
        self.seed = seed
        self.now_s = now_s
        self.version = 0
        self.lock = threading.RLock()
        self.projects: dict[str, Project] = {}
        self.repos: dict[str, Repository] = {}
        self.users: dict[str, User] = {}
        self.authors: list[Author] = []
        self.author_by_email: dict[str, int] = {}
        self.commits: list[Commit] = []
        self.commit_by_hash: dict[str, int] = {}
        self.prs: list[PullRequest] = []
        self.pr_next_id: dict[str, int] = defaultdict(lambda: 1)
        self.commit_index: dict[Scope, TimeIndex] = defaultdict(TimeIndex)
        self.pr_created_index: dict[Scope, TimeIndex] = defaultdict(TimeIndex)
        self.pr_updated_index: dict[Scope, TimeIndex] = defaultdict(TimeIndex)
        self.repo_hashes: dict[str, list[str]] = defaultdict(list)  # for prefix look-ups
        self.advances = 0

    # entities -----------------------------------------------------------------------------
    def add_project(self, project: Project) -> None:
        self.projects[project.key] = project

    def add_repo(self, repo: Repository) -> None:
        self.repos[repo.slug] = repo

    def add_user(self, user: User) -> None:
        self.users[user.slug] = user
        self.add_author(user.display_name, user.email, user.slug, True, user.tz_minutes)
        for alias in user.aliases:
            self.add_author(user.display_name, alias, user.slug, False, user.tz_minutes)

    def add_author(
        self, name: str, email: str, user_slug: str | None, is_primary: bool, tz_minutes: int
    ) -> int:
        known = self.author_by_email.get(email)
        if known is not None:
            return known
        self.authors.append(Author(name, email, user_slug, is_primary, tz_minutes))
        self.author_by_email[email] = len(self.authors) - 1
        return len(self.authors) - 1

    # commits ------------------------------------------------------------------------------
    def commit_scopes(self, commit: Commit) -> list[Scope]:
        repo = self.repos[commit.repo]
        scopes = [GLOBAL, ("project", repo.project_key), ("repo", repo.slug)]
        user_slug = self.authors[commit.author].user_slug
        if user_slug is not None:
            scopes.append(("user", user_slug))
        return scopes

    def add_commit(self, commit: Commit, indexed: bool = True) -> None:
        """Add a commit; with `indexed=False` the caller calls `finish_bulk_load` later."""
        commit.idx = len(self.commits)
        self.commits.append(commit)
        self.commit_by_hash[commit.hash] = commit.idx
        if indexed:
            insort(self.repo_hashes[commit.repo], commit.hash)
            for scope in self.commit_scopes(commit):
                self.commit_index[scope].add(commit.time, commit.idx)
            self.version += 1

    # pull requests ------------------------------------------------------------------------
    def pr_scopes(self, pr: PullRequest) -> list[Scope]:
        repo = self.repos[pr.repo]
        return [
            GLOBAL,
            ("project", repo.project_key),
            ("repo", repo.slug),
            ("user", pr.author_slug),
        ]

    def add_pull_request(self, pr: PullRequest, indexed: bool = True) -> None:
        pr.idx = len(self.prs)
        self.prs.append(pr)
        if indexed:
            for scope in self.pr_scopes(pr):
                self.pr_created_index[scope].add(pr.created_ms, pr.idx)
                self.pr_updated_index[scope].add(pr.updated_ms, pr.idx)
            self.version += 1

    def touch_pull_request(self, pr: PullRequest, updated_ms: int) -> None:
        """Move a pull request's updated date, keeping the updated-date index right."""
        for scope in self.pr_scopes(pr):
            index = self.pr_updated_index[scope]
            index.remove(pr.updated_ms, pr.idx)
            index.add(updated_ms, pr.idx)
        pr.updated_ms = updated_ms
        pr.version += 1
        self.version += 1

    def finish_bulk_load(self) -> None:
        """Build every index at once after an unindexed bulk load (much faster than insort)."""
        for index in (self.commit_index, self.pr_created_index, self.pr_updated_index):
            index.clear()
        self.repo_hashes.clear()
        for commit in self.commits:
            key = (commit.time, commit.idx)
            for scope in self.commit_scopes(commit):
                self.commit_index[scope].append(key)
            self.repo_hashes[commit.repo].append(commit.hash)
        for pr in self.prs:
            for scope in self.pr_scopes(pr):
                self.pr_created_index[scope].append((pr.created_ms, pr.idx))
                self.pr_updated_index[scope].append((pr.updated_ms, pr.idx))
        for index in (self.commit_index, self.pr_created_index, self.pr_updated_index):
            for time_index in index.values():
                time_index.sort()
        for hashes in self.repo_hashes.values():
            hashes.sort()
        self.version += 1

    # look-ups -----------------------------------------------------------------------------
    def commits_matching_prefix(self, repo: str, prefix: str) -> list[str]:
        hashes = self.repo_hashes.get(repo, [])
        found: list[str] = []
        pos = bisect_left(hashes, prefix)
        while pos < len(hashes) and hashes[pos].startswith(prefix):
            found.append(hashes[pos])
            pos += 1
        return found

    def repos_of_project(self, key: str) -> list[Repository]:
        return [r for r in self.repos.values() if r.project_key == key]
