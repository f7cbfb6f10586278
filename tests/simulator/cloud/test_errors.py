"""Error answers: bad tokens, unknown objects, invalid parameters."""

from __future__ import annotations

from urllib.parse import quote

import pytest
import requests

from simulator import Simulator
from tests.simulator.cloud.client import (
    JSON,
    PAGED,
    TOKEN_MESSAGE,
    any_paths,
    assert_error,
    call,
    ok_json,
    ws_paths,
)
from tests.simulator.cloud.truth import Truth, expected_commits


@pytest.mark.parametrize(
    "token", [None, "", "not-a-token", "sim-expired-token", "Bearer sim-cloud-token"]
)
def test_invalid_or_expired_token_is_401_on_every_endpoint(
    cloud_sim: Simulator, http: requests.Session, truth: Truth, token: str | None
) -> None:
    """Missing, wrong, expired or Bearer-wrapped tokens: 401 with the spec's message."""
    for path in any_paths(truth).values():
        assert_error(call(http, cloud_sim, path, token=token), 401, TOKEN_MESSAGE)


@pytest.mark.parametrize("endpoint", ["9", "10"])
def test_unknown_repository_is_404(
    cloud_sim: Simulator, http: requests.Session, truth: Truth, endpoint: str
) -> None:
    """Endpoints 9 and 10 answer 404 JSON "Repository not found." for an unknown slug."""
    path = ws_paths(truth.workspace, "no-such-repo", truth.users[0]["uuid"])[endpoint]
    assert_error(call(http, cloud_sim, path), 404, "Repository not found.")


def test_unknown_user_or_workspace_is_a_json_404(
    cloud_sim: Simulator, http: requests.Session, truth: Truth
) -> None:
    """A missing object is a JSON 404 (not the HTML 404 of a missing endpoint)."""
    ghost = "{00000000-0000-4000-8000-000000000000}"
    paths = [
        p
        for k, p in ws_paths(truth.workspace, truth.repos[0]["slug"], ghost).items()
        if k in ("5", "6-short", "6-long", "11")
    ]
    paths += list(
        ws_paths("other-workspace", truth.repos[0]["slug"], truth.users[0]["uuid"]).values()
    )
    for path in paths:
        response = call(http, cloud_sim, path)
        assert response.status_code == 404, path
        assert response.headers["Content-Type"].startswith(JSON)
        assert response.json()["type"] == "error"


@pytest.mark.parametrize("endpoint", PAGED)
@pytest.mark.parametrize(
    "name, value",
    [("pagelen", "501"), ("pagelen", "0"), ("page", "0"), ("page", "-1"), ("pagelen", "ten")],
)
def test_paging_parameters_out_of_range_are_invalid_requests(
    cloud_sim: Simulator, http: requests.Session, truth: Truth, endpoint: str, name: str, value: str
) -> None:
    """pagelen outside 1..500 and page < 1: 400 Invalid Request naming the parameter."""
    response = call(http, cloud_sim, any_paths(truth)[endpoint], {name: value})
    error = assert_error(response, 400, "Invalid Request")
    assert name in error["detail"]


@pytest.mark.parametrize(
    "endpoint, name, value",
    [
        ("1", "state", "closed"),
        ("2", "state", "bogus"),
        ("3", "date_type", "closed"),
        ("4", "since_date", "yesterday"),
        ("5", "until_date", "2026-13-01"),
        ("6-short", "date_type", "merged"),
        ("8", "order", "sideways"),
        ("9", "merges", "maybe"),
        ("9", "with_lines", "yes"),
        ("10", "merges", "all"),
        ("11", "since_date", "01/05/2026"),
    ],
)
def test_invalid_parameter_values_are_invalid_requests(
    cloud_sim: Simulator, http: requests.Session, truth: Truth, endpoint: str, name: str, value: str
) -> None:
    """Values outside a parameter's rule: 400 Invalid Request whose detail names it."""
    error = assert_error(
        call(http, cloud_sim, any_paths(truth)[endpoint], {name: value}), 400, "Invalid Request"
    )
    assert name in error["detail"]


def test_unencoded_plus_in_offset_is_a_400(
    cloud_sim: Simulator, http: requests.Session, truth: Truth
) -> None:
    """A raw '+' arrives as a space (README's choice): 400, while %2B is accepted."""
    url = f"{cloud_sim.api_base}/workspace/{truth.workspace}/commits?since_date="
    headers = {"Accept": JSON, **cloud_sim.auth_headers}
    error = assert_error(
        http.get(url + "2026-05-01T10:00:00+02:00", headers=headers), 400, "Invalid Request"
    )
    assert "since_date" in error["detail"]
    encoded = ok_json(http.get(url + quote("2026-05-01T10:00:00+02:00", safe=":"), headers=headers))
    expected = expected_commits(truth, since="2026-05-01T10:00:00+02:00")
    assert {v["hash"] for v in encoded["values"]} == set(expected)
