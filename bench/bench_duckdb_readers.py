"""Readers of the DuckDB file while loads run: what blocks, and what a published copy costs.

Usage:
    python bench/bench_duckdb_readers.py [--db demo.duckdb] [--repeats 5]

Run on demand (pytest does not collect it). Without `--db` it first runs `repo-analytics demo`
(the small cloud host: a year, ~20,000 commits) in a temporary folder. Then, with reader
processes of their own (`sys.executable` with DuckDB):

- whether a read-only reader keeps a writer out, a writer keeps a read-only reader out, and
  read-only readers keep each other out (each is an attempt to connect; DuckDB does not wait);
- the published copy (`pipelines.destinations.duckdb.file.publish`: copy under a read-only
connection,
  fsync, rename): seconds and bytes, the median of `--repeats`, also while a reader holds the
  published path; the old reader still reads its old copy, a new connection the new one;
- for comparison, a copy made by DuckDB itself (`ATTACH` + `COPY FROM DATABASE`).

Writes duckdb-readers.json and .md with the machine's load average to bench/results/local/, or
with --record to bench/results/ (the results of record).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402

from pipelines.destinations.duckdb.file import publish  # noqa: E402

RECORDED = ROOT / "bench" / "results"  # the results of record (committed: --record)
LOCAL = RECORDED / "local"  # every other run's (git-ignored)
CLI = Path(sys.executable).parent / "repo-analytics"
COUNT = "SELECT count(*) FROM repo_analytics.cloud_commits"
MARKED = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'bench_marker'"
# holds the file (ro or rw) and answers each SQL line of its stdin with the first value
HOLD = (
    "import duckdb, sys; c = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == 'ro')\n"
    "print('held', flush=True)\n"
    "for sql in sys.stdin: print(c.execute(sql).fetchone()[0], flush=True)"
)


def holder(path: Path, mode: str) -> subprocess.Popen[str]:
    """A process holding `path` (`ro` or `rw`) until its stdin closes."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline() == "held\n"
    return process


def ask(process: subprocess.Popen[str], sql: str) -> str:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(sql + "\n")
    process.stdin.flush()
    return process.stdout.readline().strip()


