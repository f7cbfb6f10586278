"""The user list (endpoint 7) in both path forms."""

from __future__ import annotations

import pytest
import requests

from simulator import Simulator
from tests.simulator.cloud.client import fetch
from tests.simulator.cloud.truth import BRACED_UUID, Truth


@pytest.mark.parametrize("form", ["short", "long"])
def test_user_list_equals_truth(
    cloud_sim: Simulator, http: requests.Session, truth: Truth, form: str
) -> None:
    """Endpoint 7 lists every user once with truth's uuid and display name, by display name."""
    root = f"/{truth.workspace}" if form == "short" else f"/workspace/{truth.workspace}"
    body = fetch(http, cloud_sim, f"{root}/users")
    assert set(body) == {"values", "page", "pagelen"}
    assert body["page"] == 1
    expected = sorted(((u["uuid"], u["display_name"]) for u in truth.users), key=lambda x: x[1])
    assert [(v["uuid"], v["display_name"]) for v in body["values"]] == expected
    assert all(BRACED_UUID.match(v["uuid"]) for v in body["values"])


@pytest.mark.parametrize("form", ["short", "long"])
def test_user_list_filter_display_name_is_exact(
    cloud_sim: Simulator, http: requests.Session, truth: Truth, form: str
) -> None:
    """filter_display_name narrows to the user with exactly that (unicode) display name."""
    root = f"/{truth.workspace}" if form == "short" else f"/workspace/{truth.workspace}"
    for user in truth.users:
        name = user["display_name"]
        body = fetch(http, cloud_sim, f"{root}/users", {"filter_display_name": name})
        assert body["values"] == [{"uuid": user["uuid"], "display_name": name}]
    name = truth.users[0]["display_name"]
    for near in (name[:-1], name.upper() if name.upper() != name else name.lower(), name + " "):
        assert (
            fetch(http, cloud_sim, f"{root}/users", {"filter_display_name": near})["values"] == []
        )
