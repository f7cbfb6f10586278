"""A signed-in session against the self-hosted API, checking envelopes, CSV and error bodies."""

from __future__ import annotations

import csv
import io
from typing import Any
from urllib.parse import quote

import requests

from simulator import Simulator
from tests.simulator.selfhosted.truth import Item

AUTH = ("analyst", "analyst-pass")
BEARER = {"Authorization": "Bearer sim-server-token"}
RESTRICTED = ("restricted", "restricted-pass")
RESTRICTED_BEARER = {"Authorization": "Bearer sim-restricted-token"}
COMMIT_CSV_HEADER = [
    "Date",
    "Author email",
    "Author name",
    "Author username",
    "Repository",
    "Project",
    "Commit hash",
    "Merge commit",
    "Lines added",
    "Lines deleted",
]
PR_CSV_HEADER = [
    "Created date",
    "Last updated date",
    "Author name",
    "Author username",
    "Repository",
    "Project",
    "State",
    "Pull request id",
    "Reviewers",
    "Time to open (s)",
    "Pickup time (s)",
    "Review time (s)",
    "Time to resolve (s)",
]


def error_of(response: requests.Response, status: int) -> dict[str, Any]:
    """Assert the spec's shared error body with `status`; return its first error."""
    assert response.status_code == status, response.text[:300]
    assert response.headers["Content-Type"].startswith("application/json")
    body = response.json()
    assert isinstance(body["errors"], list) and body["errors"]
    for error in body["errors"]:
        assert set(error) >= {"context", "message", "exceptionName"}
        assert error["context"] is None or isinstance(error["context"], str)
        assert isinstance(error["message"], str) and error["message"]
        assert error["exceptionName"] is None or isinstance(error["exceptionName"], str)
    return body["errors"][0]


class Api:
    """A signed-in session against one simulated host's API prefix."""

    def __init__(
        self, sim: Simulator, auth: Any = AUTH, headers: dict[str, str] | None = None
    ) -> None:
        self.sim = sim
        self.base = sim.api_base
        self.session = requests.Session()
        self.session.auth = auth
        self.session.headers.update(headers or {})

    def get(self, path: str, **params: Any) -> requests.Response:
        return self.session.get(self.base + path, params=params, timeout=30)

    def json(self, path: str, **params: Any) -> Any:
        response = self.get(path, **params)
        assert response.status_code == 200, response.text[:300]
        assert response.headers["Content-Type"].startswith("application/json")
        return response.json()

    def all_pages(
        self, path: str, limit: int | None = None, expected_limit: int = 25, **params: Any
    ) -> list[Item]:
        """Every item of a paged list, checking the envelope of every page."""
        if limit is not None:
            params["limit"] = limit
        items: list[Item] = []
        start = 0
        for _ in range(10_000):
            page = self.json(path, start=start, **params)
            assert page["start"] == start
            assert page["limit"] == expected_limit
            assert page["size"] == len(page["values"])
            items += page["values"]
            if page["isLastPage"]:
                assert "nextPageStart" not in page  # README: absent on the last page
                assert page["size"] <= expected_limit
                return items
            assert page["size"] == expected_limit
            assert page["nextPageStart"] == start + page["size"]
            start = page["nextPageStart"]
        raise AssertionError("paging never reached isLastPage")

    def csv(self, path: str, **params: Any) -> tuple[requests.Response, list[dict[str, str]]]:
        response = self.get(path, **params)
        assert response.status_code == 200, response.text[:300]
        assert response.headers["Content-Type"].startswith("text/csv")
        assert response.headers.get("Transfer-Encoding") == "chunked"
        assert "Content-Length" not in response.headers
        rows = list(csv.reader(io.StringIO(response.content.decode("utf-8"), newline="")))
        header, body = rows[0], rows[1:]
        expected = COMMIT_CSV_HEADER if "/commits/" in path else PR_CSV_HEADER
        assert header == expected
        return response, [dict(zip(header, row, strict=True)) for row in body]


def commit_path(item: Item) -> str:
    repo = item["repository"]
    return f"/projects/{repo['project']['key']}/repos/{quote(repo['slug'], safe='')}/commits"
