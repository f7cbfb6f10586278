"""The control surface under /_sim/: ground truth, clock, faults, conditions, request log.

Outside the API prefix, never faulted, never authenticated (it binds to loopback).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from .app import HostApp
from .data import activity
from .faults import FaultSpecError
from .http import Request, Response, json_response
from .params import ApiError

DURATION_UNITS = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86_400}


def ok(data: Any) -> Response:
    return json_response(200, orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS))


def bad(message: str, status: int = 400) -> Response:
    return json_response(status, orjson.dumps({"error": message}))


def info(app: HostApp) -> dict[str, Any]:
    """What a client needs to connect, as printed on the simulator's first line."""
    config, world = app.config, app.world
    data: dict[str, Any] = {
        "edition": config.edition,
        "base_url": app.base_url,
        "api_base_url": app.api_base,
        "api_prefix": config.prefix,
        "ca_file": app.ca_file,
        "now": world.now_s,
        "seed": config.seed,
        "size": config.size,
        "version": world.version,
        "counts": {
            "projects": len(world.projects),
            "repositories": len(world.repos),
            "users": len(world.users),
            "commits": len(world.commits),
            "pull_requests": len(world.prs),
        },
    }
    if config.edition == "cloud":
        data["workspace"] = config.workspace
        data["credentials"] = {"token": config.token, "expired_tokens": list(config.expired_tokens)}
    else:
        data["projects"] = list(world.projects)
        data["credentials"] = {
            name: {
                "password": p.password,
                "tokens": list(p.tokens),
                "projects": list(p.projects) if p.projects is not None else None,
            }
            for name, p in app.edition.principals.items()  # type: ignore[attr-defined]
        }
    return data


def body_json(request: Request) -> dict[str, Any]:
    if not request.body:
        return {}
    data = orjson.loads(request.body)
    if not isinstance(data, dict):
        raise ValueError("a JSON object is expected")
    return data


def advance_seconds(data: dict[str, Any]) -> int:
    unknown = sorted(set(data) - set(DURATION_UNITS))
    if unknown:
        raise ValueError(f"unknown duration unit {unknown}; valid: {', '.join(DURATION_UNITS)}")
    total = sum(float(data.get(unit, 0)) * factor for unit, factor in DURATION_UNITS.items())
    if total <= 1:
        raise ValueError("advance by more than one second: give seconds, minutes, hours or days")
    return int(total)


def make_control(app: HostApp) -> Callable[[Request], Response]:
    """The request handler for /_sim/ paths of `app`."""

    def control(request: Request) -> Response:
        path = request.path[len("/_sim/") :].rstrip("/")
        method = request.method
        try:
            if path == "info":
                return ok(info(app))
            if path.startswith("truth/"):
                with app.world.lock:
                    return ok(app.edition.truth(path[len("truth/") :], request.query))
            if path == "advance" and method == "POST":
                seconds = advance_seconds(body_json(request))
                return ok(activity.advance(app.world, seconds, app.edition.states))
            if path == "faults":
                if method == "POST":
                    app.faults.set_from(body_json(request))
                elif method == "DELETE":
                    app.faults.clear()
                return ok(app.faults.describe())
            if path == "conditions":
                if method == "POST":
                    app.apply_conditions(body_json(request))
                return ok(app.conditions.as_dict())
            if path == "requests":
                if method == "DELETE":
                    app.log.reset()
                return ok(app.log.describe(int(request.query.get("since", "0") or 0)))
        except ApiError as error:
            return bad(error.message, error.status)
        except (ValueError, KeyError, TypeError, FaultSpecError) as error:
            return bad(f"{type(error).__name__}: {error}")
        return bad(f"no control endpoint {method} /_sim/{path}; see docs/simulator.md", 404)

    return control
