"""What reconciliation compares and what it finds: the edition's checks, the measures a run
read, and the verdict (`Reconciliation`) with its differences."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sources.repo_analytics import RunReport
from sources.repo_analytics.editions.spec import (
    EditionSpec,
    Endpoint,
    ReconcileSpec,
    StatisticsCheck,
)
from sources.repo_analytics.reading.readers import ReadContext
from sources.repo_analytics.reading.scopes import endpoint_for


@dataclass(frozen=True)
class EditionChecks:
    """Where an edition keeps what is compared: its `ReconcileSpec`, with the repository-
    level list tables and time columns of its endpoint table."""

    commit_table: str
    commit_time: str  # column compared with the window
    commit_time_is_local: bool
    pr_table: str
    spec: ReconcileSpec

    @property
    def statistics(self) -> tuple[StatisticsCheck, ...]:
        return self.spec.statistics


def edition_checks(spec: EditionSpec) -> EditionChecks | None:
    """What the edition reconciles, or None when its table declares nothing (or lacks the
    repository-level lists compared)."""
    commits = repository_endpoint(spec, "commits")
    pull_requests = repository_endpoint(spec, "pull_requests")
    if spec.reconcile is None or commits is None or pull_requests is None or not commits.cursor:
        return None
    return EditionChecks(
        commits.table, commits.cursor, commits.cursor_naive, pull_requests.table, spec.reconcile
    )


@dataclass(frozen=True)
class Measures:
    """What is compared: only what the run read (its levels and resources)."""

    commits: bool
    pull_requests: bool
    statistics: tuple[StatisticsCheck, ...] = ()  # the statistics tables it read


@dataclass(frozen=True)
class StoredPeriod:
    """One stored statistics row of a repository: its period and measures."""

    check: StatisticsCheck
    names: tuple[str, ...]
    start: datetime
    end: datetime
    landed: tuple[int, ...]
    load_id: str | None = None  # the load that wrote it (None: written before ids were kept)


@dataclass
class Difference:
    repository: str
    window: str
    measure: str
    api: int
    landed: int
    verdict: str  # mismatch | within_edge_tolerance


@dataclass
class Reconciliation:
    checked: int
    differences: list[Difference]
    notes: list[str] = field(default_factory=list)  # windows not checked, and why
    # scopes the runs skipped (`resource:scope (kind)`): their rows could not be checked
    unchecked: list[str] = field(default_factory=list)
    # statistics rows of the checked windows: written by the run's own loads (the API's
    # answers of this run, not asked for again), and older ones asked for and compared
    rows_written: int = 0
    rows_rechecked: int = 0
    # (window, family) pairs whose top-level statistics equalled what landed: their
    # repositories' checks hold without asking each (see `confirmed_by_top_level`)
    windows_confirmed: int = 0

    def skipping(self, reports: Iterable[RunReport]) -> Reconciliation:
        """Name the scopes `reports` skipped: a verdict must not hide what it could not see."""
        self.unchecked = sorted({f"{s.resource} ({s.kind})" for r in reports for s in r.skips})
        return self

    @property
    def ok(self) -> bool:
        return not any(d.verdict == "mismatch" for d in self.differences)

    def summary(self, shown: int = 10) -> list[str]:
        """The verdict, then up to `shown` mismatches and every note, one line each."""
        if not self.checked and not self.rows_written:
            why = "; ".join(note.removeprefix("not run: ") for note in self.notes)
            return [
                f"reconciliation with the API's statistics: not run ({why or 'nothing to check'})"
            ]
        tolerated = sum(d.verdict != "mismatch" for d in self.differences)
        mismatched = [d for d in self.differences if d.verdict == "mismatch"]
        lines = [
            f"reconciliation with the API's statistics: "
            f"{'PASSED' if self.ok else 'FAILED'} ({self.checked} checks, "
            f"{len(mismatched)} mismatches"
            + (
                f", {tolerated} within the edge tolerance of the zone-less cloud commit date"
                if tolerated
                else ""
            )
            + (
                f"; {self.rows_written} statistics rows written by this run from the "
                f"API's answers, {self.rows_rechecked} older rows re-checked"
                if self.rows_written or self.rows_rechecked
                else ""
            )
            + (
                f"; {self.windows_confirmed} window totals matched by the top-level statistics"
                if self.windows_confirmed
                else ""
            )
            + (f"; {len(self.unchecked)} skipped scopes not checked" if self.unchecked else "")
            + ")"
        ]
        lines += [f"  not checked, skipped by the run: {scope}" for scope in self.unchecked[:shown]]
        if len(self.unchecked) > shown:
            lines.append(f"  … {len(self.unchecked) - shown} more skipped scopes in the run report")
        lines += [
            f"  mismatch {d.repository} {d.window} {d.measure}: API {d.api}, landed {d.landed}"
            for d in mismatched[:shown]
        ]
        if len(mismatched) > shown:
            lines.append(f"  … {len(mismatched) - shown} more in the run report")
        return lines + [f"  {note}" for note in self.notes]

    def as_dict(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "ok": self.ok,
            "differences": [asdict(d) for d in self.differences],
            "notes": self.notes,
            "unchecked": self.unchecked,
            "windows_confirmed_by_top_level": self.windows_confirmed,
            "statistics_rows": {
                "written_by_run": self.rows_written,
                "rechecked": self.rows_rechecked,
            },
        }


def read_windows(reports: Iterable[RunReport]) -> list[tuple[datetime, datetime]]:
    """The windows the runs of `reports` read, in order: those a reconciliation checks."""
    return sorted({r.read_range for r in reports if r.read_range})


def required_endpoint(ctx: ReadContext, resource: str) -> Endpoint:
    endpoint = endpoint_for(ctx, resource, "repository")
    if endpoint is None:
        raise ValueError(
            f"the {ctx.plan.edition.name} edition has no repository-level `{resource}` endpoint"
        )
    return endpoint


def repository_endpoint(spec: EditionSpec, resource: str) -> Endpoint | None:
    """The edition's repository-level `resource`, if it has one."""
    return next(
        (e for e in spec.endpoints if e.resource == resource and e.level == "repository"), None
    )


def repository_table(spec: EditionSpec, resource: str) -> str | None:
    """The table of the edition's repository-level `resource`, if it has one."""
    endpoint = repository_endpoint(spec, resource)
    return endpoint.table if endpoint is not None else None


def refreshing_list(spec: EditionSpec, resource: str) -> Endpoint | None:
    """The repository-level list whose items' changes change rows of statistics `resource`
    (counted by creation period), if any: its table, cursor and creation column."""
    return next(
        (
            e
            for e in spec.endpoints
            if e.level == "repository" and e.refreshes is not None and e.refreshes[0] == resource
        ),
        None,
    )


def measure(endpoint: Endpoint, name: str, body: Any) -> int:
    """The value of the endpoint's column `name` in an answer (its JSON path), 0 if none."""
    columns = {c.name: c for c in endpoint.columns}
    return int(columns[name].read(body, {}) or 0)
