"""The simulator's request log."""

from __future__ import annotations

from urllib.parse import urlsplit

import requests

from simulator import Simulator
from tests.simulator.cloud.client import JSON, call, ok_json
from tests.simulator.cloud.truth import Truth


def test_request_log_records_endpoint_params_and_scheme(
    cloud_sim: Simulator, http: requests.Session, truth: Truth
) -> None:
    """The log entry of a request names its endpoint, decoded path, params and auth scheme."""
    slug = next((r["slug"] for r in truth.repos if " " in r["slug"]), truth.repos[0]["slug"])
    path = f"/workspace/{truth.workspace}/repos/{slug}/commits"
    params = {"merges": "only", "pagelen": "3", "since_date": "2026-04-01T00:00:00+05:45"}
    before = cloud_sim.requests()["total"]
    ok_json(call(http, cloud_sim, path, params))
    call(http, cloud_sim, path, token=None)
    first, second = cloud_sim.requests(since=before)["log"]
    assert first["endpoint"] == "commits.list.repository"
    assert first["path"] == urlsplit(cloud_sim.api_base).path + path
    assert first["params"] == params
    assert (first["method"], first["status"], first["auth"]) == ("GET", 200, "token")
    assert first["accept"] == JSON
    assert (second["status"], second["auth"]) == (401, "none")
