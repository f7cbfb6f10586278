"""A CSV export that repeats a row (a host's faulty export) lands each row once, on every
destination: the run drops the repeat (an upsert whose rows repeat a key fails on Delta tables,
and a merge into DuckDB inserts the staged rows as they are), holding the export's keys as
16-byte digests in Arrow arrays (`sources/repo_analytics/arrow/export_keys.py`).

A real simulator whose `repeat` fault sends an export's first row again after its last; the
rows are read back from the destination and compared with the host's truth.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

from simulator import Simulator
from tests.support.loader import Loader


def test_an_export_that_repeats_a_row_lands_it_once(
    make_sim: Any, tmp_path: Any, destination: str
) -> None:
    sim: Simulator = make_sim(edition="server")
    sim.set_faults({"rules": [{"kind": "repeat", "rate": 1, "match": "commits.csv.global"}]})
    loader = Loader(sim, tmp_path, destination)

    loader.load(levels="global", resources="commit_exports")

    repeated = [e for e in sim.requests()["log"] if e["fault"] == "repeat"]
    assert len(repeated) == 1
    rows = loader.rows(
        "SELECT project, repository, commit_hash, lines_added, lines_deleted "
        "FROM server_commit_exports"
    )
    keys = Counter((project, repository, sha) for project, repository, sha, *_ in rows)
    assert keys and max(keys.values()) == 1
    start = datetime(2026, 3, 1, tzinfo=UTC)
    now = datetime.fromtimestamp(sim.info()["now"], UTC)
    truth = {
        c["id"]: (c["linesOfCode"]["added"], c["linesOfCode"]["deleted"])
        for c in sim.truth("commits")
        if start <= datetime.fromisoformat(c["authorTimestamp"].replace("Z", "+00:00")) < now
    }
    assert {sha: (added, deleted) for _, _, sha, added, deleted in rows} == truth
