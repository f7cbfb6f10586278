"""How fast the simulator builds its data and serves commit lists to HTTP clients.

Usage:
    python bench/bench_simulator.py [--size medium] [--seconds N] [--build-sizes medium,large]
                                    [--profile] [--record]

Run on demand (pytest does not collect it). It

1. builds each of `--build-sizes` in a fresh child process and reports the build time and that
   process's peak RSS (`resource.getrusage`);
2. for each edition, starts a `--size` simulator in this process and runs the clients in a
   SEPARATE process (so the server's GIL is not shared with them): one client thread, then
   eight, each thread with its own `requests.Session`, decoding every page with
   `orjson.loads(r.content)`, taking distinct date windows of the history from a shared queue
   and paging through each: the self-hosted global commit list with `limit=1000`, the cloud
   workspace commit list with `pagelen=500` (`merges=include`, so every commit is read).
   "cold" runs start with the serialisation and query caches empty and read the whole history
   once (capped at 3 x N seconds); "warm" runs follow a full pass and cycle through the
   windows for N seconds;
3. writes simulator.json and simulator.md to bench/results/local/, or with --record to
   bench/results/ (the results of record).

`--profile` also runs one warm single-thread client under cProfile in the server process and
writes the top functions to simulator-profile.txt beside them.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import resource
import subprocess
import sys
import sysconfig
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "bench" / "results"  # the results of record (committed: --record)
LOCAL = RECORDED / "local"  # every other run's (git-ignored)
NOW = 1_780_272_000  # 2026-06-01T00:00:00Z, fixed so every run reads the same data
WINDOWS = 32
PAGE = {"server": ("limit", 1000), "cloud": ("pagelen", 500)}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# child: build only ------------------------------------------------------------------------
def build_only(size: str) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from simulator.data.generate import build_world

    start = time.perf_counter()
    world = build_world(1, size, NOW, "server")
    seconds = time.perf_counter() - start
    return {
        "size": size,
        "seconds": round(seconds, 2),
        "commits": len(world.commits),
        "pull_requests": len(world.prs),
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }


# child: HTTP clients --------------------------------------------------------------------------
def iso(epoch_s: int) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_window(
    session: Any, spec: dict[str, Any], since: int, until: int, deadline: float
) -> tuple[int, int, int, bool]:
    """Page through one window: (items, requests, bytes, finished)."""
    import orjson

    base, edition = spec["api_base"], spec["edition"]
    size_name, size = PAGE[edition]
    items = requests_made = nbytes = 0
    if edition == "server":
        url: str | None = base + "/commits"
        params: dict[str, Any] | None = {
            "sinceDate": iso(since),
            "untilDate": iso(until),
            size_name: size,
            "start": 0,
        }
    else:
        url = f"{base}/workspace/{spec['workspace']}/commits"
        params = {
            "since_date": iso(since),
            "until_date": iso(until),
            "merges": "include",
            size_name: size,
        }
    while url is not None:
        if time.perf_counter() > deadline:
            return items, requests_made, nbytes, False
        r = session.get(url, params=params, headers=spec["headers"], timeout=120)
        if r.status_code != 200:
            raise RuntimeError(f"{r.status_code} from {r.url}: {r.text[:200]}")
        body = orjson.loads(r.content)
        requests_made += 1
        nbytes += len(r.content)
        items += len(body["values"])
        if edition == "server":
            if body["isLastPage"]:
                url = None
            else:
                assert params is not None
                params["start"] = body["nextPageStart"]
        else:
            url, params = body.get("next"), None  # the link carries every parameter
    return items, requests_made, nbytes, True


def run_clients(spec: dict[str, Any]) -> dict[str, Any]:
    """`threads` threads share a queue of windows; stop at the deadline or when it is empty."""
    import requests

    windows = [(int(a), int(b)) for a, b in spec["windows"]]
    taken = [0]  # windows handed out so far; with `repeat` they are handed out again
    totals = {"items": 0, "requests": 0, "bytes": 0, "windows_done": 0}
    lock = threading.Lock()
    errors: list[str] = []
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    deadline = start + spec["max_seconds"]

    def next_window() -> tuple[int, int] | None:
        with lock:
            if taken[0] >= len(windows) and not spec["repeat"]:
                return None
            taken[0] += 1
            return windows[(taken[0] - 1) % len(windows)]

    def worker() -> None:
        with requests.Session() as session:
            while time.perf_counter() < deadline:
                window = next_window()
                if window is None:
                    return
                try:
                    items, made, nbytes, done = read_window(session, spec, *window, deadline)
                except Exception as error:  # noqa: BLE001 - reported, not hidden
                    errors.append(repr(error))
                    return
                with lock:
                    totals["items"] += items
                    totals["requests"] += made
                    totals["bytes"] += nbytes
                    totals["windows_done"] += done

    threads = [threading.Thread(target=worker) for _ in range(spec["threads"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    client_cpu = cpu_after.ru_utime - cpu_before.ru_utime + cpu_after.ru_stime - cpu_before.ru_stime
    return {
        **totals,
        "seconds": round(seconds, 3),
        "errors": errors[:3],
        "complete": totals["windows_done"] >= len(windows),
        "client_cpu_per_wall": round(client_cpu / seconds, 2),
        "items_per_s": round(totals["items"] / seconds),
        "requests_per_s": round(totals["requests"] / seconds, 1),
        "mb_per_s": round(totals["bytes"] / seconds / 1e6, 1),
    }


def child(mode: str, argument: str) -> dict[str, Any]:
    """Run this script in a fresh interpreter in `mode`; its last stdout line is JSON."""
    done = subprocess.run(
        [sys.executable, __file__, mode, argument], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{mode} child failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# parent: servers and measurements -------------------------------------------------------------
def reset_caches(sim: Any) -> None:
    """Cold start for the next run: no serialised items, no cached query results."""
    store = sim.app.store
    store.forget_rendering()
    with store._lock:  # noqa: SLF001 - a benchmark may empty a private cache
        store._results.clear()  # noqa: SLF001


def measure(
    sim: Any, edition: str, threads: int, max_seconds: float, repeat: bool = False
) -> dict[str, Any]:
    """One client process; `repeat` cycles through the windows until `max_seconds`."""
    now = sim.app.world.now_s
    first = min(c.time for c in sim.app.world.commits)
    span = now + 1 - first
    edges = [first + span * k // WINDOWS for k in range(WINDOWS)] + [now + 1]
    spec = {
        "edition": edition,
        "api_base": sim.api_base,
        "headers": sim.auth_headers,
        "workspace": sim.config.workspace,
        "threads": threads,
        "max_seconds": max_seconds,
        "repeat": repeat,
        "windows": [[edges[k], edges[k + 1]] for k in range(WINDOWS)],
    }
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    result = child("--client", json.dumps(spec))
    cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    server_cpu = cpu_after.ru_utime - cpu_before.ru_utime + cpu_after.ru_stime - cpu_before.ru_stime
    result["server_cpu_per_wall"] = round(server_cpu / max(result["seconds"], 1e-9), 2)
    if result["errors"]:
        print(f"  client errors: {result['errors']}", file=sys.stderr)
    return result


def bench_edition(edition: str, size: str, seconds: float) -> dict[str, Any]:
    from simulator import SimConfig, Simulator

    start = time.perf_counter()
    sim = Simulator(SimConfig(edition=edition, size=size, now=NOW)).start()
    built = time.perf_counter() - start
    out: dict[str, Any] = {
        "build_and_start_s": round(built, 2),
        "commits": len(sim.app.world.commits),
    }
    try:
        runs: dict[str, Any] = {}
        runs["cold_1"] = measure(sim, edition, 1, 3 * seconds)
        if not runs["cold_1"]["complete"]:
            measure(sim, edition, 8, 600)  # finish warming every item
        runs["warm_1"] = measure(sim, edition, 1, seconds, repeat=True)
        runs["warm_8"] = measure(sim, edition, 8, seconds, repeat=True)
        reset_caches(sim)
        runs["cold_8"] = measure(sim, edition, 8, 3 * seconds)
        out["runs"] = runs
        for name, run in runs.items():
            print(
                f"  {edition:6} {name:7} {run['items_per_s']:>8} items/s "
                f"{run['requests_per_s']:>7} req/s {run['mb_per_s']:>6} MB/s "
                f"CPU/wall server {run['server_cpu_per_wall']} "
                f"client {run['client_cpu_per_wall']}",
                flush=True,
            )
    finally:
        sim.stop()
    return out


def profile_warm(size: str, seconds: float) -> str:
    """cProfile every server thread while one warm client thread reads commits."""
    from simulator import SimConfig, Simulator

    sim = Simulator(SimConfig(edition="server", size=size, now=NOW)).start()
    try:
        measure(sim, "server", 8, 600)  # warm
        profiler = cProfile.Profile()

        def hook(*_: object) -> None:
            sys.setprofile(None)
            profiler.enable()  # this thread (a connection's handler) from now on

        threading.setprofile(hook)
        try:
            measure(sim, "server", 1, seconds, repeat=True)
        finally:
            threading.setprofile(None)  # type: ignore[arg-type]
            profiler.disable()
    finally:
        sim.stop()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(25)
    return without_machine_paths(text.getvalue())


def without_machine_paths(text: str) -> str:
    """Profile lines name files by absolute path: keep them relative to where they live (the
    standard library, site-packages, this checkout) so no result names this machine."""
    replacements = {
        str(Path(sysconfig.get_paths()["purelib"])): "<site-packages>",
        str(Path(sysconfig.get_paths()["stdlib"])): "<stdlib>",
        str(ROOT): "<checkout>",
    }
    for path, label in sorted(replacements.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(path, label)
    return text


def machine() -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
    }


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        "# Simulator benchmark",
        "",
        f"Machine: {m['nproc']} CPUs ({m['usable_cpus']} usable), Python {m['python']}, "
        f"{m['platform']}; run {m['date']}; 1-minute load average {m['load_average_1m_at_start']} "
        f"at the start, {m.get('load_average_1m_at_end')} at the end (other work on the machine "
        "skews the figures). Command: `python bench/bench_simulator.py "
        f"--size {report['size']} --seconds {report['seconds']}`.",
        "",
        "## Building datasets (fresh process each)",
        "",
        "| size | commits | pull requests | build (s) | peak RSS (MB) |",
        "|---|---:|---:|---:|---:|",
    ]
    for b in report["builds"]:
        lines.append(
            f"| {b['size']} | {b['commits']:,} | {b['pull_requests']:,} | "
            f"{b['seconds']} | {b['peak_rss_mb']} |"
        )
    lines += [
        "",
        f"## Reading commit lists over HTTP ({report['size']}, client in a separate process)",
        "",
        "Server: global commit list, `limit=1000`; cloud: workspace commit list, `pagelen=500`. "
        "Cold: serialisation and query caches empty, one pass over the history (cold 1 is the "
        "server's first pass, which also grows its memory; cold 8 follows a cache reset); "
        "warm: after a full pass, cycling through the windows. "
        "CPU: CPU seconds per wall second of the simulator process and of the client process "
        "(1.0 = one core busy; a Python process's GIL allows little more).",
        "",
        "| edition | run | threads | items/s | requests/s | MB/s | items | seconds | "
        "server CPU | client CPU |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for edition, data in report["editions"].items():
        for name, run in data["runs"].items():
            temp, threads = name.split("_")
            lines.append(
                f"| {edition} | {temp} | {threads} | {run['items_per_s']:,} | "
                f"{run['requests_per_s']} | {run['mb_per_s']} | {run['items']:,} | "
                f"{run['seconds']} | {run['server_cpu_per_wall']} | "
                f"{run['client_cpu_per_wall']} |"
            )
    lines += [
        "",
        f"Peak RSS of the benchmark process (servers, {report['size']}): "
        f"{report['bench_peak_rss_mb']} MB.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--build-only":
        print(json.dumps(build_only(sys.argv[2])))
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "--client":
        print(json.dumps(run_clients(json.loads(sys.argv[2]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="medium", help="dataset served (default medium)")
    parser.add_argument(
        "--seconds",
        type=float,
        default=10.0,
        help="length of each warm run; cold runs at most 3x (default 10)",
    )
    parser.add_argument(
        "--build-sizes",
        default="medium,large",
        help="sizes whose build time and RSS are measured (default medium,large)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also profile the server during a warm single-thread run",
    )
    parser.add_argument(
        "--record",
        action="store_true",
        help="write the results of record into bench/results/ (committed); otherwise into "
        "bench/results/local/ (git-ignored)",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    results = RECORDED if args.record else LOCAL
    results.mkdir(parents=True, exist_ok=True)

    report: dict[str, Any] = {
        "machine": machine(),
        "size": args.size,
        "seconds": args.seconds,
        "builds": [],
        "editions": {},
    }
    for size in filter(None, args.build_sizes.split(",")):
        built = child("--build-only", size)
        print(f"build {size}: {built['seconds']} s, peak RSS {built['peak_rss_mb']} MB", flush=True)
        report["builds"].append(built)
    for edition in ("server", "cloud"):
        report["editions"][edition] = bench_edition(edition, args.size, args.seconds)
    report["bench_peak_rss_mb"] = round(peak_rss_mb(), 1)
    report["machine"]["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    if args.profile:
        (results / "simulator-profile.txt").write_text(profile_warm(args.size, args.seconds))
        print(f"profile: {results / 'simulator-profile.txt'}")
    (results / "simulator.json").write_text(json.dumps(report, indent=2) + "\n")
    (results / "simulator.md").write_text(markdown(report))
    print(f"wrote {results / 'simulator.json'} and {results / 'simulator.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
