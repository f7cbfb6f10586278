"""A year's backfill side by side with the fetch limit, dlt's `rest_api` peer and nightly runs.

Usage:
    python bench/bench_year.py [--size small] [--edition cloud|server]
                               [--workloads lists,defaults] [--repeat 1] [--concurrency 4]
                               [--window-days N] [--latency-ms MS]
                               [--contenders ours-duckdb,limit,ours-parquet,peer,nightly]
                               [--no-peer] [--record | --out FILE.json]

The benchmark of record is a host across a network: every answer of the simulator held 50 ms
(`--latency-ms 50`), ours against the raw replay of its own request log through the same
host, default concurrency, one command line per host and workload:

    python bench/bench_year.py --latency-ms 50 --contenders ours-duckdb,limit --repeat 3 \
        --edition cloud --size medium --workloads lists --record
    python bench/bench_year.py --latency-ms 50 --contenders ours-duckdb,limit --repeat 3 \
        --edition cloud --size small --workloads defaults --record
    python bench/bench_year.py --latency-ms 50 --contenders ours-duckdb,limit --repeat 3 \
        --edition server --size small --workloads defaults --record

Results go to `bench/local/` (not tracked) unless `--record` writes them to `bench/results/`
(or `--out` names the file).

Run on demand (pytest does not collect it). The benchmark issue 11 asks for: one command, one
simulator process (`repo-analytics sim`, started as a separate process with its clock at the
start of today, UTC, so every contender of a run reads the same data, and the backfill ends
where a user's `--until <today>` does: within the look-back of now, so it seeds the nightly
cursors and `nightly-0` is the first nightly a user gets; `--now EPOCH` pins another clock --
one older than the look-back leaves `nightly-0` re-reading `start_date`'s 30 days), every
contender in a subprocess of its own, so that
its wall time, CPU seconds (user + sys, from `os.wait4`) and peak RSS are its own. Per workload
and repeat (after one uncounted backfill of ours per workload that warms the simulator up,
`--no-warm-up` leaves it out), in an order that alternates between repeats:

- `ours-duckdb`: `repo-analytics backfill` of the year before the simulator's clock into a
  fresh DuckDB file (default window size unless `--window-days` says otherwise,
  reconciliation included, as a user runs it); the simulator's request log of this run is
  collected while it runs;
- `limit`: that request log replayed -- same paths, parameters, Accept header and concurrency
  (`--concurrency`, ours' default 4) -- with one `requests.Session` per thread and
  `orjson.loads` per body (CSV bodies are only counted), nothing else;
- `ours-parquet`: the same backfill into Delta tables (`--destination parquet`);
- `peer` (workload `lists` only): dlt's generic `rest_api` source configured in the documented
  way for the same list endpoints (repository-level commits and pull requests of every
  repository, the year's bounds and ours' filter parameters, one request series per
  repository: the cloud `next` link (JSONLink paginator), self-hosted start/limit (offset
  paginator); auth as the host needs; dlt's defaults otherwise) into its own DuckDB file;
  `--no-peer` leaves it out: its memory grows with the data (~5.5-6.9 GB on the medium
  host's lists), so on the large host it would measure the machine's memory, not the peer;
- `nightly-0-duckdb` / `nightly-0-parquet`: `repo-analytics load` right after the backfill
  (nothing new: the first nightly after a backfill), on the backfill's file and pipelines.

After the last repeat the simulator's clock is advanced a day (`POST /_sim/advance`) and
`nightly-1-duckdb` / `nightly-1-parquet` run once on the last repeat's outputs (an advance
changes the data, so it cannot be repeated within one simulator's reproducible run).

Workloads: `lists` -- `--levels repository --resources commits,pull_requests`; `defaults` --
every level and resource (the default settings).

Per contender: wall seconds, CPU seconds, the simulator's CPU seconds in the same span,
requests (the simulator's counter before and after, by endpoint in the JSON), rows (landed:
counted in the DuckDB / Delta tables, `_dlt` tables and the peer's `repositories` left out;
nightly runs: the change of that count; the limit: items decoded), rows/s, peak RSS MB and
the 1-minute load average at start and end. Medians over `--repeat`, and the per-repeat
ratios ours/limit, peer/ours and parquet/duckdb (their medians). Contenders run with
Python's default bytecode caching (`PYTHONDONTWRITEBYTECODE` dropped from their environment,
as on a user's machine: the warm-up writes ours' caches). Writes the JSON and a
markdown table next to it (`.md`). The machines are shared and noisy: the ratios of one
interleaved run are what counts.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"  # the results of record (`--record`)
LOCAL = ROOT / "bench" / "local"  # any other run's (ignored by git)
CONTENDERS = ("ours-duckdb", "limit", "ours-parquet", "peer", "nightly")


def start_of_today() -> int:
    """The simulator's default clock here: today's 00:00 UTC, as epoch seconds."""
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return int(today.timestamp())


DEFAULT_WINDOWS = "ours' default"  # no `--window-days`: the backfill's own
WORKLOADS = {
    "lists": ["--levels", "repository", "--resources", "commits,pull_requests"],
    "defaults": [],
}
PEER_ENDPOINTS = ("commits.list.repository", "pull-requests.list.repository")
PAGE_PARAMS = {"page", "start", "limit", "pagelen"}
DROPPED_VARIABLES = ("PYTHONDONTWRITEBYTECODE",)  # see `contender_environment`
CLK_TCK = os.sysconf("SC_CLK_TCK")


def repo_analytics() -> str:
    """The `repo-analytics` script of the interpreter that runs this benchmark."""
    return str(Path(sys.executable).with_name("repo-analytics"))


def get_json(url: str, method: str = "GET", body: Any = None) -> Any:
    import requests

    response = requests.request(method, url, json=body, timeout=600)
    response.raise_for_status()
    return response.json()


# the simulator process ----------------------------------------------------------------------
class SimProcess:
    """`repo-analytics sim` in a process of its own; its control API over HTTP."""

    def __init__(
        self, edition: str, size: str, now: int, work: Path, latency_ms: float = 0
    ) -> None:
        self.log_file = (work / "sim.log").open("w")
        self.proc = subprocess.Popen(
            [
                repo_analytics(),
                "sim",
                "--edition",
                edition,
                "--size",
                size,
                "--now",
                str(now),
                "--latency-ms",
                f"{latency_ms:g}",
            ],
            stdout=subprocess.PIPE,
            stderr=self.log_file,
            text=True,
            cwd=work,
        )
        assert self.proc.stdout is not None
        banner = self.proc.stdout.readline()
        if "control=" not in banner:
            self.stop()
            raise RuntimeError(f"simulator did not start: {banner!r}; see {work / 'sim.log'}")
        fields = dict(part.split("=", 1) for part in banner.split() if "=" in part)
        self.control = fields["control"].rstrip("/")
        # drain what else it prints so it never blocks on a full pipe
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        self.info = get_json(self.control + "/info")
        self.edition = edition

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime

    def requests(self, since: int | None = None) -> dict[str, Any]:
        """Counter, counts by endpoint and the log after serial `since` (none: no log)."""
        return get_json(f"{self.control}/requests?since={since if since is not None else 2**62}")

    def clock(self) -> datetime:
        return datetime.fromtimestamp(get_json(self.control + "/info")["now"], UTC)

    def advance(self, days: int) -> Any:
        return get_json(self.control + "/advance", "POST", {"days": days})

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log_file.close()


class LogTap:
    """Collects the simulator's request log while a contender runs (the log keeps only the
    last 200,000 entries, so it is read every few seconds, not once at the end)."""

    def __init__(self, sim: SimProcess, since: int) -> None:
        self.sim, self.last, self.entries = sim, since, []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        log = self.sim.requests(self.last)["log"]
        if log:
            self.entries.extend(log)
            self.last = log[-1]["n"]

    def _run(self) -> None:
        while not self.done.wait(3.0):
            self._poll()

    def stop(self) -> list[dict[str, Any]]:
        self.done.set()
        self.thread.join()
        self._poll()
        return self.entries


# measuring one contender ---------------------------------------------------------------------
def endpoint_diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
    def flat(d: dict[str, Any]) -> dict[str, int]:
        return {f"{e} {s}": n for e, by in d["by_endpoint"].items() for s, n in by.items()}

    a, b = flat(after), flat(before)
    return {k: a[k] - b.get(k, 0) for k in sorted(a) if a[k] - b.get(k, 0)}


def contender_environment() -> dict[str, str]:
    """This process's environment for a contender, with Python's default bytecode caching:
    a machine that sets `PYTHONDONTWRITEBYTECODE` (this one's sandbox does) would have ours
    compile its own modules at every start (~0.2-0.3 s of ~1.2 s of imports), which a user's
    installation does once; the uncounted warm-up writes the caches, as a user's first run."""
    return {k: v for k, v in os.environ.items() if k not in DROPPED_VARIABLES}


def measure(
    name: str,
    cmd: list[str],
    env: dict[str, str],
    cwd: Path,
    sim: SimProcess,
    out_dir: Path,
    tap: bool = False,
    timeout: float = 7200,
) -> dict[str, Any]:
    """Run `cmd` as a child and measure it alone: wall, rusage, load, the simulator's side."""
    before = sim.requests()
    sim_cpu = sim.cpu_seconds()
    load_start = os.getloadavg()[0]
    logtap = LogTap(sim, before["total"]) if tap else None
    stdout = (out_dir / f"{name}.out").open("w")
    usage_file = out_dir / f"{name}.rusage.json"
    # through a small launcher: a child's peak RSS (ru_maxrss) starts at its parent's RSS at
    # fork time on Linux, and this process grows (logs, row counts); the launcher stays small
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child-run", str(usage_file), "--", *cmd],
        env={**contender_environment(), **env},
        cwd=cwd,
        stdout=stdout,
        stderr=subprocess.STDOUT,
    )
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    stdout.close()
    usage = (
        json.loads(usage_file.read_text())
        if usage_file.exists()
        else {"wall_s": 0.0, "cpu_s": 0.0, "maxrss_kib": 0, "exit_code": proc.returncode}
    )
    wall = usage["wall_s"]
    proc.returncode = usage["exit_code"]
    load_end = os.getloadavg()[0]
    entries = logtap.stop() if logtap else None
    after = sim.requests()
    result: dict[str, Any] = {
        "contender": name,
        "exit_code": proc.returncode,
        "wall_s": round(wall, 2),
        "cpu_s": round(usage["cpu_s"], 2),
        "sim_cpu_s": round(sim.cpu_seconds() - sim_cpu, 2),
        "requests": after["total"] - before["total"],
        "requests_by_endpoint": endpoint_diff(before, after),
        "open_max": after["open_max"],
        "peak_rss_mb": round(usage["maxrss_kib"] / 1024),
        "load1_start": round(load_start, 2),
        "load1_end": round(load_end, 2),
    }
    if proc.returncode != 0:
        tail = (out_dir / f"{name}.out").read_text()[-3000:]
        print(f"!! {name} exited {proc.returncode}:\n{tail}", file=sys.stderr, flush=True)
    if entries is not None:
        result["_log"] = entries
    return result


