"""The simulated host's entities: plain records, edition-neutral.

Times are integers: commit author times in epoch seconds (UTC) with the author's own offset
in minutes beside them; pull-request times in epoch milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Project:
    key: str
    name: str
    type: str = "NORMAL"


@dataclass(slots=True)
class Repository:
    slug: str
    name: str
    project_key: str
    created_ms: int = 0
    loc_indexing: bool = True


@dataclass(slots=True)
class User:
    """A platform user. Commits authored under any of `aliases` count as theirs."""

    slug: str
    uuid: str  # "{...}" as the cloud edition writes it
    display_name: str
    email: str
    aliases: tuple[str, ...] = ()
    tz_minutes: int = 0


@dataclass(slots=True)
class Author:
    """A commit author identity: a platform user's e-mail (primary or alias) or an outsider."""

    name: str
    email: str
    user_slug: str | None  # owning user, through the primary e-mail or an alias
    is_primary: bool  # the e-mail is the user's primary one (the platform resolves `user`)
    tz_minutes: int


@dataclass(slots=True)
class Commit:
    idx: int
    hash: str
    repo: str  # repository slug (unique across projects in the simulator)
    author: int  # index into World.authors
    time: int  # author time, epoch seconds UTC
    tz_minutes: int  # the author's offset at that moment
    parents: tuple[str, ...]
    added: int
    deleted: int
    pushed: int  # epoch seconds when the host learnt of it; invisible before
    files: tuple[tuple[str, int, int], ...] | None = None  # set for --from-git data only

    @property
    def is_merge(self) -> bool:
        return len(self.parents) > 1


@dataclass(slots=True)
class Participant:
    user_slug: str
    role: str  # AUTHOR | REVIEWER | PARTICIPANT
    approved: bool
    status: str  # UNAPPROVED | APPROVED | NEEDS_WORK


@dataclass(slots=True)
class PullRequest:
    idx: int
    id: int  # number within its target repository
    repo: str  # target (destination) repository slug
    title: str
    description: str
    state: str  # OPEN | MERGED | DECLINED | SUPERSEDED
    author_slug: str
    from_branch: str
    to_branch: str
    from_commit: str
    to_commit: str
    created_ms: int
    updated_ms: int
    closed_ms: int | None
    comment_count: int
    task_count: int
    version: int
    reviewers: list[Participant] = field(default_factory=list)
    participants: list[Participant] = field(default_factory=list)
    first_commit_ms: int = 0
    first_review_ms: int | None = None
    approved_ms: int | None = None
    locked: bool = False

    @property
    def closed(self) -> bool:
        return self.state != "OPEN"
