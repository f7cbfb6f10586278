"""Authentication and permissions: a token instead of a password, a restricted user, and the
host's fatal answers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipelines.cli.exits import root_cause as cause_of
from simulator import Simulator
from sources.repo_analytics import FatalApiError
from tests.selfhosted.conftest import Loaded
from tests.selfhosted.truth import (
    KINDS,
    LATE_START,
    LEVEL_TABLES,
    LEVELS,
    Window,
    check_lists,
    check_primary_keys,
    check_statistics,
    contents,
    expected_commit_statistics,
    expected_scopes,
)
from tests.support.helpers import data_tables, run_with_log
from tests.support.loader import Loader

LIST_TABLES = tuple(LEVEL_TABLES[k][level] for k in KINDS for level in LEVELS) + (
    "server_commit_parents",
    "server_pull_request_reviewers",
    "server_pull_request_participants",
)


def test_bearer_token_loads_the_same_data(loaded: Loaded, tmp_path: Path) -> None:
    """A personal access token (Bearer) instead of basic credentials: the same rows."""
    loader = Loader(loaded.sim, tmp_path)
    result, log = run_with_log(
        loaded.sim,
        loader,
        token=loaded.sim.config.server_token,
        username=None,
        password=None,
        resources=list(KINDS),
    )
    assert not result.report.skips
    assert log and {e["auth"] for e in log} == {"bearer"}
    assert set(data_tables(loader)) == set(LIST_TABLES)
    assert contents(loader) == {t: loaded.first_tables[t] for t in LIST_TABLES}


def test_restricted_user_reads_only_its_project(loaded: Loaded, tmp_path: Path) -> None:
    """The restricted user may read only the first project: every level holds only its rows
    (statistics and exports too), the other project is never asked for and never skipped."""
    sim = loaded.sim
    info = sim.info()
    readable = frozenset(info["credentials"]["restricted"]["projects"])
    assert readable == {info["projects"][0]} and len(info["projects"]) > 1
    loader = Loader(sim, tmp_path)
    result, log = run_with_log(
        sim,
        loader,
        username="restricted",
        password="restricted-pass",
        resources=[*KINDS, "commit_statistics", "commit_exports"],
        start_date=LATE_START.isoformat(),
    )
    assert not result.report.skips and not result.report.notes
    assert all(e["status"] == 200 for e in log)
    other = set(info["projects"]) - readable
    assert not [e for e in log if any(f"/projects/{k}/" in e["path"] for k in other)]
    truth = loaded.truth
    window = Window(LATE_START, truth.clock, readable)
    scopes = expected_scopes(truth, window)
    assert scopes["project"] == set(readable)
    assert scopes["repository"] < loaded.scopes["repository"]
    check_lists(loader, truth, window, scopes)
    check_statistics(
        loader, "server_commit_statistics", expected_commit_statistics(truth, window, scopes)
    )
    for table in LIST_TABLES:
        keys = {k for (k,) in loader.rows(f'SELECT DISTINCT project_key FROM "{table}"')}
        assert keys == set(readable), table
    names = {p["name"] for p in truth.projects if p["key"] in readable}
    assert {p for (p,) in loader.rows("SELECT DISTINCT project FROM server_commit_exports")} == (
        names
    )
    check_primary_keys(loader)


@pytest.mark.parametrize(
    ("conditions", "overrides", "kind", "says"),
    [
        ({"licensed": False}, {}, "no_license", ("licence", "402")),
        ({"app_version": "5.1.0"}, {}, "app_missing", ("older than 5.2.0", "404")),
        ({}, {"password": "not-the-password"}, "credentials_refused", ("credentials", "401")),
    ],
)
def test_fatal_host_answers(
    make_sim: Callable[..., Simulator],
    tmp_path: Path,
    conditions: dict[str, Any],
    overrides: dict[str, Any],
    kind: str,
    says: tuple[str, ...],
) -> None:
    """No licence, an app older than 5.2.0, a wrong password: the run stops with a message
    saying which, writes no table, and never shows the password."""
    sim = make_sim(edition="server")
    sim.set_conditions(**conditions)
    loader = Loader(sim, tmp_path)
    with pytest.raises(Exception) as caught:
        loader.load(**overrides)
    cause = cause_of(caught.value)
    assert isinstance(cause, FatalApiError), repr(cause)
    assert cause.kind == kind
    message = str(cause)
    assert all(word in message for word in says), message
    assert "not-the-password" not in message and sim.config.password not in message
    assert not loader.db_file.exists() or not data_tables(loader)
