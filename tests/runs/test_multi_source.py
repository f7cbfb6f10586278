"""Several hosts and workspaces in one dataset (README: Several hosts or workspaces in one
dataset): two simulators with the same seed, so the same repository slugs, loaded into one
DuckDB file (or one set of Delta tables) on a pipeline each. Every row names its `source`;
each source's rows equal its own host's truth, a nightly run of each overwrites nothing of the
other, the canonical views show both, and each reconciles. A pipeline pointed at another
source than its state's stops; a dataset of the version before the column is taken over by
its pipeline's first run without a duplicate.

Real simulators over HTTP, real pipeline runs under tmp_path; expected values from the
simulators' ground truth.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import deltalake
import duckdb
import pytest

from pipelines.reconcile.check import Reconciliation, reconcile, reconcile_pipeline
from pipelines.runs.backfill import run_backfill
from pipelines.runs.load import LoadResult
from simulator import Simulator
from sources.repo_analytics.reading.origin import source_identity
from tests.cloud import truth as cloud
from tests.runs.test_backfill import cli_env, run_cli, source_args
from tests.selfhosted import truth as server
from tests.selfhosted.request_log import check_exports_equal_served
from tests.support.helpers import DAY, GRAIN, as_utc, count, data_tables, period_floor, select
from tests.support.loader import DATASET, Loader

PAIRS = {
    "cloud+cloud": (("cloud", "team-a"), ("cloud", "team-b")),
    "cloud+server": (("cloud", "team-a"), ("server", None)),
}


def source_of(sim: Simulator) -> str:
    """The README's value of `source`: host:port of the base URL, and the cloud workspace."""
    host = urlsplit(sim.base_url).netloc
    return f"{host}/{sim.info()['workspace']}" if sim.config.edition == "cloud" else host


@dataclass
class Host:
    """One simulated host loading the shared dataset on a pipeline of its own."""

    sim: Simulator
    loader: Loader  # reads the whole dataset
    log: list[dict[str, Any]]  # the API requests of its runs

    @property
    def source(self) -> str:
        return source_of(self.sim)

    @property
    def mine(self) -> Loader:
        """The dataset as if this host had loaded it alone: its rows only."""
        return self.loader.of_source(self.source)

    def load(self, **overrides: Any) -> LoadResult:
        before = self.sim.requests()["total"]
        result = self.loader.load(**overrides)  # at the host's clock
        self.log += self.sim.requests(since=before)["log"]
        assert not result.report.skips
        assert result.report.source == self.source
        return result

    def reconciled(self, result: LoadResult) -> Reconciliation:
        assert result.report.read_range is not None
        args = self.loader.source_args(now=result.report.read_range[1])
        if self.loader.destination == "duckdb":
            return reconcile(
                str(self.loader.db_file),
                DATASET,
                [result.report.read_range],
                args,
                result.load_ids,
            )
        return reconcile_pipeline(
            self.loader.pipeline(), [result.report.read_range], args, result.load_ids
        )

    def equals_truth(self, after_nightly: bool) -> None:
        if self.sim.config.edition == "cloud":
            cloud_equals_truth(self.mine, cloud.Truth.read(self.sim), after_nightly)
        else:
            server_equals_truth(self.mine, server.Truth.read(self.sim), self.sim, self.log)


def cloud_equals_truth(loader: Loader, truth: cloud.Truth, after_nightly: bool) -> None:
    window = cloud.Window(cloud.START, truth.clock)
    cloud.check_everything(loader, truth, window)  # lists, children, users, unique keys
    cloud.check_pr_statistics(loader, truth, window)
    # a nightly run re-reads the periods of its look-back: the older ones are as first read
    reread = period_floor(truth.clock - DAY - cloud.LOOKBACK) if after_nightly else None
    cloud.check_change_statistics(loader, truth, window, from_day=reread)


