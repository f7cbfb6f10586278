"""The cloud host's ground truth, and what a request with given parameters must return from it."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from simulator import Simulator

DAY_S = 86_400
THIRTY_DAYS_S = 30 * DAY_S
PR_STATES = ("OPEN", "MERGED", "DECLINED", "SUPERSEDED")
LOCAL_DATE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$")
UTC_MICROS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
BRACED_UUID = re.compile(r"^\{[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\}$")
# All of the tiny host's history (90 days before 2026-06-01) lies after this date.
BEFORE_HISTORY = "2025-01-01"


@dataclass(frozen=True)
class Truth:
    """One host's ground truth, read once."""

    now: int
    workspace: str
    commits: list[dict[str, Any]]
    prs: list[dict[str, Any]]
    users: list[dict[str, Any]]
    repos: list[dict[str, Any]]

    @property
    def slug_of_uuid(self) -> dict[str, str]:
        return {u["uuid"]: u["_sim"]["slug"] for u in self.users}

    def commit_by_hash(self) -> dict[str, dict[str, Any]]:
        return {c["hash"]: c for c in self.commits}

    def pr_by_key(self) -> dict[tuple[str, int], dict[str, Any]]:
        return {pr_key(p): p for p in self.prs}


def read_truth(sim: Simulator) -> Truth:
    info = sim.info()
    return Truth(
        info["now"],
        info["workspace"],
        sim.truth("commits"),
        sim.truth("pull-requests"),
        sim.truth("users"),
        sim.truth("repositories"),
    )


def epoch(text: str) -> int:
    """An ISO-8601 timestamp (Z, offset or naive UTC) or a date (midnight UTC) -> epoch s."""
    if len(text) == 10:
        text += "T00:00:00"
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())


def epoch_ms(text: str) -> int:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return round(moment.timestamp() * 1000) if len(text) > 10 else epoch(text) * 1000


def instant(commit: dict[str, Any]) -> int:
    return epoch(commit["_sim"]["instant"])


def local_wall_time(epoch_s: int, offset_minutes: int) -> str:
    shifted = datetime.fromtimestamp(epoch_s, UTC) + timedelta(minutes=offset_minutes)
    return shifted.strftime("%Y-%m-%dT%H:%M:%S")


def with_offset(epoch_s: int, offset_minutes: int) -> str:
    """The same instant written in the author's local time with an explicit offset."""
    sign = "+" if offset_minutes >= 0 else "-"
    hours, minutes = divmod(abs(offset_minutes), 60)
    return f"{local_wall_time(epoch_s, offset_minutes)}{sign}{hours:02d}:{minutes:02d}"


def micros_z(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{millis:03d}000Z"


def pr_key(item: dict[str, Any]) -> tuple[str, int]:
    return item["destination"]["repository"]["slug"], item["id"]


def public(item: dict[str, Any], *drop: str) -> dict[str, Any]:
    """A truth item as the API serves it: without `_sim` and the named fields."""
    return {k: v for k, v in item.items() if k != "_sim" and k not in drop}


def expected_commits(
    truth: Truth,
    *,
    repo: str | None = None,
    user: str | None = None,
    merges: str = "exclude",
    since: str | None = None,
    until: str | None = None,
    hidden_repos: Iterable[str] = (),
) -> dict[str, dict[str, Any]]:
    """Truth commits a commit list with these parameters must return, by hash."""
    low = epoch(since) if since else None
    high = epoch(until) if until else None
    hidden = set(hidden_repos)
    found = {}
    for commit in truth.commits:
        merge = len(commit["parents"]) > 1
        assert merge == commit["_sim"]["is_merge"]
        at = instant(commit)
        if (
            (repo is None or commit["repository"]["slug"] == repo)
            and (user is None or commit["_sim"]["user"] == user)
            and commit["repository"]["slug"] not in hidden
            and (merges == "include" or merge == (merges == "only"))
            and (low is None or at >= low)
            and (high is None or at < high)
        ):
            found[commit["hash"]] = commit
    return found


def expected_prs(
    truth: Truth,
    *,
    repo: str | None = None,
    user: str | None = None,
    state: str = "all",
    since: str | None = None,
    until: str | None = None,
    date_type: str = "created",
) -> dict[tuple[str, int], dict[str, Any]]:
    """Truth pull requests a list with these parameters must return (30-day default)."""
    low = epoch_ms(since) if since else None
    high = epoch_ms(until) if until else None
    if low is None and high is None:
        low = (truth.now - THIRTY_DAYS_S) * 1000
    found = {}
    for pr in truth.prs:
        at = pr["_sim"]["created_ms" if date_type == "created" else "updated_ms"]
        if (
            (repo is None or pr_key(pr)[0] == repo)
            and (user is None or pr["_sim"]["user"] == user)
            and (state == "all" or pr["state"] == state.upper())
            and (low is None or at >= low)
            and (high is None or at < high)
        ):
            found[pr_key(pr)] = pr
    return found


def percentile(values: list[int], fraction: float) -> float:
    """numpy's default (linear) method: interpolate between the closest ranks."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = (len(ordered) - 1) * fraction
    below, above = math.floor(position), math.ceil(position)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)
