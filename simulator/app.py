"""The request pipeline of a simulated host: faults, host conditions, auth, licence, routing.

Both editions plug into it with an `Edition` object (routes, auth, error bodies, rendering);
the control surface under /_sim/ sits beside the API prefix and is never faulted.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from .config import SimConfig
from .data.world import World
from .faults import PAGE_KINDS, Fault, FaultPlan
from .http import Request, Response, html_response, json_response
from .params import ApiError
from .queries import Store

LOG_ENTRIES = 200_000

OLD_APP_PAGE = (
    "<!DOCTYPE html><html><head><title>404 - Page not found</title></head><body>"
    "<h1>Page not found</h1><p>The page you were looking for does not exist.</p></body></html>"
)
LOGIN_PAGE = (
    "<!DOCTYPE html><html><head><title>Sign in - Company SSO</title></head><body>"
    '<form method="post" action="/sso/login"><input name="username">'
    '<input type="password" name="password"><button>Sign in</button></form></body></html>'
)
GATEWAY_PAGE = "<html><body><h1>{status} Gateway error</h1><p>upstream failed</p></body></html>"


@dataclass(frozen=True)
class Route:
    name: str  # e.g. "commits.list.repository"; request counts are kept by it
    pattern: re.Pattern[str]
    handler: Callable[[Request, dict[str, str], Any], Response]
    paged: bool = False


def route(name: str, path: str, handler: Callable[..., Response], paged: bool = False) -> Route:
    """`path` below the API prefix, with {name} placeholders for one path segment each."""
    regex = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", path)
    return Route(name, re.compile(f"^{regex}$"), handler, paged)


class Edition(Protocol):
    """What the request pipeline needs of an edition (`edition.EditionBase` and its two
    editions): its data, its routes, and how it authenticates and answers errors."""

    store: Store
    routes: list[Route]
    states: tuple[str, ...]  # the pull-request states its activity moves between

    def build_routes(self) -> list[Route]: ...
    def authenticate(self, request: Request) -> Any: ...
    def error(self, error: ApiError) -> Response: ...
    def license_error(self) -> Response: ...
    def truth(self, kind: str, query: dict[str, str]) -> list[dict[str, Any]]: ...
    def insert_for(
        self, request: Request, route: Route, path_params: dict[str, str], principal: Any
    ) -> None: ...
    def is_later_page(self, request: Request) -> bool: ...
    def first_page(self, request: Request) -> Request: ...
    def empty_page(self, request: Request) -> Response: ...


class RequestLog:
    """Counts by endpoint and status, and the last requests with their parameters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter[tuple[str, int]] = Counter()
        self.entries: deque[dict[str, Any]] = deque(maxlen=LOG_ENTRIES)
        self.serial = 0
        self.open_now = 0  # API requests being answered right now (latency included)
        self.open_max = 0  # the most at once since the last reset

    def in_flight(self, change: int) -> None:
        """An API request began (+1) or was answered (-1)."""
        with self._lock:
            self.open_now += change
            self.open_max = max(self.open_max, self.open_now)

    def record(self, request: Request, endpoint: str, status: int, fault: str | None) -> None:
        auth = request.headers.get("authorization", "")
        # only a known scheme name is logged: the first word of a raw token is part of the secret
        first = auth.split(" ", 1)[0].lower()
        scheme = "none" if not auth else first if first in ("basic", "bearer") else "token"
        with self._lock:
            self.serial += 1
            self.counts[(endpoint, status)] += 1
            self.entries.append(
                {
                    "n": self.serial,
                    "method": request.method,
                    "path": request.path,
                    "endpoint": endpoint,
                    "params": dict(request.query),
                    "status": status,
                    "auth": scheme,
                    "fault": fault,
                    "accept": request.headers.get("accept"),
                    "at": round(time.time(), 4),  # when it came in (before any added latency)
                }
            )

    def describe(self, since: int) -> dict[str, Any]:
        with self._lock:
            by_endpoint: dict[str, dict[str, int]] = {}
            for (endpoint, status), count in sorted(self.counts.items()):
                by_endpoint.setdefault(endpoint, {})[str(status)] = count
            return {
                "total": self.serial,
                "by_endpoint": by_endpoint,
                "open_max": self.open_max,
                "log": [e for e in self.entries if e["n"] > since],
            }

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()
            self.entries.clear()
            self.open_max = self.open_now


