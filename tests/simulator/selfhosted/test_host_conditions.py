"""Host conditions: no licence, an app older than 5.2, a login proxy."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from simulator import Simulator
from tests.simulator.selfhosted.client import Api, commit_path, error_of

SAMPLE_PATHS = (
    "/commits",
    "/pull-requests/statistics",
    "/projects/CORE/commits/export/csv",
    "/users/user0001/pull-requests",
)


def test_unlicensed_host_answers_402_everywhere(make_sim: Callable[..., Simulator]) -> None:
    sim = make_sim(edition="server")
    sim.set_conditions(licensed=False)
    client = Api(sim)
    commit = sim.truth("commits")[0]
    for path in (*SAMPLE_PATHS, f"{commit_path(commit)}/{commit['id']}"):
        error = error_of(client.get(path), 402)
        assert error["exceptionName"] is None
        assert "license" in error["message"].lower()
    sim.set_conditions(licensed=True)
    assert client.json("/commits/statistics")["commits"] == len(sim.truth("commits"))


@pytest.mark.parametrize(
    "version,present", [("5.1.0", False), ("4.9.9", False), ("5.2.0", True), ("5.10.1", True)]
)
def test_app_older_than_5_2_answers_html_404(
    make_sim: Callable[..., Simulator], version: str, present: bool
) -> None:
    sim = make_sim(edition="server")
    sim.set_conditions(app_version=version)
    client = Api(sim)
    for path in SAMPLE_PATHS:
        response = client.get(path)
        if present:
            assert response.status_code == 200
            continue
        assert response.status_code == 404
        assert response.headers["Content-Type"].startswith("text/html")
        assert response.text.lstrip().lower().startswith("<!doctype html")
    if not present:
        assert sim.info()["counts"]["commits"] > 0  # the control surface still answers


def test_proxy_login_page_is_200_html(make_sim: Callable[..., Simulator]) -> None:
    sim = make_sim(edition="server")
    sim.set_conditions(proxy_login=True)
    client = Api(sim)
    for path in SAMPLE_PATHS:
        response = client.get(path)
        assert response.status_code == 200
        assert response.headers["Content-Type"].startswith("text/html")
        assert "<form" in response.text.lower()
        with pytest.raises(ValueError):
            response.json()