def let_go(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.close()
    process.wait(timeout=30)


def can_open(path: Path, read_only: bool) -> bool:
    try:
        duckdb.connect(str(path), read_only=read_only).close()
    except duckdb.IOException:
        return False
    return True


def blocking(db: Path) -> dict[str, bool]:
    """Who keeps whom out, from another process."""
    out: dict[str, bool] = {}
    for held, mode in (("read-only reader", "ro"), ("writer", "rw")):
        process = holder(db, mode)
        try:
            out[f"{held} keeps a writer out"] = not can_open(db, read_only=False)
            out[f"{held} keeps a read-only reader out"] = not can_open(db, read_only=True)
        finally:
            let_go(process)
    return out


def publish_times(db: Path, target: Path, repeats: int) -> dict[str, Any]:
    """Publish `db` (a working copy: it gets a marker table) `repeats` times, then once more
    after a change while a reader holds the published copy."""
    seconds = [publish(db, target, 0).seconds for _ in range(repeats)]
    reader = holder(target, "ro")  # a BI tool on the published copy
    try:
        commits = ask(reader, COUNT)
        with duckdb.connect(str(db)) as con:  # a load lands something new
            con.execute("CREATE TABLE repo_analytics.bench_marker AS SELECT 1 AS one")
        held = publish(db, target, 0)
        old_reader = (ask(reader, COUNT), ask(reader, MARKED))
        with duckdb.connect(str(target), read_only=True) as con:
            fresh = con.execute(MARKED).fetchone()
    finally:
        let_go(reader)
    return {
        "bytes": held.bytes,
        "seconds_median": round(statistics.median(seconds), 3),
        "seconds_all": [round(s, 3) for s in seconds],
        "seconds_while_a_reader_holds_the_copy": round(held.seconds, 3),
        "old_reader_after_the_swap": {"commits": int(old_reader[0]), "sees_new": old_reader[1]},
        "reader_commits_before_the_swap": int(commits),
        "new_connection_sees_new": bool(fresh and fresh[0]),
    }


def duckdb_copy(db: Path, folder: Path) -> dict[str, Any]:
    target = folder / "copied-by-duckdb.duckdb"
    started = time.monotonic()
    with duckdb.connect() as con:
        con.execute(f"ATTACH '{db}' AS src (READ_ONLY)")
        con.execute(f"ATTACH '{target}' AS dst")
        con.execute("COPY FROM DATABASE src TO dst")
    return {"seconds": round(time.monotonic() - started, 3), "bytes": target.stat().st_size}


def demo_file(folder: Path) -> Path:
    db = folder / "demo.duckdb"
    subprocess.run(
        [str(CLI), "--duckdb", str(db), "--progress", "off", "demo"],
        cwd=folder,
        check=True,
        capture_output=True,
        timeout=1800,
    )
    return db


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=None, help="a demo.duckdb (default: make one)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--record",
        action="store_true",
        help="write the results of record into bench/results/ (committed); otherwise into "
        "bench/results/local/ (git-ignored)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-readers-") as tmp:
        folder = Path(tmp)
        made = args.db.absolute() if args.db else demo_file(folder)
        db = folder / "work.duckdb"  # a working copy: the bench changes it
        shutil.copyfile(made, db)
        with duckdb.connect(str(db), read_only=True) as con:
            commits = con.execute(COUNT).fetchone()
        result = {
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}, DuckDB {duckdb.__version__}",
            "load_average_before": [round(x, 2) for x in os.getloadavg()],
            "file": {"bytes": db.stat().st_size, "commits": commits[0] if commits else 0},
            "blocking": blocking(db),
            "published_copy": publish_times(db, folder / "bi" / "published.duckdb", args.repeats),
            "copy_by_duckdb": duckdb_copy(db, folder),
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        }
    results = RECORDED if args.record else LOCAL
    results.mkdir(parents=True, exist_ok=True)
    (results / "duckdb-readers.json").write_text(json.dumps(result, indent=2) + "\n")
    (results / "duckdb-readers.md").write_text(markdown(result))
    print(markdown(result))
    print(f"wrote {results / 'duckdb-readers'}.json and .md")


def markdown(r: dict[str, Any]) -> str:
    pub, dup = r["published_copy"], r["copy_by_duckdb"]
    lines = [
        "# Readers of the DuckDB file while loads run (`bench/bench_duckdb_readers.py`)",
        "",
        f"{r['machine']}; load average (1, 5, 15 min) {r['load_average_before']} before, "
        f"{r['load_average_after']} after. File: {r['file']['bytes'] / 1e6:.1f} MB, "
        f"{r['file']['commits']:,} commits (the demo's small cloud host).",
        "",
        "| from another process | blocks? |",
        "|---|---|",
        *(f"| {what} | {'yes' if yes else 'no'} |" for what, yes in r["blocking"].items()),
        "",
        "| published copy | figure |",
        "|---|---|",
        f"| copy, fsync, rename (median of {len(pub['seconds_all'])}) | "
        f"{pub['seconds_median']} s ({pub['seconds_all']}) |",
        f"| the same while a reader holds the published copy | "
        f"{pub['seconds_while_a_reader_holds_the_copy']} s |",
        f"| size | {pub['bytes'] / 1e6:.1f} MB |",
        f"| a reader holding the old copy, after the swap | reads on: "
        f"{pub['old_reader_after_the_swap']['commits']:,} commits, the new table "
        f"{'seen' if pub['old_reader_after_the_swap']['sees_new'] != '0' else 'not seen'} |",
        f"| a new connection after the swap | the new table "
        f"{'seen' if pub['new_connection_sees_new'] else 'not seen'} |",
        f"| for comparison: ATTACH + COPY FROM DATABASE | {dup['seconds']} s, "
        f"{dup['bytes'] / 1e6:.1f} MB |",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
