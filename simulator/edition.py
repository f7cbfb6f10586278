"""What both simulated editions do alike: scopes, permissions, host conditions, paging data."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

from .app import HostApp, Route
from .data import activity
from .data.world import GLOBAL, Scope, World
from .http import Request, Response
from .params import ApiError, Window
from .queries import CommitQuery, PullRequestQuery, Store

THIRTY_DAYS_S = 30 * 86_400


class EditionBase:
    """Shared machinery; subclasses supply names, envelopes, errors and rendering."""

    name = ""
    states: tuple[str, ...] = ()
    routes: list[Route]

    def __init__(self, app: HostApp) -> None:
        self.app = app
        self.config = app.config
        self.conditions = app.conditions
        self.world: World = app.world
        self.store = Store(
            self.world,
            self.render_commit,
            self.render_pull_request,
            lambda: self.conditions.until_inclusive,
        )
        self.routes = self.build_routes()

    # to be supplied by each edition ---------------------------------------------------------
    def build_routes(self) -> list[Route]:
        raise NotImplementedError

    def render_commit(self, world: World, commit: Any) -> bytes:
        raise NotImplementedError

    def authenticate(self, request: Request) -> Any:
        """The caller's principal, or the edition's 401 `Response`."""
        raise NotImplementedError

    def error(self, error: ApiError) -> Response:
        raise NotImplementedError

    def license_error(self) -> Response:
        raise NotImplementedError

    def truth(self, kind: str, query: dict[str, str]) -> list[dict[str, Any]]:
        raise NotImplementedError

    def render_pull_request(self, world: World, pr: Any) -> bytes:
        raise NotImplementedError

    def scope_of(self, level: str, path_params: dict[str, str], principal: Any) -> Scope:
        raise NotImplementedError

    def commit_query(self, request: Request, scope: Scope, principal: Any) -> CommitQuery:
        raise NotImplementedError

    def pull_request_query(
        self, request: Request, scope: Scope, principal: Any
    ) -> PullRequestQuery:
        raise NotImplementedError

    # shared ----------------------------------------------------------------------------------
    def readable(self, principal: Any) -> frozenset[str] | None:
        """Repository slugs the caller may read; None when it may read all of them."""
        if not self.conditions.forbidden:
            return None
        return frozenset(set(self.world.repos) - set(self.conditions.forbidden))

    def page_size(self, requested: int, maximum: int, name: str, default_policy: str) -> int:
        policy = self.conditions.page_overflow
        policy = default_policy if policy == "default" else policy
        if requested > maximum:
            if policy == "error":
                raise ApiError(
                    "invalid_request",
                    "Invalid Request",
                    400,
                    "com.analytics.api.InvalidParameterException",
                    name,
                    f"parameter {name}={requested}: expected 1 to {maximum}",
                )
            return maximum
        return requested

    def check_unindexed(
        self, repo: str, message: str, status: int, exception_name: str | None = None
    ) -> None:
        """Fail while the repository has unindexed changes; a count runs down per request."""
        left = self.conditions.unindexed.get(repo)
        if left is None or left == 0:
            return
        if left > 0:
            self.conditions.unindexed[repo] = left - 1
        raise ApiError("unindexed", message, status, exception_name)

    def insert_for(
        self, request: Request, route: Route, path_params: dict[str, str], principal: Any
    ) -> None:
        """The `insert` fault: a new item inside the window of a page after the first."""
        if not self.is_later_page(request):
            return
        level = route.name.split(".")[-1]
        scope = self.scope_of(level, path_params, principal)
        if route.name.startswith("commits"):
            query: Window = self.commit_query(request, scope, principal)  # type: ignore[assignment]
            activity.insert_while_paging(self.world, scope, "commits", query.since, query.until)
        else:
            pr_query = self.pull_request_query(request, scope, principal)
            activity.insert_while_paging(
                self.world, scope, "pull-requests", pr_query.since, pr_query.until
            )

    def is_later_page(self, request: Request) -> bool:
        raise NotImplementedError

    # the first page's paging parameters, e.g. (("start", "0"),)
    first_page_params: tuple[tuple[str, str], ...] = ()

    def first_page(self, request: Request) -> Request:
        """The same request for the first page (the `first_page` fault)."""
        query = {**request.query, **dict(self.first_page_params)}
        return replace(request, query=query, query_string=urlencode(query))

    def empty_page(self, request: Request) -> Response:
        """The `empty_pages` fault: an empty page of the request's list that says another
        follows, the envelope moving on."""
        raise NotImplementedError

    def visible_commits(self) -> list[int]:
        return self.store.commits(CommitQuery(GLOBAL, None, None, "include", False, None))

    def all_pull_requests(self) -> list[int]:
        return self.store.pull_requests(
            PullRequestQuery(GLOBAL, None, None, "created", "all", None)
        )
