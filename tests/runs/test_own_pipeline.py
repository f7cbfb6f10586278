"""The source in a user's own dlt pipeline, the verified-sources way (docs/own-pipeline.md).

Only dlt's public API and our source: `dlt.pipeline(...).run(repo_analytics())` with the
settings in the environment (as `.dlt/` would give them) or as keyword arguments, into DuckDB
and into Delta tables; run twice, the commit table holds every commit of the simulator's truth
once, with its author, line counts and parent count.
The tables are read back with DuckDB and deltalake, as a BI tool would.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import deltalake
import dlt
import duckdb
import pytest

from simulator import Simulator
from sources.repo_analytics import ConfigError, repo_analytics

START, END = "2026-03-01", "2026-06-01T00:00:00Z"  # the tiny host's whole history (FIXED_NOW)


def settings_of(sim: Simulator) -> dict[str, str]:
    """A user's settings for `sim`: its repositories' commits, over the whole history."""
    info = sim.info()
    settings = {
        "edition": sim.config.edition,
        "base_url": sim.base_url,
        "start_date": START,
        "end_date": END,
        "levels": "repository",
        "resources": "commits",
    }
    if sim.config.edition == "cloud":
        settings.update(workspace=info["workspace"], token=sim.config.token)
    else:
        settings.update(username=sim.config.username, password=sim.config.password)
    return settings


def truth_keys(sim: Simulator) -> Counter[tuple[Any, ...]]:
    """Each commit of the simulator's truth: its natural key, then its author, line counts and
    parent count (every commit exactly once)."""
    if sim.config.edition == "cloud":
        rows = [
            (
                c["repository"]["slug"],
                c["hash"],
                c["author"]["uuid"],
                c["lines"]["added"],
                c["lines"]["deleted"],
                len(c["parents"]),
            )
            for c in sim.truth("commits")
        ]
    else:
        rows = [
            (
                c["repository"]["project"]["key"],
                c["repository"]["slug"],
                c["id"],
                c["author"]["emailAddress"],
                c["linesOfCode"]["added"],
                c["linesOfCode"]["deleted"],
                len(c["_sim"]["parents"]),
            )
            for c in sim.truth("commits")
        ]
    return Counter(rows)


def stored_keys(folder: Path, destination: str, edition: str) -> Counter[tuple[Any, ...]]:
    """The stored commit table's rows as `truth_keys` has them, read as a BI tool reads it."""
    table = f"{edition}_commits"
    values = "lines_added, lines_deleted, parent_count"
    columns = (
        f"repository_slug, hash, author_uuid, {values}"
        if edition == "cloud"
        else f"project_key, repository_slug, id, author_email, {values}"
    )
    con = duckdb.connect()
    if destination == "duckdb":
        con.execute(f"ATTACH '{folder / 'own.duckdb'}' AS own (READ_ONLY)")
        rows = con.execute(f"SELECT {columns} FROM own.analytics.{table}").fetchall()
    else:
        delta = deltalake.DeltaTable(str(folder / "lake" / "analytics" / table))
        con.register("stored", delta.to_pyarrow_table())
        rows = con.execute(f"SELECT {columns} FROM stored").fetchall()
    return Counter(tuple(row) for row in rows)


def own_pipeline(folder: Path, destination: str) -> dlt.Pipeline:
    target: Any = (
        dlt.destinations.duckdb(str(folder / "own.duckdb"))
        if destination == "duckdb"
        else dlt.destinations.filesystem(bucket_url=str(folder / "lake"))
    )
    return dlt.pipeline(
        "own_analytics",
        destination=target,
        dataset_name="analytics",
        pipelines_dir=str(folder / "pipelines"),
    )


@pytest.mark.parametrize("destination", ["duckdb", "delta"])
@pytest.mark.parametrize("given", ["environment", "arguments"])
def test_a_users_pipeline_loads_every_key_once(
    cloud_sim: Simulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    destination: str,
    given: str,
) -> None:
    """Settings from the environment (`SOURCES__REPO_ANALYTICS__<KEY>`) or as arguments; the
    second run merges on the natural keys: every commit of the truth stored once."""
    settings = settings_of(cloud_sim)
    if given == "environment":
        for key, value in settings.items():
            monkeypatch.setenv(f"SOURCES__REPO_ANALYTICS__{key.upper()}", value)
    pipeline = own_pipeline(tmp_path, destination)
    options = {"table_format": "delta"} if destination == "delta" else {}
    for _ in range(2):
        source = repo_analytics() if given == "environment" else repo_analytics(**settings)
        info = pipeline.run(source, **options)
        assert not info.has_failed_jobs
    expected = truth_keys(cloud_sim)
    assert len(expected) > 100
    assert stored_keys(tmp_path, destination, "cloud") == expected


def test_a_users_pipeline_of_the_self_hosted_edition(server_sim: Simulator, tmp_path: Path) -> None:
    """The self-hosted edition the same way, into DuckDB, run twice."""
    pipeline = own_pipeline(tmp_path, "duckdb")
    for _ in range(2):
        pipeline.run(repo_analytics(**settings_of(server_sim)))
    expected = truth_keys(server_sim)
    assert len(expected) > 100
    assert stored_keys(tmp_path, "duckdb", "server") == expected


def test_a_name_that_is_no_setting_is_refused(cloud_sim: Simulator, tmp_path: Path) -> None:
    """A misspelt setting is named, with the valid ones, before any request."""
    own_pipeline(tmp_path, "duckdb")
    before = cloud_sim.requests()["total"]
    with pytest.raises(ConfigError) as raised:
        repo_analytics(**settings_of(cloud_sim), start_dates=START)
    assert "`start_dates`" in str(raised.value)
    assert "start_date" in str(raised.value) and "base_url" in str(raised.value)
    assert cloud_sim.requests()["total"] == before