def server_equals_truth(
    loader: Loader, truth: server.Truth, sim: Simulator, log: list[dict[str, Any]]
) -> None:
    window = server.Window(server.START, truth.clock)
    scopes = server.expected_scopes(truth, window)
    for kind in server.KINDS:
        for level in server.LEVELS:
            server.check_list(loader, truth, window, kind, level, scopes)
    server.check_parents(loader, truth, window)
    for which in ("reviewers", "participants"):
        server.check_people(loader, truth, window, which)
    server.check_primary_keys(loader)
    server.check_statistics(
        loader,
        "server_commit_statistics",
        server.expected_commit_statistics(truth, window, scopes),
    )
    older = {  # creation periods before the start, read again for changed pull requests
        (level, scope, as_utc(low))
        for level, scope, low in select(
            loader, "server_pull_request_statistics", ("level", "scope", "period_start")
        )
        if as_utc(low) < window.start
    }
    server.check_statistics(
        loader,
        "server_pull_request_statistics",
        {
            **server.expected_pr_statistics(truth, window, scopes),
            **server.pr_statistics_rows(truth, window, older, GRAIN),
        },
    )
    check_exports_equal_served(loader, sim, log, sim.basic_auth)


def start_hosts(
    make_sim: Callable[..., Simulator], tmp_path: Path, pair: str, destination: str
) -> list[Host]:
    hosts = []
    for index, (edition, workspace) in enumerate(PAIRS[pair]):
        fields = {"workspace": workspace} if workspace else {}
        sim = make_sim(edition=edition, **fields)  # the same seed: the same slugs
        name = f"repo_analytics_{edition}_{index}"
        hosts.append(Host(sim, Loader(sim, tmp_path, destination, pipeline_name=name), []))
    slugs = [{r["slug"] for r in h.sim.truth("repositories")} for h in hosts]
    assert slugs[0] == slugs[1]
    return hosts


def assert_sources(loader: Loader, sources: set[str]) -> None:
    """Every row of every table of the whole dataset names one of `sources` (none NULL)."""
    for table in sorted(data_tables(loader)):
        found = {s for (s,) in loader.rows(f'SELECT DISTINCT source FROM "{table}"')}
        assert found and found <= sources, (table, found)


def test_two_sources_in_one_dataset_then_a_nightly_each(
    make_sim: Callable[..., Simulator], tmp_path: Path, pair: str
) -> None:
    """Both complete against their own truth in one DuckDB file; after a day on each host and
    a nightly run each, still both, nothing overwritten, no duplicates; the canonical views
    show both sources and each reconciles."""
    hosts = start_hosts(make_sim, tmp_path, pair, "duckdb")
    sources = {h.source for h in hosts}
    assert len(sources) == 2
    firsts = [h.load() for h in hosts]
    for host, first in zip(hosts, firsts, strict=True):
        host.equals_truth(after_nightly=False)
        check = host.reconciled(first)
        assert check.ok and check.checked > 0, check.summary()
    assert_sources(hosts[0].loader, sources)
    shared = "cloud_commits"  # both hosts wrote the same slugs into it when both are cloud
    if pair == "cloud+cloud":
        by_source = dict(
            hosts[0].loader.rows(f"SELECT source, count(*) FROM {shared} GROUP BY ALL")
        )
        assert by_source == {h.source: count(h.mine, shared) for h in hosts}
        assert all(by_source.values())

    for host in hosts:
        assert host.sim.advance(days=1)["new_repositories"]
    nightlies = [h.load() for h in hosts]
    for host, nightly in zip(hosts, nightlies, strict=True):
        host.equals_truth(after_nightly=True)
        check = host.reconciled(nightly)
        assert check.ok and check.checked > 0, check.summary()
    assert_sources(hosts[0].loader, sources)

    views = hosts[0].loader
    for view, table in (("commits", "commit_id"), ("pull_requests", "pull_request_id")):
        shown = dict(views.rows(f"SELECT source, count(DISTINCT {table}) FROM {view} GROUP BY 1"))
        assert set(shown) == sources, view
    for host in hosts:
        commits = count(host.mine, f"{host.sim.config.edition}_commits")
        (in_view,) = views.rows(f"SELECT count(*) FROM commits WHERE source = '{host.source}'")[0]
        assert in_view == commits
    daily = {s for (s,) in views.rows("SELECT DISTINCT source FROM daily_commit_activity")}
    assert daily == sources


