"""Entities as each edition serves them: JSON item bytes, CSV rows, per-file changes."""

from __future__ import annotations

import random
from time import gmtime

import orjson

from .data.model import Commit, Participant, PullRequest
from .data.world import World

FILE_DIRS = ("src", "src/core", "src/api", "tests", "docs", "lib/util", "scripts", "web/ü-assets")
FILE_EXTS = (".py", ".ts", ".java", ".md", ".go", ".sql", ".yaml")


def iso_seconds_z(epoch_s: int) -> str:
    """`YYYY-MM-DDTHH:MM:SSZ`, formatted by hand: strftime costs ~3x as much, per item."""
    t = gmtime(epoch_s)
    return f"{t[0]:04d}-{t[1]:02d}-{t[2]:02d}T{t[3]:02d}:{t[4]:02d}:{t[5]:02d}Z"


def iso_micros_z(epoch_ms: int) -> str:
    seconds, millis = divmod(epoch_ms, 1000)
    t = gmtime(seconds)
    return f"{t[0]:04d}-{t[1]:02d}-{t[2]:02d}T{t[3]:02d}:{t[4]:02d}:{t[5]:02d}.{millis:03d}000Z"


def local_naive(epoch_s: int, tz_minutes: int) -> str:
    """The author's wall-clock time with the offset dropped, as the cloud commit `date` is."""
    t = gmtime(epoch_s + tz_minutes * 60)
    return f"{t[0]:04d}-{t[1]:02d}-{t[2]:02d}T{t[3]:02d}:{t[4]:02d}:{t[5]:02d}"


def commit_files(commit: Commit) -> list[tuple[str, int, int]]:
    """Per-file (path, added, deleted), summing to the commit's totals; stable per hash."""
    if commit.files is not None:
        return list(commit.files)
    if commit.added == 0 and commit.deleted == 0:
        return []
    rng = random.Random(int(commit.hash[:16], 16))
    count = min(1 + int(rng.paretovariate(1.5)) - 1, 40) or 1
    paths = sorted(
        {
            f"{rng.choice(FILE_DIRS)}/file_{rng.randrange(500)}{rng.choice(FILE_EXTS)}"
            for _ in range(count)
        }
    )
    added = split_total(rng, commit.added, len(paths))
    deleted = split_total(rng, commit.deleted, len(paths))
    return list(zip(paths, added, deleted, strict=False))


def split_total(rng: random.Random, total: int, parts: int) -> list[int]:
    cuts = sorted(rng.randint(0, total) for _ in range(parts - 1))
    edges = [0, *cuts, total]
    return [edges[i + 1] - edges[i] for i in range(parts)]


# cloud -------------------------------------------------------------------------------------
def cloud_author(world: World, commit: Commit) -> dict[str, object]:
    author = world.authors[commit.author]
    user = world.users.get(author.user_slug) if author.user_slug else None
    return {
        "display_name": user.display_name if user else author.name,
        "uuid": user.uuid if user else None,
    }


def cloud_commit(world: World, commit: Commit) -> bytes:
    """Without `lines`; `with_cloud_lines` adds them for with_lines=true."""
    return orjson.dumps(
        {
            "author": cloud_author(world, commit),
            "date": local_naive(commit.time, commit.tz_minutes),
            "hash": commit.hash,
            "parents": [{"hash": p} for p in commit.parents],
            "repository": {"slug": commit.repo},
        }
    )


def with_cloud_lines(item: bytes, commit: Commit) -> bytes:
    return b'%s,"lines":{"added":%d,"deleted":%d}}' % (item[:-1], commit.added, commit.deleted)


def cloud_pull_request(world: World, pr: PullRequest) -> bytes:
    user = world.users[pr.author_slug]
    return orjson.dumps(
        {
            "id": pr.id,
            "title": pr.title,
            "state": pr.state,
            "closed": pr.closed,
            "author": {"display_name": user.display_name, "uuid": user.uuid},
            "destination": {"branch": {"name": pr.to_branch}, "repository": {"slug": pr.repo}},
            "created_date": iso_micros_z(pr.created_ms),
            "closed_date": iso_micros_z(pr.closed_ms) if pr.closed_ms is not None else None,
            "updated_date": iso_micros_z(pr.updated_ms),
            "comment_count": pr.comment_count,
            "task_count": pr.task_count,
        }
    )


# self-hosted -------------------------------------------------------------------------------
def server_repository(world: World, slug: str) -> dict[str, object]:
    repo = world.repos[slug]
    project = world.projects[repo.project_key]
    return {
        "slug": repo.slug,
        "name": repo.name,
        "project": {"key": project.key, "name": project.name, "type": project.type},
    }


def server_user(world: World, slug: str) -> dict[str, str]:
    user = world.users[slug]
    return {"emailAddress": user.email, "displayName": user.display_name, "name": user.slug}