class HostApp:
    """One simulated host: config, world, edition, faults, request log."""

    def __init__(
        self, config: SimConfig, world: World, edition_factory: Callable[[HostApp], Edition]
    ) -> None:
        self.config = config
        self.conditions = config.conditions
        self.world = world
        self.faults = FaultPlan()
        if config.faults:
            self.faults.set_from(config.faults)
        self.log = RequestLog()
        self.base_url = ""  # set once the server is bound
        self.ca_file: str | None = None  # with TLS, the PEM file of the run's CA
        self.edition = edition_factory(self)
        self.store: Store = self.edition.store
        self.control: Callable[[Request], Response] | None = None

    def apply_conditions(self, changes: dict[str, Any]) -> None:
        """Change host conditions; rendering and routes that depend on them follow."""
        self.conditions.update(changes)
        self.store.forget_rendering()
        self.edition.routes = self.edition.build_routes()

    @property
    def api_base(self) -> str:
        return self.base_url + self.config.prefix

    def __call__(self, request: Request) -> Response:
        if request.path.startswith("/_sim/") and self.control is not None:
            return self.control(request)
        endpoint, found = self._match(request.path)
        later = found is not None and found[0].paged and self.edition.is_later_page(request)
        fault = self.faults.draw(endpoint, request.path, later)
        response = self._answer(request, endpoint, found, fault)
        # a host across a network: held in the connection's own thread, after the answer is
        # made (`SimRequestHandler`), so other connections' answers go on meanwhile
        response.delay_s += self.conditions.latency_ms / 1000
        self.log.record(
            request,
            endpoint,
            response.status if response.transport != "reset" else 0,
            fault.kind if fault else None,
        )
        return response

    def _match(self, path: str) -> tuple[str, tuple[Route, dict[str, str]] | None]:
        prefix = self.config.prefix
        if not path.startswith(prefix + "/"):
            return "unknown", None
        below = path[len(prefix) :]
        for candidate in self.edition.routes:
            matched = candidate.pattern.match(below)
            if matched:
                return candidate.name, (candidate, matched.groupdict())
        return "unknown", None

    def _answer(
        self,
        request: Request,
        endpoint: str,
        found: tuple[Route, dict[str, str]] | None,
        fault: Fault | None,
    ) -> Response:
        if fault is not None and fault.kind not in ("insert", "repeat", *PAGE_KINDS):
            faulted = self._fault_response(fault)
            if faulted is not None:
                return faulted
        conditions = self.conditions
        if conditions.proxy_login:
            return html_response(200, LOGIN_PAGE)
        if conditions.redirect_base:  # a proxy or host that sends every request elsewhere
            query = f"?{request.query_string}" if request.query_string else ""
            target = conditions.redirect_base.rstrip("/") + request.raw_path + query
            return Response(302, b"", "text/html;charset=UTF-8", {"Location": target})
        if not conditions.app_present or found is None:
            return html_response(404, OLD_APP_PAGE)
        principal = self.edition.authenticate(request)
        if isinstance(principal, Response):
            return principal
        if not conditions.licensed:
            return self.edition.license_error()
        chosen, path_params = found
        paging = fault.kind if fault is not None and chosen.paged else None
        try:
            if paging == "insert":
                self.edition.insert_for(request, chosen, path_params, principal)
            if paging == "empty_pages":
                return self.edition.empty_page(request)
            if paging == "same_page":
                return self._same_page(request, endpoint, chosen, path_params, principal)
            response = chosen.handler(request, path_params, principal)
            if paging == "first_page" and self.edition.is_later_page(request):
                first = chosen.handler(self.edition.first_page(request), path_params, principal)
                response = with_items_of(first, response)
        except ApiError as error:
            return self.edition.error(error)
        if fault is not None and fault.kind == "slow":
            response.delay_s = fault.slow_seconds
        if fault is not None and fault.kind == "truncate":
            response.transport = "truncate"
        if (
            fault is not None
            and fault.kind == "repeat"
            and response.content_type.startswith("text/csv")
        ):
            body = response.body
            response.body = repeating_first_row([body] if isinstance(body, bytes) else body)
        return response

    def _same_page(
        self, request: Request, endpoint: str, chosen: Route, path_params: dict[str, str], who: Any
    ) -> Response:
        """The `same_page` fault: the first answer to this endpoint with this very query, for
        every path (a host, or a replay of published sample pages, that serves one page for
        every repository)."""
        key = (endpoint, tuple(sorted(request.query.items())))
        kept = self.faults.replayed(key)
        if kept is not None:
            return json_response(200, kept)
        response = chosen.handler(request, path_params, who)
        if response.status == 200 and isinstance(response.body, bytes):
            self.faults.replayed(key, response.body)
        return response

    def _fault_response(self, fault: Fault) -> Response | None:
        kind = fault.kind
        if kind in ("429", "429date"):
            limited = self.edition.error(ApiError("rate_limited", "Rate limit exceeded.", 429))
            limited.headers["Retry-After"] = fault.retry_after_header(time.time())
            return limited
        if kind in ("500", "503"):
            return self.edition.error(ApiError("server_error", "Internal server error", int(kind)))
        if kind == "error200":  # a host (or proxy) that wraps an error in a 200 answer
            wrapped = self.edition.error(ApiError("server_error", "Internal server error", 200))
            wrapped.status = 200
            return wrapped
        if kind in ("502", "504"):
            return html_response(int(kind), GATEWAY_PAGE.format(status=kind))
        if kind == "reset":
            return Response(0, transport="reset")
        if kind == "html":
            return html_response(200, LOGIN_PAGE)
        return None  # slow and truncate answer normally, then misbehave in transport


def with_items_of(first: Response, page: Response) -> Response:
    """`page` with the items of `first` under its own envelope (the `first_page` fault)."""
    if page.status != 200 or not isinstance(page.body, bytes) or not isinstance(first.body, bytes):
        return page
    body = orjson.loads(page.body)
    body["values"] = orjson.loads(first.body).get("values", [])
    page.body = orjson.dumps(body)
    return page


def repeating_first_row(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """A CSV export that sends its first data row again after its last (a faulty export:
    one row twice)."""
    first: bytes | None = None
    start = b""
    for chunk in chunks:
        if first is None:
            start += chunk
            lines = start.split(b"\r\n")
            if len(lines) > 2:
                first = lines[1] + b"\r\n"
        yield chunk
    if first:
        yield first
