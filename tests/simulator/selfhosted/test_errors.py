"""Error answers: unknown paths and objects, invalid parameter values."""

from __future__ import annotations

import pytest

from tests.simulator.selfhosted.client import Api, commit_path, error_of
from tests.simulator.selfhosted.truth import Truth


def test_unknown_api_path_is_html_404_and_unknown_objects_json_404(api: Api) -> None:
    response = api.get("/no-such-resource")
    assert response.status_code == 404 and response.headers["Content-Type"].startswith("text/html")
    for path, name in (
        ("/projects/NOPE/commits", "NOPE"),
        ("/users/nobody/pull-requests", "nobody"),
        ("/projects/CORE/repos/nope/commits/statistics", "nope"),
    ):
        error = error_of(api.get(path), 404)
        assert name in error["message"]


@pytest.mark.parametrize(
    "path,params,name",
    [
        ("/commits", {"merges": "sometimes"}, "merges"),
        ("/commits", {"limit": "0"}, "limit"),
        ("/pull-requests", {"limit": "-5"}, "limit"),
        ("/commits", {"limit": "ten"}, "limit"),
        ("/commits", {"start": "-1"}, "start"),
        ("/commits", {"sinceDate": "yesterday"}, "sinceDate"),
        ("/commits/statistics", {"untilDate": "2026-13-40"}, "untilDate"),
        ("/commits", {"order": "random"}, "order"),
        ("/pull-requests", {"state": "closed"}, "state"),
        ("/pull-requests/statistics", {"dateType": "merged"}, "dateType"),
        ("/pull-requests/export/csv", {"state": "superseded"}, "state"),
        ("/commits", {"sinceDate": "2026-05-02", "untilDate": "2026-05-01"}, "sinceDate"),
    ],
)
def test_invalid_parameter_values_are_a_400(
    api: Api, path: str, params: dict[str, str], name: str
) -> None:
    error = error_of(api.get(path, **params), 400)
    assert name in (error["context"] or "") + error["message"]


def test_invalid_with_files_value_is_a_400(api: Api, truth: Truth) -> None:
    commit = truth.commits[0]
    error = error_of(api.get(f"{commit_path(commit)}/{commit['id']}", withFiles="maybe"), 400)
    assert "withFiles" in (error["context"] or "") + error["message"]
