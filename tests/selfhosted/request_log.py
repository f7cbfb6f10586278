"""What crossed the wire: the requests a run made, read from the simulator's log, and the CSV
exports those requests got, fetched again."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests

from simulator import Simulator
from tests.support.helpers import GRAIN, period_floor, period_next, select
from tests.support.loader import Loader

MAX_CSV_WINDOW = timedelta(days=366)
WIRE_FORMAT = "%Y-%m-%dT%H:%M:%S+00:00"
CSV_KEYS = {
    "commits": ("project", "repository", "commit_hash"),
    "pull-requests": ("project", "repository", "pull_request_id"),
}
EXPORT_TABLES = {"commits": "server_commit_exports", "pull-requests": "server_pull_request_exports"}


def wire(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(WIRE_FORMAT)


def wire_time(text: str) -> datetime:
    """A sinceDate/untilDate parameter: must carry an explicit +00:00 offset."""
    return datetime.strptime(text, WIRE_FORMAT).replace(tzinfo=UTC)


def scope_of_path(path: str, prefix: str) -> tuple[str, str]:
    """(level, scope key) of an API path, as the extractor names its scopes."""
    parts = path[len(prefix) :].strip("/").split("/")
    if parts[0] == "projects" and len(parts) > 2 and parts[2] == "repos":
        return "repository", f"{parts[1]}/{parts[3]}"
    if parts[0] == "projects":
        return "project", parts[1]
    if parts[0] == "users":
        return "user", parts[1]
    return "global", "global"


def csv_value(name: str, text: str) -> Any:
    """A CSV cell typed as the README says (by the normalised column name)."""
    if text == "":
        return None
    if re.search(r"(^|_)date$", name):
        return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
    if name == "merge_commit":
        assert text in ("true", "false"), text
        return text == "true"
    if name.startswith("lines_") or name.endswith("_id") or name.endswith("_s"):
        return int(text)
    return text


def snake(header: str) -> str:
    """`Time to open (s)` -> `time_to_open_s`."""
    return re.sub(r"[^0-9a-z]+", "_", header.lower()).strip("_")


def served_csv(
    sim: Simulator,
    entry: Mapping[str, Any],
    auth: tuple[str, str],
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Fetch the CSV a logged export request got, ourselves: (column names, typed rows)."""
    response = requests.get(
        sim.base_url + entry["path"], params=entry["params"], auth=auth, timeout=30
    )
    assert response.status_code == 200 and response.headers["Content-Type"].startswith(
        "text/csv"
    ), response.text[:200]
    reader = csv.reader(io.StringIO(response.content.decode("utf-8"), newline=""))
    names = [snake(h) for h in next(reader)]
    return names, [
        tuple(csv_value(n, v) for n, v in zip(names, row, strict=True)) for row in reader
    ]


def check_exports_equal_served(
    loader: Loader, sim: Simulator, log: list[dict[str, Any]], auth: tuple[str, str]
) -> dict[str, int]:
    """Each export table holds, per level and scope, exactly the rows the CSV endpoints serve
    for the windows the run asked for (a later window's row replaces an earlier one's)."""
    prefix = sim.info()["api_prefix"]
    served: dict[str, dict[tuple, tuple]] = {"commits": {}, "pull-requests": {}}
    names_of: dict[str, list[str]] = {}
    for entry in sorted((e for e in log if ".csv." in e["endpoint"]), key=lambda e: e["n"]):
        kind = entry["endpoint"].split(".")[0]
        level, scope = scope_of_path(entry["path"], prefix)
        names, rows = served_csv(sim, entry, auth)
        names_of[kind] = names
        positions = [names.index(k) for k in CSV_KEYS[kind]]
        for row in rows:
            served[kind][(level, scope, *(row[p] for p in positions))] = (level, scope, *row)
    sizes = {}
    for kind, expected in served.items():
        assert expected, f"no {kind} export was read"
        table = EXPORT_TABLES[kind]
        keyed = {}
        positions = [names_of[kind].index(k) + 2 for k in CSV_KEYS[kind]]
        for row in select(loader, table, ("level", "scope", *names_of[kind])):
            key = (row[0], row[1], *(row[p] for p in positions))
            assert key not in keyed, f"{table}: duplicate key {key}"
            keyed[key] = row
        missing, extra = set(expected) - set(keyed), set(keyed) - set(expected)
        assert not missing and not extra, (
            f"{table}: missing {sorted(missing, key=str)[:3]}, extra {sorted(extra, key=str)[:3]}"
        )
        wrong = [(keyed[k], expected[k]) for k in expected if keyed[k] != expected[k]]
        assert not wrong, f"{table}: {len(wrong)} rows differ from the CSV, e.g. {wrong[:2]}"
        sizes[kind] = len(expected)
    return sizes


def assert_request_parameters(
    log: list[dict[str, Any]], clock: datetime, auth: str = "basic", grain: str = GRAIN
) -> None:
    """Every request: the auth scheme, explicit +00:00 offsets, the run's frozen untilDate on
    lists, the endpoint's parameters, page sizes at the maxima, statistics in whole UTC
    periods of the run's grain, CSV windows of at most 366 days."""
    until = wire(clock)
    for entry in log:
        endpoint, params = entry["endpoint"], entry["params"]
        assert entry["auth"] == auth and entry["status"] == 200, entry
        kind, op, _ = endpoint.split(".")
        since, end = wire_time(params["sinceDate"]), wire_time(params["untilDate"])
        assert since < end <= clock, entry
        if kind == "commits":
            assert params["merges"] == "include", entry
        else:
            assert params["state"] == "all", entry
        if op == "list":
            assert params["untilDate"] == until, entry
            if kind == "commits":
                assert (params["order"], params["limit"]) == ("oldest", "1000"), entry
            else:
                assert (params["dateType"], params["limit"]) == ("updated", "500"), entry
        elif op == "statistics":
            assert "limit" not in params and since == period_floor(since, grain), entry
            assert end == min(period_next(since, grain), clock), entry
            if kind == "pull-requests":
                assert params["dateType"] == "created", entry
        elif op == "csv":
            assert end - since <= MAX_CSV_WINDOW, entry
        else:
            pytest.fail(f"unexpected endpoint {endpoint}")


def single_commit_ids(log: list[dict[str, Any]]) -> list[str]:
    """Commit ids of the single-commit requests in a log, in request order."""
    return [
        e["path"].rsplit("/", 1)[1] for e in log if e["endpoint"] == "commits.single.repository"
    ]
