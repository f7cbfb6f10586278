"""New scopes get their history: a backfill records the scopes each window read, and the next
plain backfill reads finished windows again for the scopes that appeared since.

A repository the user may not read while the range is backfilled (the self-hosted global
lists leave it out, as the spec says) and is granted afterwards: the next backfill reads the
windows where it is active again, whole (every level's lists hold it from now on), and every
table equals the truth. A user a window did not know: that user's lists alone are read for
it. Real simulators over HTTP, the real command line on both destinations.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import deltalake
import dlt
import duckdb

from pipelines.runs.window_ledger import commit_state
from sources.repo_analytics import READ_SCOPES_KEY, WINDOW_MARKER
from tests.runs.test_backfill import CLOCK, SINCE
from tests.support.loader import DATASET, Loader
from tests.support.repairs import assert_equals_truth, log_since, run

BACKFILL = (
    "backfill",
    "--since",
    SINCE.date().isoformat(),
    "--until",
    CLOCK.isoformat(),
    "--window-days",
    "30",
    "--page-size",
    "50",
)


def scope_requests(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Requests of a scope's lists, statistics or exports: not of the top level (which a
    rerun's discovery reads)."""
    return [e for e in log if not e["endpoint"].endswith((".global", ".workspace"))]


def test_a_repository_made_readable_after_the_backfill_is_complete_after_the_next_backfill(
    make_sim: Any, tmp_path: Path, destination: str
) -> None:
    """The user lacks REPO_READ on one repository while the range is backfilled: nothing of
    it lands, exit 0. Granted, the same command says one repository appeared, reads again
    the windows where it is active (all of them on this host), exits 0, and every table of
    every level equals the truth. A third run reads no scope."""
    sim = make_sim(edition="server")
    repository = sorted(sim.truth("repositories"), key=lambda r: r["slug"])[1]
    slug = repository["slug"]
    sim.set_conditions(forbidden=[slug])
    first = run(tmp_path, sim, destination, *BACKFILL)
    assert first.returncode == 0, first.stdout + first.stderr
    loader = Loader(sim, tmp_path, destination)
    assert not loader.rows(f"SELECT 1 FROM server_commits WHERE repository_slug = '{slug}'")

    sim.set_conditions(forbidden=[])
    before = sim.requests()["total"]
    granted = run(tmp_path, sim, destination, *BACKFILL)
    assert granted.returncode == 0, granted.stdout + granted.stderr
    assert (
        "backfill: scopes that appeared since finished windows were read: 1 repository; 5 "
        "windows read again whole (a new repository is in every level's lists), 0 for their "
        "new users alone" in granted.stdout.splitlines()
    ), granted.stdout
    key = f"{repository['project']['key']}/{slug}"
    assert f"/repos/{slug}/" in "".join(e["path"] for e in log_since(sim, before))
    assert_equals_truth(loader, sim, SINCE)
    assert loader.rows(f"SELECT count(*) FROM server_commits WHERE repository_slug = '{slug}'")[0][
        0
    ] == sum(
        1
        for c in sim.truth("commits")
        if f"{c['repository']['project']['key']}/{c['repository']['slug']}" == key
        and SINCE.isoformat() <= c["authorTimestamp"].replace("Z", "+00:00") < CLOCK.isoformat()
    )

    before = sim.requests()["total"]
    third = run(tmp_path, sim, destination, *BACKFILL)
    assert third.returncode == 0, third.stdout + third.stderr
    assert "appeared" not in third.stdout
    assert not scope_requests(log_since(sim, before))


def forget_user(folder: Path, destination: str, uuid: str) -> None:
    """What a backfill that ran before the user existed left: the user in no window's record
    of the scopes it read (the pipeline's state, in its working folder and the destination),
    and no row of the user-level tables."""
    if destination == "duckdb":
        target: Any = dlt.destinations.duckdb(str(folder / "data.duckdb"))
    else:
        target = dlt.destinations.filesystem(bucket_url=str(folder / "lake"))
    pipeline = dlt.pipeline(
        "repo_analytics",
        destination=target,
        dataset_name=DATASET,
        pipelines_dir=str(folder / "pipelines"),
    )

    def change(resources: dict[str, Any]) -> bool:
        for scopes in resources[WINDOW_MARKER][READ_SCOPES_KEY].values():
            scopes["user"].remove(uuid)
        return True

    commit_state(pipeline, change, 0)
    for table in ("cloud_user_commits", "cloud_user_pull_requests"):
        if destination == "duckdb":
            with duckdb.connect(str(folder / "data.duckdb")) as con:
                con.execute(f"DELETE FROM {DATASET}.{table} WHERE read_for_user_uuid = ?", [uuid])
        else:
            deltalake.DeltaTable(str(folder / "lake" / DATASET / table)).delete(
                f"read_for_user_uuid = '{uuid}'"
            )


def test_a_user_a_window_did_not_know_is_read_alone(
    make_sim: Any, tmp_path: Path, destination: str
) -> None:
    """Windows recorded without one user of the cloud user list (as a backfill that ran before
    the user existed leaves them), the user's rows absent: the next backfill says one user
    appeared, reads only that user's lists for each window (no other scope), exits 0, and
    every table equals the truth."""
    sim = make_sim(edition="cloud")
    first = run(tmp_path, sim, destination, *BACKFILL)
    assert first.returncode == 0, first.stdout + first.stderr
    uuid = sorted(u["uuid"] for u in sim.truth("users"))[0]
    forget_user(tmp_path, destination, uuid)
    loader = Loader(sim, tmp_path, destination)
    assert not loader.rows(f"SELECT 1 FROM cloud_user_commits WHERE read_for_user_uuid = '{uuid}'")

    before = sim.requests()["total"]
    again = run(tmp_path, sim, destination, *BACKFILL)
    assert again.returncode == 0, again.stdout + again.stderr
    assert (
        "backfill: scopes that appeared since finished windows were read: 1 user; 0 windows "
        "read again whole (a new repository is in every level's lists), 4 for their new users "
        "alone" in again.stdout.splitlines()
    ), again.stdout
    asked = scope_requests(log_since(sim, before))
    users = [e for e in asked if ".user" in e["endpoint"]]
    assert {e["endpoint"].split(".")[0] for e in users} == {"commits", "pull-requests"}
    assert all(f"/users/{uuid}/" in e["path"] for e in users), users[:2]
    # besides the user's lists, only the user list (the directory the users come from)
    assert all(e["endpoint"].startswith("users.list.") for e in asked if e not in users)
    assert_equals_truth(loader, sim, SINCE)
