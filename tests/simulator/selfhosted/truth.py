"""The self-hosted host's ground truth: its items, the targets of each level, and the
statistics and CSV rows they must give."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote

from simulator import Simulator

Item = dict[str, Any]
Key = str | tuple[str, int]
KINDS = ("commits", "pull-requests")
LEVELS = ("global", "project", "repository", "user")
LIMIT_MAX = {"commits": 1000, "pull-requests": 500}
DAY_S = 86_400


def epoch(text: str) -> float:
    """ISO-8601 (with Z or an offset) -> epoch seconds."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def iso(epoch_s: float, offset_minutes: int = 0) -> str:
    """Epoch seconds -> ISO-8601 with an explicit offset (+00:00 for UTC)."""
    zone = timezone(timedelta(minutes=offset_minutes))
    return datetime.fromtimestamp(epoch_s, zone).isoformat()


def served(item: Item) -> Item:
    """A truth item without the simulator-only `_sim` facts: what the API serves."""
    return {k: v for k, v in item.items() if k != "_sim"}


def key_of(kind: str, item: Item) -> Key:
    """Natural key: commit hash; pull request (target repository slug, id)."""
    if kind == "commits":
        return str(item["id"])
    return (item["toRef"]["repository"]["slug"], int(item["id"]))


def by_key(kind: str, items: list[Item]) -> dict[Key, Item]:
    keyed = {key_of(kind, i): served(i) for i in items}
    assert len(keyed) == len(items), "duplicate items"
    return keyed


def item_time(kind: str, item: Item, date_type: str = "created") -> float:
    """The instant a list filters and orders on, in seconds."""
    if kind == "commits":
        return epoch(item["authorTimestamp"])
    return item["createdDate" if date_type == "created" else "updatedDate"] / 1000


def field_is(path: tuple[str, ...], value: Any) -> Callable[[Item], bool]:
    """A predicate: the item's nested field at `path` equals `value`."""

    def check(item: Item) -> bool:
        found: Any = item
        for name in path:
            found = found[name]
        return bool(found == value)

    return check


@dataclass(frozen=True)
class Target:
    """One level's address and which truth items belong to it."""

    level: str
    path: str  # below the API prefix, before /commits or /pull-requests
    commit_in: Callable[[Item], bool]
    pr_in: Callable[[Item], bool]

    def wants(self, kind: str) -> Callable[[Item], bool]:
        return self.commit_in if kind == "commits" else self.pr_in


@dataclass
class Truth:
    """The tiny host's ground truth, read once per module."""

    now: int
    commits: list[Item]
    prs: list[Item]
    users: list[Item]
    repos: list[Item]
    projects: list[Item]

    def items(self, kind: str) -> list[Item]:
        return self.commits if kind == "commits" else self.prs

    def targets(self, level: str) -> list[Target]:
        """Every project, repository or user of the host (or the single global target)."""
        if level == "global":
            return [Target("global", "", lambda c: True, lambda p: True)]
        if level == "project":
            return [
                Target(
                    "project",
                    f"/projects/{p['key']}",
                    field_is(("repository", "project", "key"), p["key"]),
                    field_is(("toRef", "repository", "project", "key"), p["key"]),
                )
                for p in self.projects
            ]
        if level == "repository":
            return [
                Target(
                    "repository",
                    f"/projects/{r['project']['key']}/repos/{quote(r['slug'], safe='')}",
                    field_is(("repository", "slug"), r["slug"]),
                    field_is(("toRef", "repository", "slug"), r["slug"]),
                )
                for r in self.repos
            ]
        return [
            Target(
                "user",
                f"/users/{u['slug']}",
                field_is(("_sim", "user"), u["slug"]),
                field_is(("author", "user", "name"), u["slug"]),
            )
            for u in self.users
        ]

    def select(
        self,
        kind: str,
        wants: Callable[[Item], bool],
        since: float | None = None,
        until: float | None = None,
        date_type: str = "created",
        merges: str = "include",
        state: str = "all",
    ) -> list[Item]:
        """Truth items in a window ([since, until), seconds) and with the given filters."""
        chosen = []
        for item in self.items(kind):
            when = item_time(kind, item, date_type)
            if (
                not wants(item)
                or (since is not None and when < since)
                or (until is not None and when >= until)
            ):
                continue
            if (
                kind == "commits"
                and merges != "include"
                and (item["_sim"]["is_merge"] != (merges == "only"))
            ):
                continue
            if kind == "pull-requests" and state != "all" and item["state"] != state.upper():
                continue
            chosen.append(item)
        return chosen