def child_run(usage_path: str, cmd: list[str]) -> None:
    """The launcher: run `cmd`, then write its wall time, CPU seconds and peak RSS."""
    began = time.perf_counter()
    proc = subprocess.Popen(cmd)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - began
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    Path(usage_path).write_text(
        json.dumps(
            {
                "wall_s": wall,
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "maxrss_kib": usage.ru_maxrss,
                "exit_code": code,
            }
        )
    )  # ru_maxrss: KiB on Linux
    sys.exit(0)


# rows landed ---------------------------------------------------------------------------------
def duckdb_rows(path: Path, skip: tuple[str, ...] = ()) -> dict[str, int]:
    import duckdb

    if not path.exists():
        return {}
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = con.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_type = 'BASE TABLE' AND table_name NOT LIKE '\\_dlt%' ESCAPE '\\' "
            "AND table_schema NOT LIKE '%\\_staging%' ESCAPE '\\'"
        ).fetchall()
        return {
            f"{s}.{t}": con.execute(f'SELECT count(*) FROM "{s}"."{t}"').fetchone()[0]
            for s, t in sorted(tables)
            if t not in skip
        }
    finally:
        con.close()


def delta_rows(root: Path) -> dict[str, int]:
    from deltalake import DeltaTable

    counts = {}
    for log in sorted(root.rglob("_delta_log")):
        table = log.parent
        if table.name.startswith("_dlt"):
            continue
        counts[str(table.relative_to(root))] = (
            DeltaTable(str(table)).to_pyarrow_dataset().count_rows()
        )
    return counts