@pytest.fixture(params=list(PAIRS))
def pair(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_two_sources_in_delta_tables(make_sim: Callable[..., Simulator], tmp_path: Path) -> None:
    """The Parquet output: two cloud workspaces of the same slugs, each complete against its
    truth, each reconciled (Delta tables upsert on the key led by `source`)."""
    hosts = start_hosts(make_sim, tmp_path, "cloud+cloud", "parquet")
    results = [h.load() for h in hosts]
    for host, result in zip(hosts, results, strict=True):
        host.equals_truth(after_nightly=False)
        check = host.reconciled(result)
        assert check.ok and check.checked > 0, check.summary()
    assert_sources(hosts[0].loader, {h.source for h in hosts})


def test_a_pipeline_of_another_source_stops(
    make_sim: Callable[..., Simulator], tmp_path: Path
) -> None:
    """A run pointed at another source than its pipeline's state was made for stops before any
    request with one line naming --pipeline-name (exit 2), and writes nothing; on a pipeline of
    its own it loads."""
    first, other = make_sim(edition="cloud", workspace="team-a"), make_sim(edition="server")
    dates = ("--start-date", "2026-05-20", "--end-date", "2026-06-01T00:00:00+00:00")
    loaded = run_cli(tmp_path, cli_env(first), "--pipeline-name", "shared", "load", *dates)
    assert loaded.returncode == 0, loaded.stderr
    db_file = tmp_path / "data.duckdb"
    before = tables_of(db_file)
    requests = other.requests()["total"]

    refused = run_cli(tmp_path, cli_env(other), "--pipeline-name", "shared", "load", *dates)
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("repo-analytics: config error: "), lines
    assert "--pipeline-name" in lines[0] and source_of(first) in lines[0]
    assert source_of(other) in lines[0]
    assert other.requests()["total"] == requests
    assert tables_of(db_file) == before

    own = run_cli(tmp_path, cli_env(other), "--pipeline-name", "other", "load", *dates)
    assert own.returncode == 0, own.stderr
    for name, sim in (("shared", first), ("other", other)):
        shown = run_cli(tmp_path, cli_env(sim), "--pipeline-name", name, "state")
        assert f"source: {source_of(sim)}" in shown.stdout.splitlines(), shown.stdout
    sources = {s for (s,) in query(db_file, "SELECT DISTINCT source FROM server_commits")}
    assert sources == {source_of(other)}
    assert tables_of(db_file)["cloud_commits"] == before["cloud_commits"]


def query(db_file: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db_file), read_only=True) as con:
        con.execute(f"SET schema '{DATASET}'")
        return con.execute(sql).fetchall()


def tables_of(db_file: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table of the dataset, dlt's loads and state included, in full."""
    names = [
        n
        for (n,) in query(
            db_file,
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            f"'{DATASET}' AND table_type = 'BASE TABLE'",
        )
    ]
    return {n: query(db_file, f'SELECT * FROM "{n}" ORDER BY ALL') for n in names}


def make_old_shaped(loader: Loader) -> None:
    """The dataset and pipeline as the version before `source` left them: no column in the
    tables (nor the staging copies), none in dlt's stored schema, no source in the state."""
    pipeline = loader.pipeline()
    if loader.destination == "duckdb":
        drop_duckdb_sources(loader)
    else:
        drop_delta_sources(loader)
    schema = pipeline.default_schema
    for table in schema.data_tables(include_incomplete=True):
        table["columns"].pop("source", None)
    schema._bump_version()
    pipeline.schemas.save_schema(schema)
    with pipeline.managed_state(extract_state=True) as state:
        state["sources"]["repo_analytics"].pop("source")  # type: ignore[typeddict-item]
    pipeline.normalize()
    pipeline.load()  # the state, and the schema without the column, into the destination
    for pinned in (loader.path / "schemas" / "import").glob("*"):
        pinned.unlink()  # the older version's pin had no column either


def drop_duckdb_sources(loader: Loader) -> None:
    with duckdb.connect(str(loader.db_file)) as con:
        for (view,) in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ? "
            "AND table_type = 'VIEW'",
            [DATASET],
        ).fetchall():
            con.execute(f'DROP VIEW {DATASET}."{view}"')  # the new run makes them again
        for schema, table in con.execute(
            "SELECT table_schema, table_name FROM information_schema.columns WHERE "
            "column_name = 'source' AND table_schema IN (?, ?)",
            [DATASET, f"{DATASET}_staging"],
        ).fetchall():
            con.execute(f'ALTER TABLE {schema}."{table}" DROP COLUMN source')