def read_truth(sim: Simulator) -> Truth:
    return Truth(
        sim.info()["now"],
        sim.truth("commits"),
        sim.truth("pull-requests"),
        sim.truth("users"),
        sim.truth("repositories"),
        sim.truth("projects"),
    )


def statistics_of(kind: str, items: list[Item]) -> dict[str, Any]:
    """The statistics object the spec defines, summed over `items`."""
    if kind == "commits":
        return {
            "linesOfCode": {
                "added": sum(i["linesOfCode"]["added"] for i in items),
                "deleted": sum(i["linesOfCode"]["deleted"] for i in items),
            },
            "commits": len(items),
        }
    states = Counter(i["state"].lower() for i in items)
    return {
        "pullRequests": len(items),
        "state": {s: states.get(s, 0) for s in ("declined", "merged", "open")},
    }


def window_of(truth: Truth, kind: str) -> tuple[float, float]:
    """A window whose bounds sit exactly on two items' instants (second 1/3 to 2/3)."""
    times = sorted({int(item_time(kind, i)) for i in truth.items(kind)})
    return float(times[len(times) // 3]), float(times[2 * len(times) // 3])


def commit_row(item: Item) -> dict[str, Any]:
    """What a commit CSV row must say about a truth commit (dates compared as instants)."""
    repository = item["repository"]
    return {
        "Date": epoch(item["authorTimestamp"]),
        "Author email": item["author"]["emailAddress"],
        "Author name": item["author"]["displayName"],
        "Author username": item["_sim"]["user"] or "",
        "Repository": repository["name"],
        "Project": repository["project"]["name"],
        "Commit hash": item["id"],
        "Merge commit": "true" if item["_sim"]["is_merge"] else "false",
        "Lines added": str(item["linesOfCode"]["added"]),
        "Lines deleted": str(item["linesOfCode"]["deleted"]),
    }


def check_commit_rows(rows: list[dict[str, str]], expected: list[Item]) -> None:
    parsed = [
        {**row, "Date": epoch(row["Date"]), "Merge commit": row["Merge commit"].lower()}
        for row in rows
    ]
    assert parsed == [commit_row(i) for i in expected]


def check_pr_rows(rows: list[dict[str, str]], expected: list[Item]) -> None:
    assert [(r["Repository"], int(r["Pull request id"])) for r in rows] == [
        (i["toRef"]["repository"]["name"], i["id"]) for i in expected
    ]
    for row, item in zip(rows, expected, strict=True):
        author = item["author"]["user"]
        assert round(epoch(row["Created date"]) * 1000) == item["createdDate"]
        assert round(epoch(row["Last updated date"]) * 1000) == item["updatedDate"]
        assert (row["Author name"], row["Author username"]) == (
            author["displayName"],
            author["name"],
        )
        assert row["Project"] == item["toRef"]["repository"]["project"]["name"]
        assert row["State"] == item["state"]
        reviewers = [r["user"]["displayName"] for r in item["reviewers"]]
        assert all(name in row["Reviewers"] for name in reviewers)
        assert (row["Reviewers"] == "") == (not reviewers)
        closed_ms = item["_sim"]["closed_ms"]
        if closed_ms is None:
            assert row["Time to resolve (s)"] == ""
        else:
            assert (
                abs(int(row["Time to resolve (s)"]) - (closed_ms - item["createdDate"]) / 1000) <= 1
            )
        for phase in ("Time to open (s)", "Pickup time (s)", "Review time (s)"):
            assert row[phase] == "" or int(row[phase]) >= 0
