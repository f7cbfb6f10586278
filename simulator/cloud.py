"""The cloud edition: 11 endpoints under /rest/latest, page/pagelen paging, raw-token auth."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import orjson

from . import render
from .app import Route, route
from .data.world import GLOBAL, Scope, World
from .edition import THIRTY_DAYS_S, EditionBase
from .http import Request, Response, json_response
from .params import ApiError, boolean, choice, integer, window
from .queries import CommitQuery, PullRequestQuery, distribution, state_counts

MAX_PAGELEN = 500
PR_STATES = ("all", "open", "merged", "declined", "superseded")
MERGES = ("exclude", "include", "only")
LICENSE_MESSAGE = (
    "Repository Analytics Export API is available only with an active commercial or trial "
    "license. See the plan details page in the workspace settings of the app."
)
MESSAGES = {
    "token": "Access token is invalid or expired.",
    "forbidden": "Forbidden",
    "unindexed": "The repository has unindexed changes.",
    "loc_disabled": "Lines of code indexing is disabled for this repository.",
    "repo_not_found": "Repository not found.",
    "workspace_not_found": "Workspace not found.",
    "user_not_found": "User not found.",
}


class CloudEdition(EditionBase):
    name = "cloud"
    states = ("OPEN", "MERGED", "DECLINED", "SUPERSEDED")

    def build_routes(self) -> list[Route]:
        ws = "/workspace/{ws}"
        user_forms = {"both": (ws, "/{ws}"), "short": ("/{ws}",), "long": (ws,)}
        forms = user_forms.get(self.conditions.path_forms, (ws, "/{ws}"))
        routes = [
            route("pull-requests.list.workspace", f"{ws}/pull-requests", self.pr_list, True),
            route(
                "pull-requests.statistics.workspace",
                f"{ws}/pull-requests/statistics",
                self.pr_statistics,
            ),
            route(
                "pull-requests.list.repository",
                f"{ws}/repos/{{repo}}/pull-requests",
                self.pr_list,
                True,
            ),
            route(
                "pull-requests.statistics.repository",
                f"{ws}/repos/{{repo}}/pull-requests/statistics",
                self.pr_statistics,
            ),
            route(
                "pull-requests.list.user", f"{ws}/users/{{user}}/pull-requests", self.pr_list, True
            ),
            route("commits.list.workspace", f"{ws}/commits", self.commit_list, True),
            route(
                "commits.list.repository", f"{ws}/repos/{{repo}}/commits", self.commit_list, True
            ),
            route(
                "commits.changes-statistics.repository",
                f"{ws}/repos/{{repo}}/changes-statistics",
                self.changes_statistics,
            ),
            route("commits.list.user", f"{ws}/users/{{user}}/commits", self.commit_list, True),
        ]
        for form in forms:
            suffix = "long" if form == ws else "short"
            routes.append(
                route(
                    f"pull-requests.statistics.user.{suffix}",
                    f"{form}/users/{{user}}/pull-requests/statistics",
                    self.pr_statistics,
                )
            )
            routes.append(route(f"users.list.{suffix}", f"{form}/users", self.user_list))
        return routes

    # rendering -------------------------------------------------------------------------------
    def render_commit(self, world: World, commit: Any) -> bytes:
        return render.cloud_commit(world, commit)

    def render_pull_request(self, world: World, pr: Any) -> bytes:
        return render.cloud_pull_request(world, pr)

    # auth, errors ----------------------------------------------------------------------------
    def authenticate(self, request: Request) -> Any:
        token = request.headers.get("authorization", "")
        if token and token == self.config.token:
            return "token"
        return self.error(ApiError("token", MESSAGES["token"], 401))

    def error(self, error: ApiError) -> Response:
        status = (
            401
            if error.kind == "token"
            else self.conditions.cloud_status.get(error.kind, error.status)
        )
        body: dict[str, Any] = {"message": error.message}
        if error.detail:
            body["detail"] = error.detail
        return json_response(status, orjson.dumps({"type": "error", "error": body}))

    def license_error(self) -> Response:
        return self.error(ApiError("license", LICENSE_MESSAGE, 403))

    # scopes and queries ----------------------------------------------------------------------
    def scope_of(self, level: str, path_params: dict[str, str], principal: Any) -> Scope:
        if path_params.get("ws") != self.config.workspace:
            raise ApiError("workspace_not_found", MESSAGES["workspace_not_found"], 404)
        if "repo" in path_params:
            if path_params["repo"] not in self.world.repos:
                raise ApiError("repo_not_found", MESSAGES["repo_not_found"], 404)
            return ("repo", path_params["repo"])
        if "user" in path_params:
            for user in self.world.users.values():
                if user.uuid == path_params["user"]:
                    return ("user", user.slug)
            raise ApiError("user_not_found", MESSAGES["user_not_found"], 404)
        return GLOBAL

    def commit_query(self, request: Request, scope: Scope, principal: Any) -> CommitQuery:
        query = request.query
        days = self.conditions.commit_default_days
        span = window(
            query, "since_date", "until_date", 1, days * 86_400 if days else None, self.world.now_s
        )
        readable = self.readable(principal) if scope[0] != "repo" else None
        return CommitQuery(
            scope,
            span.since,
            span.until,
            choice(query, "merges", MERGES, "exclude"),
            choice(query, "order", ("oldest", "newest"), "newest") == "newest",
            readable,
        )

    def pull_request_query(
        self, request: Request, scope: Scope, principal: Any
    ) -> PullRequestQuery:
        query = request.query
        span = window(query, "since_date", "until_date", 1000, THIRTY_DAYS_S, self.world.now_s)
        return PullRequestQuery(
            scope,
            span.since,
            span.until,
            choice(query, "date_type", ("created", "updated"), "created"),
            choice(query, "state", PR_STATES, "all"),
            None,
        )

    def is_later_page(self, request: Request) -> bool:
        return request.query.get("page", "1") not in ("", "1")

    first_page_params = (("page", "1"),)

    def empty_page(self, request: Request) -> Response:
        number = integer(request.query, "page", 1, 1)
        size = self.page_size(
            integer(request.query, "pagelen", MAX_PAGELEN, 1), MAX_PAGELEN, "pagelen", "error"
        )
        body: dict[str, Any] = {"values": [], "page": number, "pagelen": size}
        body["next"] = self.link(request, number + 1, size)
        if number > 1:
            body["previous"] = self.link(request, number - 1, size)
        return json_response(200, orjson.dumps(body))

    # paging ------------------------------------------------------------------------------------
    def page(self, request: Request, indexes: list[int], item: Any) -> Response:
        number = integer(request.query, "page", 1, 1)
        size = self.page_size(
            integer(request.query, "pagelen", MAX_PAGELEN, 1), MAX_PAGELEN, "pagelen", "error"
        )
        chosen = indexes[(number - 1) * size : number * size]
        parts = [
            b'{"values":[',
            b",".join(item(i) for i in chosen),
            b'],"page":%d,"pagelen":%d' % (number, size),
        ]
        if number * size < len(indexes):
            parts.append(b',"next":' + orjson.dumps(self.link(request, number + 1, size)))
        if number > 1:
            parts.append(b',"previous":' + orjson.dumps(self.link(request, number - 1, size)))
        parts.append(b"}")
        return json_response(200, b"".join(parts))

    def link(self, request: Request, number: int, size: int) -> str:
        params = dict(request.query)
        params.update(page=str(number), pagelen=str(size))
        base = self.conditions.next_link_base or self.app.base_url
        return f"{base}{request.raw_path}?{urlencode(params)}"

    # handlers ----------------------------------------------------------------------------------
    def pr_list(self, request: Request, path_params: dict[str, str], principal: Any) -> Response:
        scope = self.scope_of("", path_params, principal)
        found = self.store.pull_requests(self.pull_request_query(request, scope, principal))
        return self.page(request, found, self.store.pull_request_item)

    def pr_statistics(
        self, request: Request, path_params: dict[str, str], principal: Any
    ) -> Response:
        scope = self.scope_of("", path_params, principal)
        found = self.store.pull_requests(self.pull_request_query(request, scope, principal))
        counts = state_counts(self.world, found, ("declined", "merged", "open", "superseded"))
        return json_response(200, orjson.dumps({"pull_requests": len(found), "state": counts}))

    def repository_checks(self, repo: str, lines_wanted: bool) -> None:
        if repo in self.conditions.forbidden:
            raise ApiError("forbidden", MESSAGES["forbidden"], 403)
        self.check_unindexed(repo, MESSAGES["unindexed"], 409)
        if lines_wanted and repo in self.conditions.loc_disabled:
            raise ApiError("loc_disabled", MESSAGES["loc_disabled"], 400)

    def commit_list(
        self, request: Request, path_params: dict[str, str], principal: Any
    ) -> Response:
        scope = self.scope_of("", path_params, principal)
        with_lines = False
        if scope[0] == "repo":
            with_lines = boolean(request.query, "with_lines")
            self.repository_checks(scope[1], with_lines)
        found = self.store.commits(self.commit_query(request, scope, principal))
        item = self.store.commit_item
        if with_lines:
            commits = self.world.commits
            return self.page(request, found, lambda i: render.with_cloud_lines(item(i), commits[i]))
        return self.page(request, found, item)

    def changes_statistics(
        self, request: Request, path_params: dict[str, str], principal: Any
    ) -> Response:
        scope = self.scope_of("", path_params, principal)
        self.repository_checks(scope[1], True)
        found = self.store.commits(self.commit_query(request, scope, principal))
        commits = [self.world.commits[i] for i in found]
        body = {
            "commits": len(commits),
            "lines_of_code": {
                "added": distribution([c.added for c in commits]),
                "changed": distribution([c.added + c.deleted for c in commits]),
                "deleted": distribution([c.deleted for c in commits]),
            },
        }
        return json_response(200, orjson.dumps(body))

    def user_list(self, request: Request, path_params: dict[str, str], principal: Any) -> Response:
        self.scope_of("", {"ws": path_params["ws"]}, principal)
        wanted = request.query.get("filter_display_name")
        users = sorted(self.world.users.values(), key=lambda u: (u.display_name, u.uuid))
        values = [
            {"uuid": u.uuid, "display_name": u.display_name}
            for u in users
            if wanted is None or u.display_name == wanted
        ]
        return json_response(
            200, orjson.dumps({"values": values, "page": 1, "pagelen": len(values)})
        )

    # ground truth ------------------------------------------------------------------------------
    def truth(self, kind: str, query: dict[str, str]) -> list[dict[str, Any]]:
        world = self.world
        if kind == "commits":
            out = []
            for idx in self.visible_commits():
                commit = world.commits[idx]
                item = orjson.loads(render.with_cloud_lines(self.store.commit_item(idx), commit))
                author = world.authors[commit.author]
                item["_sim"] = {
                    "instant": render.iso_seconds_z(commit.time),
                    "offset_minutes": commit.tz_minutes,
                    "pushed": render.iso_seconds_z(commit.pushed),
                    "user": author.user_slug,
                    "email": author.email,
                    "is_merge": commit.is_merge,
                    "project": world.repos[commit.repo].project_key,
                }
                out.append(item)
            return out
        if kind == "pull-requests":
            out = []
            for idx in self.all_pull_requests():
                pr = world.prs[idx]
                item = orjson.loads(self.store.pull_request_item(idx))
                item["_sim"] = {
                    "user": pr.author_slug,
                    "created_ms": pr.created_ms,
                    "updated_ms": pr.updated_ms,
                    "closed_ms": pr.closed_ms,
                    "project": world.repos[pr.repo].project_key,
                }
                out.append(item)
            return out
        if kind == "users":
            return [
                {
                    "uuid": u.uuid,
                    "display_name": u.display_name,
                    "_sim": {"slug": u.slug, "email": u.email, "aliases": list(u.aliases)},
                }
                for u in world.users.values()
            ]
        if kind == "repositories":
            return [
                {
                    "slug": r.slug,
                    "name": r.name,
                    "_sim": {
                        "project": r.project_key,
                        "loc_disabled": r.slug in self.conditions.loc_disabled,
                        "forbidden": r.slug in self.conditions.forbidden,
                    },
                }
                for r in world.repos.values()
            ]
        raise ApiError(
            "not_found",
            f"unknown truth kind {kind!r}; valid: commits, pull-requests, users, repositories",
            404,
        )
