"""The API's side of a backfill's reconciliation, asked while its last window loads.

After a backfill's last request come its last window's load and the views: most of a second
in which no request is open. The reconciliation then asked the API's statistics of every
window, and of every repository and window where the top level cannot confirm a family (the
cloud's zone-less commit dates): hundreds of requests on a cloud year
(`docs/decisions/reconciliation-reads.md`). Those answers depend on the windows and the
repositories only, not on what landed, so they are asked in that second: `start` is called
once the last window is read.
The reconciliation takes each answer it was about to ask for (`ask`) and asks for what
was not foreseen (repositories an earlier run landed). The repositories foreseen are those
the run's windows read at the repository level, of the family whose table names the
reconciliation's repositories; any other answer would be a request nobody reads, so none is
asked.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pipelines.reconcile.model import EditionChecks, Measures, edition_checks, read_windows
from pipelines.reconcile.windows import api_statistics, top_level_families
from sources.repo_analytics import EDITION_SPECS, RunReport
from sources.repo_analytics.reading.context import edition_client
from sources.repo_analytics.reading.plan import build_plan
from sources.repo_analytics.reading.readers import ReadContext

# whose statistics (None: the top level), which window, which family
AnswerKey = tuple[tuple[str, ...] | None, datetime, datetime, str]
FAMILIES = ("commits", "pull_requests")


def one_family(family: str) -> Measures:
    return Measures(family == "commits", family == "pull_requests")


def families_of(measures: Measures) -> list[str]:
    return [f for f in FAMILIES if getattr(measures, f)]


@dataclass
class StatisticsPrefetch:
    """The statistics a backfill's reconciliation will ask for, asked ahead in the
    background (`concurrency` at once); `close` cancels what was not asked yet."""

    source_args: dict[str, Any]
    _pool: ThreadPoolExecutor | None = None
    # each family's answer apart: the reconciliation may ask for one family or both
    _answers: dict[AnswerKey, Future[tuple[Any, Any] | str]] = field(default_factory=dict)

    def start(self, reports: list[RunReport]) -> None:
        """Ask for the statistics of the windows the runs of `reports` read, with the
        repositories they planned."""
        spec = EDITION_SPECS.get(str(self.source_args.get("edition")))
        checks = edition_checks(spec) if spec is not None else None
        windows = read_windows(reports)
        if spec is None or checks is None or not windows:
            return
        plan = build_plan(spec, self.source_args)
        if "repository" not in plan.levels:
            return
        client = edition_client(plan, RunReport())
        ctx = ReadContext(plan, client, client.report)
        read = Measures("commits" in plan.resources, "pull_requests" in plan.resources)
        top = top_level_families(ctx, checks, read) if plan.repositories is None else None
        # per repository: the families the top level cannot confirm (a family it can is
        # asked per repository only where its totals differ, which is not known yet)
        each = Measures(
            read.commits and not (top and top.commits),
            read.pull_requests and not (top and top.pull_requests),
        )
        family = "commits" if read.commits else "pull_requests"
        repositories = sorted(
            {
                tuple(key.split("/"))
                for report in reports
                for key in report.planned.get(f"{family}.repository", ())
            }
        )
        jobs: list[tuple[tuple[str, ...] | None, datetime, datetime, Measures]] = []
        if top is not None and (top.commits or top.pull_requests):
            jobs += [(None, start, end, top) for start, end in windows]
        if each.commits or each.pull_requests:
            jobs += [(names, start, end, each) for start, end in windows for names in repositories]
        if not jobs:
            return
        self._pool = ThreadPoolExecutor(plan.concurrency, thread_name_prefix="reconcile-ahead")
        for names, start, end, families in jobs:
            for family in families_of(families):
                self._answers[names, start, end, family] = self._pool.submit(
                    api_statistics, ctx, checks, one_family(family), names, start, end
                )

    def ask(
        self,
        ctx: ReadContext,
        checks: EditionChecks,
        measures: Measures,
        names: tuple[str, ...] | None,
        start: datetime,
        end: datetime,
    ) -> tuple[Any, Any] | str:
        """`api_statistics`, each family's answer taken from those asked ahead (once) where
        it was, the others asked now; a failure asking ahead is raised here."""
        answers: dict[str, Any] = {}
        later = []
        for family in families_of(measures):
            future = self._answers.pop((names, start, end, family), None)
            if future is None:
                later.append(family)
                continue
            answer = future.result()
            if isinstance(answer, str):  # the scope could not be read: why
                return answer
            answers[family] = answer[FAMILIES.index(family)]
        if later:
            rest = Measures("commits" in later, "pull_requests" in later)
            answer = api_statistics(ctx, checks, rest, names, start, end)
            if isinstance(answer, str):
                return answer
            answers.update((family, answer[FAMILIES.index(family)]) for family in later)
        return answers.get("commits"), answers.get("pull_requests")

    def close(self) -> None:
        """Cancel the questions not asked yet and wait for those under way."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