def repeated(log: list[dict[str, Any]]) -> dict[str, int]:
    """Requests asked again in the same run with exactly the same path and parameters."""
    seen: set[tuple[str, str]] = set()
    again: dict[str, int] = {}
    for e in log:
        key = (e["path"], json.dumps(e["params"], sort_keys=True))
        if key in seen:
            again[e["endpoint"]] = again.get(e["endpoint"], 0) + 1
        seen.add(key)
    return dict(sorted(again.items()))


# child: the fetch limit ----------------------------------------------------------------------
def child_replay(spec_path: str) -> None:
    """Replay a request log: GET, orjson.loads, nothing else."""
    import orjson
    import requests

    spec = json.loads(Path(spec_path).read_text())
    base, headers_by_auth = spec["base_url"], spec["headers"]
    entries = spec["entries"]
    lock = threading.Lock()
    position = [0]
    totals = {"requests": 0, "items": 0, "bytes": 0, "errors": 0}

    def worker() -> None:
        session = requests.Session()
        items = nbytes = count = errors = 0
        while True:
            with lock:
                i = position[0]
                position[0] += 1
            if i >= len(entries):
                break
            e = entries[i]
            headers = dict(headers_by_auth.get(e["auth"], {}))
            if e.get("accept"):
                headers["Accept"] = e["accept"]
            r = session.get(base + e["path"], params=e["params"], headers=headers, timeout=120)
            count += 1
            nbytes += len(r.content)
            if r.status_code != e["status"]:
                errors += 1
            if r.headers.get("content-type", "").startswith("application/json"):
                body = orjson.loads(r.content)
                if isinstance(body, dict) and isinstance(body.get("values"), list):
                    items += len(body["values"])
                elif isinstance(body, list):
                    items += len(body)
                else:
                    items += 1
            else:
                items += max(r.content.count(b"\n") - 1, 0)  # CSV rows
        with lock:
            totals["requests"] += count
            totals["items"] += items
            totals["bytes"] += nbytes
            totals["errors"] += errors

    threads = [threading.Thread(target=worker) for _ in range(spec["concurrency"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    Path(spec["result"]).write_text(json.dumps(totals))


# child: dlt's rest_api peer ------------------------------------------------------------------
def child_peer(spec_path: str) -> None:
    import dlt
    from dlt.sources.rest_api import rest_api_source

    spec = json.loads(Path(spec_path).read_text())

    @dlt.resource(name="repositories", selected=False)
    def repositories() -> Any:
        yield spec["repositories"]

    if spec["edition"] == "cloud":
        client = {
            "base_url": spec["api_base"] + "/",
            "auth": {
                "type": "api_key",
                "name": "Authorization",
                "api_key": spec["token"],
                "location": "header",
            },
            "paginator": {"type": "json_link", "next_url_path": "next"},
        }
        ws = spec["workspace"]
        paths = {
            "commits": f"workspace/{ws}/repos/{{resources.repositories.slug}}/commits",
            "pull_requests": f"workspace/{ws}/repos/{{resources.repositories.slug}}/pull-requests",
        }
        paginators: dict[str, Any] = {}
    else:
        client = {
            "base_url": spec["api_base"] + "/",
            "auth": {
                "type": "http_basic",
                "username": spec["username"],
                "password": spec["password"],
            },
        }
        repo = "projects/{resources.repositories.project_key}/repos/{resources.repositories.slug}"
        paths = {"commits": f"{repo}/commits", "pull_requests": f"{repo}/pull-requests"}
        paginators = {
            name: {
                "type": "offset",
                "limit": spec["limits"][name],
                "offset_param": "start",
                "limit_param": "limit",
                "total_path": None,
            }
            for name in paths
        }
    resources: list[Any] = [repositories]
    for name, path in paths.items():
        endpoint: dict[str, Any] = {
            "path": path,
            "params": spec["params"][name],
            "data_selector": "values",
        }
        if name in paginators:
            endpoint["paginator"] = paginators[name]
        resources.append({"name": name, "endpoint": endpoint})
    if spec.get("no_lines"):  # cloud repositories without line counts: no with_lines there

        @dlt.resource(name="repositories_no_lines", selected=False)
        def repositories_no_lines() -> Any:
            yield spec["no_lines"]

        params = {k: v for k, v in spec["params"]["commits"].items() if k != "with_lines"}
        resources += [
            repositories_no_lines,
            {
                "name": "commits_no_lines",
                "table_name": "commits",
                "endpoint": {
                    "path": paths["commits"].replace(
                        "resources.repositories.", "resources.repositories_no_lines."
                    ),
                    "params": params,
                    "data_selector": "values",
                },
            },
        ]
    source = rest_api_source({"client": client, "resources": resources})  # type: ignore[typeddict-item]
    pipeline = dlt.pipeline(
        pipeline_name="peer",
        pipelines_dir=spec["pipelines_dir"],
        destination=dlt.destinations.duckdb(spec["duckdb"]),
        dataset_name="rest_api_data",
    )
    pipeline.run(source)


def peer_spec(
    sim: SimProcess, ours_log: list[dict[str, Any]], since: str, until: str, work: Path
) -> dict[str, Any]:
    """The peer's configuration: ours' filters for the two list endpoints, the whole year."""
    info = sim.info
    params: dict[str, dict[str, str]] = {}
    limits: dict[str, int] = {}
    for entry in ours_log:
        name = {
            "commits.list.repository": "commits",
            "pull-requests.list.repository": "pull_requests",
        }.get(entry["endpoint"])
        if name is None or name in params:
            continue
        p = {k: v for k, v in entry["params"].items() if k not in PAGE_PARAMS}
        for k in p:
            if "since" in k.lower():
                p[k] = since
            elif "until" in k.lower():
                p[k] = until
        if sim.edition == "cloud":
            p["pagelen"] = entry["params"].get("pagelen", "500")
        else:
            limits[name] = int(entry["params"].get("limit", 1000))
        params[name] = p
    truth = get_json(sim.control + "/truth/repositories")
    repos = []
    for r in truth:
        if r.get("_sim", {}).get("forbidden"):
            continue
        row = {"slug": r["slug"]}
        if sim.edition == "server":
            row["project_key"] = r["project"]["key"]
        repos.append(row)
    spec: dict[str, Any] = {
        "edition": sim.edition,
        "api_base": info["api_base_url"],
        "params": params,
        "limits": limits,
        "repositories": repos,
        "duckdb": str(work / "peer.duckdb"),
        "pipelines_dir": str(work / "peer-pipelines"),
    }
    if sim.edition == "cloud":
        spec.update(workspace=info["workspace"], token="sim-cloud-token")
        if "with_lines" in params.get("commits", {}):
            # ours drops with_lines where indexing is disabled; so does a user who reads 400s
            disabled = {r["slug"] for r in truth if r.get("_sim", {}).get("loc_disabled")}
            spec["repositories"] = [r for r in repos if r["slug"] not in disabled]
            spec["no_lines"] = [r for r in repos if r["slug"] in disabled]
    else:
        spec.update(username="analyst", password="analyst-pass")
    return spec


# the run -------------------------------------------------------------------------------------
def source_env(edition: str) -> dict[str, str]:
    env = {"RUNTIME__DLTHUB_TELEMETRY": "false"}
    if edition == "cloud":
        env["SOURCES__REPO_ANALYTICS__TOKEN"] = "sim-cloud-token"
    else:
        env["SOURCES__REPO_ANALYTICS__USERNAME"] = "analyst"
        env["SOURCES__REPO_ANALYTICS__PASSWORD"] = "analyst-pass"
    return env


def source_flags(sim: SimProcess) -> list[str]:
    flags = ["--edition", sim.edition, "--base-url", sim.info["base_url"]]
    if sim.edition == "cloud":
        flags += ["--workspace", sim.info["workspace"]]
    return flags


def global_flags(work: Path, destination: str) -> list[str]:
    flags = [
        "--duckdb",
        str(work / f"{destination}.duckdb"),
        "--pipelines-dir",
        str(work / f"pipelines-{destination}"),
        "--progress",
        "off",
    ]
    if destination == "parquet":
        flags = ["--destination", "parquet", "--parquet-dir", str(work / "delta"), *flags]
    return flags


def landed(work: Path, destination: str) -> dict[str, int]:
    if destination == "parquet":
        return delta_rows(work / "delta")
    return duckdb_rows(work / "duckdb.duckdb")


def finish(result: dict[str, Any], rows: int, tables: dict[str, int] | None = None) -> None:
    result["rows"] = rows
    result["rows_per_s"] = round(rows / result["wall_s"]) if result["wall_s"] else None
    if tables is not None:
        result["tables"] = tables
    print(
        f"   {result['contender']:<18} wall {result['wall_s']:>7} s  cpu {result['cpu_s']:>7} s"
        f"  req {result['requests']:>7}  rows {rows:>8}  rss {result['peak_rss_mb']:>5} MB"
        f"  load {result['load1_start']}->{result['load1_end']}"
        + ("" if result["exit_code"] == 0 else f"  EXIT {result['exit_code']}"),
        flush=True,
    )


def backfill_args(
    sim: SimProcess, workload: str, options: argparse.Namespace, since: str, until: str
) -> list[str]:
    """`repo-analytics backfill` and its flags for the workload's year (global flags apart)."""
    return [
        "backfill",
        *source_flags(sim),
        "--since",
        since,
        "--until",
        until,
        "--concurrency",
        str(options.concurrency),
        *(["--window-days", str(options.window_days)] if options.window_days else []),
        *WORKLOADS[workload],
    ]


def warm_up(
    sim: SimProcess, workload: str, options: argparse.Namespace, base: Path, since: str, until: str
) -> dict[str, Any]:
    """Ours' backfill of the workload once, not counted, before its first repeat: the
    simulator makes each answer's data at its first request and keeps it, so the first
    contender of a cold simulator shared the machine with ~2x the simulator's CPU of the
    others (large self-hosted lists: 21.3 s against 9.0 and 7.9 s)."""
    work = base / f"{workload}-warm-up"
    work.mkdir(parents=True)
    backfill = backfill_args(sim, workload, options, since, until)
    cmd = [repo_analytics(), *global_flags(work, "duckdb"), *backfill]
    print(f"-- {workload}, warm-up (not counted)", flush=True)
    r = measure("warm-up", cmd, source_env(sim.edition), ROOT, sim, work)
    finish(r, 0)
    shutil.rmtree(work, ignore_errors=True)
    return {k: r[k] for k in ("wall_s", "cpu_s", "sim_cpu_s", "requests", "exit_code")}


def one_repeat(
    sim: SimProcess,
    workload: str,
    repeat: int,
    options: argparse.Namespace,
    base: Path,
    since: str,
    until: str,
    clock: datetime,
    first_logs: dict[str, list[dict[str, Any]]],
) -> dict[str, Any]:
    work = base / f"{workload}-{repeat}"
    work.mkdir(parents=True)
    env = source_env(sim.edition)
    wflags = WORKLOADS[workload]
    backfill = backfill_args(sim, workload, options, since, until)
    results: dict[str, dict[str, Any]] = {}
    ours_log: list[dict[str, Any]] = []

    def ours(destination: str) -> None:
        name = f"ours-{destination}"
        r = measure(
            name,
            [repo_analytics(), *global_flags(work, destination), *backfill],
            env,
            ROOT,
            sim,
            work,
            tap=destination == "duckdb",
        )
        if destination == "duckdb":
            ours_log[:] = r.pop("_log")
            first_logs.setdefault(workload, list(ours_log))
            (work / "ours-requests.json").write_text(json.dumps(ours_log))
            r["repeated_requests"] = repeated(ours_log)
        report = work / f"{destination}.report.json"
        if report.exists():  # kept: the nightly runs write theirs to the same place
            shutil.copy(report, work / f"{name}.report.json")
            totals = json.loads(report.read_text()).get("backfill_totals")
            if totals is not None:
                r["backfill_totals"] = totals
        tables = landed(work, destination)
        finish(r, sum(tables.values()), tables)
        results[name] = r

    def limit() -> None:
        api = [e for e in ours_log if e["path"].startswith(sim.info["api_prefix"])]
        spec = {
            "base_url": sim.info["base_url"],
            "concurrency": options.concurrency,
            "entries": api,
            "result": str(work / "limit-result.json"),
            "headers": {
                "token": {"Authorization": "sim-cloud-token"},
                "basic": {"Authorization": "Basic YW5hbHlzdDphbmFseXN0LXBhc3M="},
                "bearer": {"Authorization": "Bearer sim-server-token"},
            },
        }
        (work / "limit-spec.json").write_text(json.dumps(spec))
        r = measure(
            "limit",
            [sys.executable, __file__, "--child-replay", str(work / "limit-spec.json")],
            {},
            work,
            sim,
            work,
        )
        got = json.loads((work / "limit-result.json").read_text())
        r["replayed"] = got
        finish(r, got["items"])
        results["limit"] = r

    def peer() -> None:
        # ours' filter parameters, from the first repeat's log (the peer may run first)
        spec = peer_spec(sim, first_logs[workload], since, until, work)
        (work / "peer-spec.json").write_text(json.dumps(spec, indent=1))
        r = measure(
            "peer",
            [sys.executable, __file__, "--child-peer", str(work / "peer-spec.json")],
            {"RUNTIME__DLTHUB_TELEMETRY": "false"},
            work,
            sim,
            work,
        )
        tables = duckdb_rows(work / "peer.duckdb", skip=("repositories",))
        finish(r, sum(tables.values()), tables)
        results["peer"] = r

    # named steps, in the order of an even repeat: ours-duckdb (and its replay, which needs
    # its log) first, the peer last; an odd repeat reverses it, ours-duckdb and limit last
    steps = [("ours-duckdb", lambda: ours("duckdb")), ("limit", limit)]
    steps += [("ours-parquet", lambda: ours("parquet")), ("peer", peer)]
    if workload != "lists" or options.no_peer:
        steps = steps[:-1]
    if repeat % 2:
        steps = steps[::-1]
        steps[-2:] = steps[-1], steps[-2]  # ..., ours-duckdb, limit
    # ours-duckdb always runs: the limit replays its log, the nightly runs on its file
    order = [step for name, step in steps if name in options.contenders or name == "ours-duckdb"]
    print(f"-- {workload}, repeat {repeat + 1}/{options.repeat}", flush=True)
    for step in order:
        step()
    if "nightly" in options.contenders:
        for destination in destinations(options):
            nightly(sim, work, destination, env, wflags, clock, 0, results)
    return {"workload": workload, "repeat": repeat, "work": str(work), "results": results}


def destinations(options: argparse.Namespace) -> tuple[str, ...]:
    """The destinations the nightly runs load into: those whose backfill ran."""
    return ("duckdb", "parquet") if "ours-parquet" in options.contenders else ("duckdb",)


def nightly(
    sim: SimProcess,
    work: Path,
    destination: str,
    env: dict[str, str],
    wflags: list[str],
    clock: datetime,
    day: int,
    results: dict[str, dict[str, Any]],
) -> None:
    name = f"nightly-{day}-{destination}"
    before = sum(landed(work, destination).values())
    cmd = [
        repo_analytics(),
        *global_flags(work, destination),
        "load",
        *source_flags(sim),
        "--end-date",
        clock.isoformat(),
        *wflags,
    ]
    r = measure(name, cmd, env, ROOT, sim, work)
    tables = landed(work, destination)
    finish(r, sum(tables.values()) - before, tables)
    r["rows_in_tables"] = sum(tables.values())
    report = work / f"{destination}.report.json"  # ours' own count of the rows it read
    if report.exists():
        resources = json.loads(report.read_text()).get("load", {}).get("resources", {})
        r["rows_read_reported"] = sum(v.get("rows", 0) for v in resources.values())
    results[name] = r


# summary -------------------------------------------------------------------------------------
FIELDS = (
    "wall_s",
    "cpu_s",
    "sim_cpu_s",
    "requests",
    "rows",
    "rows_per_s",
    "peak_rss_mb",
    "load1_start",
    "load1_end",
)
RATIOS = {  # name: (numerator, denominator, field)
    "ours/limit wall (duckdb)": ("ours-duckdb", "limit", "wall_s"),
    "ours/limit CPU (duckdb)": ("ours-duckdb", "limit", "cpu_s"),
    "ours/limit wall (parquet)": ("ours-parquet", "limit", "wall_s"),
    "peer/ours wall": ("peer", "ours-duckdb", "wall_s"),
    "peer/ours CPU": ("peer", "ours-duckdb", "cpu_s"),
    "peer/ours peak RSS": ("peer", "ours-duckdb", "peak_rss_mb"),
    "peer/ours requests": ("peer", "ours-duckdb", "requests"),
    "parquet/duckdb wall": ("ours-parquet", "ours-duckdb", "wall_s"),
    "parquet/duckdb CPU": ("ours-parquet", "ours-duckdb", "cpu_s"),
    "parquet/duckdb peak RSS": ("ours-parquet", "ours-duckdb", "peak_rss_mb"),
}


def median(values: list[Any]) -> Any:
    values = [v for v in values if v is not None]
    if not values:
        return None
    m = statistics.median(values)
    if isinstance(m, float) and m.is_integer():
        return int(m)
    return round(m, 2) if isinstance(m, float) else m


def summarise(runs: list[dict[str, Any]], workload: str) -> dict[str, Any]:
    mine = [
        {n: v for n, v in r["results"].items() if v["exit_code"] == 0}  # failed: left out
        for r in runs
        if r["workload"] == workload
    ]
    names = list(dict.fromkeys(n for res in mine for n in res))
    medians = {
        n: {f: median([res[n].get(f) for res in mine if n in res]) for f in FIELDS} for n in names
    }
    ratios = {}
    for label, (num, den, field) in RATIOS.items():
        values = [
            res[num][field] / res[den][field]
            for res in mine
            if num in res and den in res and res[den][field]
        ]
        if values:
            ratios[label] = round(statistics.median(values), 2)
    return {"medians": medians, "ratios": ratios}


def markdown(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    lines = [
        f"# A year's backfill: `{doc['edition']}`, `{doc['size']}` "
        f"({doc['since']} .. {doc['until']})",
        "",
        f"{m['platform']}, Python {m['python']}, {m['cpus']} CPUs, {m['mem_gb']} GB; "
        f"dlt {m['dlt']}, DuckDB {m['duckdb']}; run {doc['started']} .. {doc['ended']}; "
        f"repeats {doc['repeat']}, concurrency {doc['concurrency']}, window days "
        f"{doc.get('window_days', DEFAULT_WINDOWS)}; every answer of the simulator held "
        f"{doc.get('latency_ms', 0):g} ms"
        + (" (a host across a network)" if doc.get("latency_ms") else " (loopback)")
        + ". Command: "
        f"`{doc['command']}`."
        + (
            f" Dropped from the contenders' environment: {', '.join(doc['dropped_variables'])}"
            " (Python's default bytecode caching, as a user's machine has it)."
            if doc.get("dropped_variables")
            else ""
        ),
        "",
        "Medians over the repeats; load = the machine's 1-minute load average at the "
        "start and end of each measurement (the machine is shared: other work skews "
        "figures; ratios of one interleaved run are what counts). CPU = user + sys of "
        "the contender's process; sim CPU = the simulator's in the same span. Rows: "
        "landed in the tables (nightly: the change; limit: items decoded).",
        "",
    ]
    warm_ups = doc.get("warm_ups") or {}
    lines += [
        "Before each workload's first repeat, one backfill of ours ran uncounted (the "
        "simulator makes an answer's data at its first request and keeps it): "
        + "; ".join(
            f"{w} {v['wall_s']} s wall, sim CPU {v['sim_cpu_s']} s" for w, v in warm_ups.items()
        )
        + "."
        if warm_ups
        else "No warm-up (`--no-warm-up`): the first contender met a cold simulator.",
        "",
    ]
    for workload, summary in doc["summary"].items():
        lines += [
            f"## {workload}",
            "",
            "| contender | wall s | CPU s | sim CPU s | requests | rows | rows/s | "
            "peak RSS MB | load start → end |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for name, v in summary["medians"].items():
            lines.append(
                f"| {name} | {v['wall_s']} | {v['cpu_s']} | {v['sim_cpu_s']} | "
                f"{v['requests']:,} | {v['rows']:,} | {v['rows_per_s']:,} | "
                f"{v['peak_rss_mb']:,} | {v['load1_start']} → {v['load1_end']} |"
            )
        lines += ["", "| ratio (median of the repeats' ratios) | value |", "|---|---:|"]
        lines += [f"| {k} | {v} |" for k, v in summary["ratios"].items()]
        first = next(r for r in doc["runs"] if r["workload"] == workload)["results"]
        if "ours-duckdb" in first:
            lines += [
                "",
                "Requests of ours-duckdb (repeat 1) by endpoint and status: "
                + ", ".join(
                    f"`{k}` {v:,}" for k, v in first["ours-duckdb"]["requests_by_endpoint"].items()
                )
                + ".",
            ]
            again = first["ours-duckdb"].get("repeated_requests")
            if again is not None:
                lines += [
                    "",
                    f"Of these, asked again with the same path and parameters: "
                    f"{sum(again.values()):,}"
                    + "".join(f", `{k}` {v:,}" for k, v in again.items())
                    + ".",
                ]
        for name in ("nightly-0-duckdb", "nightly-1-duckdb"):
            if name in first:
                lines += [
                    "",
                    f"{name}: {first[name].get('rows_read_reported')} rows read "
                    "(ours' report; they land as merges), requests by endpoint: "
                    + ", ".join(
                        f"`{k}` {v:,}" for k, v in first[name]["requests_by_endpoint"].items()
                    )
                    + ".",
                ]
        lines.append("")
    return "\n".join(lines) + "\n"


def machine() -> dict[str, Any]:
    import dlt
    import duckdb

    mem = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal")
    )
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "mem_gb": round(mem / 1024**2, 1),
        "dlt": dlt.__version__,
        "duckdb": duckdb.__version__,
    }


def main() -> None:
    if len(sys.argv) > 3 and sys.argv[1] == "--child-run" and sys.argv[3] == "--":
        return child_run(sys.argv[2], sys.argv[4:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="small", choices=("tiny", "small", "medium", "large"))
    parser.add_argument("--edition", default="cloud", choices=("cloud", "server"))
    parser.add_argument(
        "--workloads",
        default="lists,defaults",
        help="comma-separated: lists, defaults (default both)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="repeats of the interleaved sequence; medians are reported",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=4,
        help="ours' `concurrency` and the replay's threads (default 4)",
    )
    parser.add_argument(
        "--window-days",
        type=int,
        default=None,
        help="ours' backfill windows, in days (default: ours' own default); the limit "
        "replays the requests they make",
    )
    parser.add_argument(
        "--no-nightly-1", action="store_true", help="skip the nightly after a simulated day"
    )
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=0,
        help="hold every answer of the simulator this many milliseconds: a host across a "
        "network (the benchmark of record: 50; default 0, loopback)",
    )
    parser.add_argument(
        "--contenders",
        default=",".join(CONTENDERS),
        help=f"comma-separated, of {', '.join(CONTENDERS)} (default all; ours-duckdb always "
        "runs: the limit replays its requests, the nightly runs load its file)",
    )
    parser.add_argument(
        "--record",
        action="store_true",
        help="write the results of record to bench/results/ (default: bench/local/, not tracked)",
    )
    parser.add_argument(
        "--no-peer",
        action="store_true",
        help="leave dlt's rest_api peer out (its memory grows with the data: not for large)",
    )
    parser.add_argument(
        "--now",
        type=int,
        default=None,
        help="simulator clock, epoch s (default: today's 00:00 UTC)",
    )
    parser.add_argument(
        "--out",
        default=None,
        help="results JSON (default bench/local/year-<edition>-<size>-<workloads>[-<MS>ms]"
        ".json, bench/results/ with --record); the markdown goes next to it",
    )
    parser.add_argument(
        "--no-warm-up",
        action="store_true",
        help="measure on a cold simulator (default: one uncounted backfill per workload first)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the working folder")
    parser.add_argument("--child-replay", help=argparse.SUPPRESS)
    parser.add_argument("--child-peer", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child_replay:
        return child_replay(options.child_replay)
    if options.child_peer:
        return child_peer(options.child_peer)
    workloads = [w.strip() for w in options.workloads.split(",") if w.strip()]
    for w in workloads:
        if w not in WORKLOADS:
            parser.error(f"unknown workload {w!r}: choose from {', '.join(WORKLOADS)}")
    options.contenders = {c.strip() for c in options.contenders.split(",") if c.strip()}
    for c in options.contenders - set(CONTENDERS):
        parser.error(f"unknown contender {c!r}: choose from {', '.join(CONTENDERS)}")
    latency = f"-{options.latency_ms:g}ms" if options.latency_ms else ""
    name = f"year-{options.edition}-{options.size}-{'-'.join(workloads)}{latency}.json"
    out = Path(options.out or (RESULTS if options.record else LOCAL) / name)
    base = Path(tempfile.mkdtemp(prefix="bench-year-"))
    started = datetime.now(UTC)
    print(f"working folder {base}", flush=True)
    now = options.now if options.now is not None else start_of_today()
    sim = SimProcess(options.edition, options.size, now, base, options.latency_ms)
    try:
        clock = datetime.fromtimestamp(sim.info["now"], UTC)
        since = (clock - timedelta(days=366)).date().isoformat()
        until = clock.isoformat()
        print(
            f"simulator {sim.info['base_url']} ({options.edition}, {options.size}): "
            f"{sim.info['counts']}",
            flush=True,
        )
        first_logs: dict[str, list[dict[str, Any]]] = {}
        warm_ups = {
            w: warm_up(sim, w, options, base, since, until)
            for w in workloads
            if not options.no_warm_up
        }
        runs = [
            one_repeat(sim, w, i, options, base, since, until, clock, first_logs)
            for i in range(options.repeat)
            for w in workloads
        ]
        if not options.no_nightly_1 and "nightly" in options.contenders:
            advanced = sim.advance(1)
            later = sim.clock()
            print(f"-- after advancing a day ({str(advanced)[:160]})", flush=True)
            for w in workloads:
                last = [r for r in runs if r["workload"] == w][-1]
                for destination in destinations(options):
                    nightly(
                        sim,
                        Path(last["work"]),
                        destination,
                        source_env(sim.edition),
                        WORKLOADS[w],
                        later,
                        1,
                        last["results"],
                    )
        sim_info = sim.info
    finally:
        sim.stop()
        if not options.keep:
            shutil.rmtree(base, ignore_errors=True)
    doc = {
        "edition": options.edition,
        "size": options.size,
        "since": since,
        "until": until,
        "repeat": options.repeat,
        "concurrency": options.concurrency,
        "window_days": options.window_days or DEFAULT_WINDOWS,
        "latency_ms": options.latency_ms,
        "contenders": sorted(options.contenders | {"ours-duckdb"}),
        "command": "python bench/bench_year.py " + " ".join(sys.argv[1:]),
        "started": f"{started:%Y-%m-%dT%H:%M:%SZ}",
        "ended": f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}",
        "machine": machine(),
        "dropped_variables": [k for k in DROPPED_VARIABLES if k in os.environ],
        "simulator": {k: sim_info[k] for k in ("edition", "size", "seed", "now", "counts")},
        "warm_ups": warm_ups,
        "summary": {w: summarise(runs, w) for w in workloads},
        # the working folder is this machine's temp folder: results name it by its place
        "runs": [{**r, "work": str(Path(r["work"]).relative_to(base))} for r in runs],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    out.with_suffix(".md").write_text(markdown(doc))
    print(f"wrote {out} and {out.with_suffix('.md')}", flush=True)


if __name__ == "__main__":
    main()