def server_commit_dict(world: World, commit: Commit, parent_len: int) -> dict[str, object]:
    author = world.authors[commit.author]
    item: dict[str, object] = {
        "id": commit.hash,
        "author": {"displayName": author.name, "emailAddress": author.email},
    }
    if author.user_slug is not None and author.is_primary:
        item["user"] = server_user(world, author.user_slug)
    item["authorTimestamp"] = iso_seconds_z(commit.time)
    item["linesOfCode"] = {"added": commit.added, "deleted": commit.deleted}
    item["parents"] = [{"id": p[:parent_len]} for p in commit.parents]
    item["repository"] = server_repository(world, commit.repo)
    return item


def server_commit(world: World, commit: Commit, parent_len: int) -> bytes:
    return orjson.dumps(server_commit_dict(world, commit, parent_len))


def server_commit_with_files(world: World, commit: Commit, parent_len: int) -> bytes:
    item = server_commit_dict(world, commit, parent_len)
    item["files"] = [
        {"path": path, "linesOfCode": {"added": a, "deleted": d}}
        for path, a, d in commit_files(commit)
    ]
    return orjson.dumps(item)


def participant(world: World, person: Participant) -> dict[str, object]:
    return {
        "user": server_user(world, person.user_slug),
        "approved": person.approved,
        "role": person.role,
        "status": person.status,
    }


def server_ref(world: World, repo: str, branch: str, commit: str) -> dict[str, object]:
    return {
        "repository": server_repository(world, repo),
        "latestCommit": commit,
        "displayId": branch,
        "id": f"refs/heads/{branch}",
    }


def server_pull_request(world: World, pr: PullRequest, base_url: str) -> bytes:
    repo = world.repos[pr.repo]
    href = f"{base_url}/projects/{repo.project_key}/repos/{repo.slug}/pull-requests/{pr.id}"
    return orjson.dumps(
        {
            "id": pr.id,
            "title": pr.title,
            "description": pr.description,
            "state": pr.state,
            "open": not pr.closed,
            "closed": pr.closed,
            "locked": pr.locked,
            "version": pr.version,
            "createdDate": pr.created_ms,
            "updatedDate": pr.updated_ms,
            "links": {"self": [{"href": href}]},
            "author": participant(
                world, Participant(pr.author_slug, "AUTHOR", False, "UNAPPROVED")
            ),
            "reviewers": [participant(world, p) for p in pr.reviewers],
            "participants": [participant(world, p) for p in pr.participants],
            "fromRef": server_ref(world, pr.repo, pr.from_branch, pr.from_commit),
            "toRef": server_ref(world, pr.repo, pr.to_branch, pr.to_commit),
        }
    )


# CSV ---------------------------------------------------------------------------------------
COMMIT_CSV_HEADER = (
    "Date",
    "Author email",
    "Author name",
    "Author username",
    "Repository",
    "Project",
    "Commit hash",
    "Merge commit",
    "Lines added",
    "Lines deleted",
)
PULL_REQUEST_CSV_HEADER = (
    "Created date",
    "Last updated date",
    "Author name",
    "Author username",
    "Repository",
    "Project",
    "State",
    "Pull request id",
    "Reviewers",
    "Time to open (s)",
    "Pickup time (s)",
    "Review time (s)",
    "Time to resolve (s)",
)


def commit_csv_row(world: World, commit: Commit) -> tuple[object, ...]:
    author = world.authors[commit.author]
    repo = world.repos[commit.repo]
    return (
        iso_seconds_z(commit.time),
        author.email,
        author.name,
        author.user_slug or "",
        repo.name,
        world.projects[repo.project_key].name,
        commit.hash,
        "true" if commit.is_merge else "false",
        commit.added,
        commit.deleted,
    )


def seconds_between(start_ms: int | None, end_ms: int | None) -> object:
    if start_ms is None or end_ms is None:
        return ""
    return (end_ms - start_ms) // 1000


def pull_request_csv_row(world: World, pr: PullRequest) -> tuple[object, ...]:
    user = world.users[pr.author_slug]
    repo = world.repos[pr.repo]
    return (
        iso_micros_z(pr.created_ms),
        iso_micros_z(pr.updated_ms),
        user.display_name,
        user.slug,
        repo.name,
        world.projects[repo.project_key].name,
        pr.state,
        pr.id,
        "; ".join(world.users[r.user_slug].display_name for r in pr.reviewers),
        seconds_between(pr.first_commit_ms, pr.created_ms),
        seconds_between(pr.created_ms, pr.first_review_ms),
        seconds_between(pr.first_review_ms, pr.approved_ms),
        seconds_between(pr.created_ms, pr.closed_ms),
    )