def drop_delta_sources(loader: Loader) -> None:
    """Each Delta table written again without the column (a new version of the table)."""
    for folder in sorted((loader.lake / DATASET).iterdir()):
        if (folder / "_delta_log").is_dir():
            data = deltalake.DeltaTable(str(folder)).to_pyarrow_table()
            deltalake.write_deltalake(
                str(folder),
                data.drop_columns(["source"]),
                mode="overwrite",
                schema_mode="overwrite",
            )


def test_a_dataset_of_the_older_version_is_taken_over(
    make_sim: Callable[..., Simulator], tmp_path: Path, destination: str
) -> None:
    """A dataset written before rows named their source: the first run of its pipeline fills
    the column with its source, and re-read rows replace the old ones (no duplicate)."""
    sim = make_sim(edition="cloud")
    host = Host(sim, Loader(sim, tmp_path, destination), [])
    host.load()
    make_old_shaped(host.loader)
    assert "source" not in {
        c for (c,) in host.loader.rows("SELECT column_name FROM (DESCRIBE cloud_commits)")
    }
    rows = {t: count(host.loader, t) for t in data_tables(host.loader)}

    result = host.load()  # the same clock: every row of its look-back read again
    assert {t: count(host.loader, t) for t in data_tables(host.loader)} == rows
    for table in rows:
        assert host.loader.rows(f'SELECT DISTINCT source FROM "{table}"') == [(host.source,)]
    host.equals_truth(after_nightly=False)
    check = host.reconciled(result)
    assert check.ok and check.checked > 0, check.summary()
    state = host.loader.pipeline().state["sources"]["repo_analytics"]
    assert state["source"] == host.source  # type: ignore[typeddict-item]


def test_a_dataset_of_the_older_version_is_taken_over_by_a_backfill(
    make_sim: Callable[..., Simulator], tmp_path: Path, destination: str
) -> None:
    """The same dataset taken over by a backfill of several windows (only the first window
    read looks for tables without the column): every row names the source, no row twice,
    and the tables equal the truth."""
    sim = make_sim(edition="cloud")
    host = Host(sim, Loader(sim, tmp_path, destination), [])
    host.load()
    make_old_shaped(host.loader)
    rows = {t: count(host.loader, t) for t in data_tables(host.loader)}

    clock = datetime.fromtimestamp(sim.info()["now"], UTC)
    result = run_backfill(
        host.loader.pipeline(),
        cloud.START,
        clock,
        20,
        now=clock,
        **source_args(host.loader),
    )
    assert len(result.windows) > 2 and not any(w.resumed for w in result.windows)
    assert {t: count(host.loader, t) for t in data_tables(host.loader)} == rows
    for table in rows:
        assert host.loader.rows(f'SELECT DISTINCT source FROM "{table}"') == [(host.source,)]
    host.equals_truth(after_nightly=False)


def test_source_of_a_base_url() -> None:
    """host[:port][/path] and the workspace: no scheme, credentials, query, trailing slash
    nor default port (README: Several hosts or workspaces in one dataset)."""
    assert source_identity("https://bob:hunter2@Analytics.Example.com:443/bb/?x=1#y") == (
        "analytics.example.com/bb"
    )
    assert source_identity("http://127.0.0.1:8080/", "team-a") == "127.0.0.1:8080/team-a"
    assert source_identity("http://[::1]:7990", None) == "[::1]:7990"
    assert source_identity("http://analytics.example.com:80") == "analytics.example.com"


def test_a_trailing_slash_is_the_same_source(
    make_sim: Callable[..., Simulator], tmp_path: Path
) -> None:
    """`base_url` with and without its trailing slash: one source, one row per key."""
    sim = make_sim(edition="cloud")
    loader = Loader(sim, tmp_path)
    users = len(sim.truth("users"))
    for base_url in (sim.base_url, sim.base_url + "/"):
        result = loader.load(base_url=base_url, resources="users")
        assert result.report.source == source_of(sim)
        assert loader.rows("SELECT source, count(*) FROM cloud_users GROUP BY ALL") == [
            (source_of(sim), users)
        ]
