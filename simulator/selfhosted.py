"""The self-hosted edition: 25 endpoints, start/limit paging, basic or Bearer auth, CSV."""

from __future__ import annotations

import base64
import csv
import io
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import orjson

from . import render
from .app import HostApp, Route, route
from .config import Principal
from .data.world import GLOBAL, Scope, World
from .edition import THIRTY_DAYS_S, EditionBase
from .http import Request, Response, json_response
from .params import ApiError, boolean, choice, integer, invalid, window
from .queries import CommitQuery, PullRequestQuery, state_counts

LIMIT_DEFAULT = 25
LIMIT_MAX = {"commits": 1000, "pull-requests": 500}
CSV_MAX_DAYS = 366
CSV_BATCH_ROWS = 500
PR_STATES = ("all", "open", "merged", "declined")
MERGES = ("exclude", "include", "only")
EXC = "com.analytics.api."
LEVEL_PATHS = {
    "global": "",
    "project": "/projects/{project}",
    "repository": "/projects/{project}/repos/{repo}",
    "user": "/users/{user}",
}


def error_body(message: str, exception_name: str | None, context: str | None = None) -> bytes:
    return orjson.dumps(
        {"errors": [{"context": context, "message": message, "exceptionName": exception_name}]}
    )


class ServerEdition(EditionBase):
    name = "server"
    states = ("OPEN", "MERGED", "DECLINED")

    def __init__(self, app: HostApp) -> None:
        first_project = next(iter(app.world.projects), None)
        self.principals = app.config.principals(first_project)
        super().__init__(app)

    def build_routes(self) -> list[Route]:
        routes = []
        for level, prefix in LEVEL_PATHS.items():
            for kind in ("commits", "pull-requests"):
                routes += [
                    route(
                        f"{kind}.statistics.{level}", f"{prefix}/{kind}/statistics", self.statistics
                    ),
                    route(f"{kind}.csv.{level}", f"{prefix}/{kind}/export/csv", self.csv_export),
                    route(f"{kind}.list.{level}", f"{prefix}/{kind}", self.item_list, True),
                ]
        routes.append(
            route(
                "commits.single.repository",
                "/projects/{project}/repos/{repo}/commits/{commit}",
                self.single_commit,
            )
        )
        return routes

    # rendering -------------------------------------------------------------------------------
    def render_commit(self, world: World, commit: Any) -> bytes:
        return render.server_commit(world, commit, self.conditions.server_parent_id_length)

    def render_pull_request(self, world: World, pr: Any) -> bytes:
        return render.server_pull_request(world, pr, self.app.base_url)

    # auth, errors ----------------------------------------------------------------------------
    def authenticate(self, request: Request) -> Any:
        header = request.headers.get("authorization", "")
        scheme, _, credential = header.partition(" ")
        if scheme.lower() == "basic":
            try:
                username, _, password = base64.b64decode(credential).decode().partition(":")
            except ValueError:
                username, password = "", ""
            principal = self.principals.get(username)
            if principal is not None and principal.password == password:
                return principal
        elif scheme.lower() == "bearer":
            for principal in self.principals.values():
                if credential in principal.tokens:
                    return principal
        return json_response(
            401,
            error_body(
                "Authentication failed. Please check your credentials and try again.",
                "com.analytics.auth.IncorrectPasswordAuthenticationException",
            ),
        )

    def error(self, error: ApiError) -> Response:
        message = error.message if not error.detail else f"{error.message}: {error.detail}"
        return json_response(error.status, error_body(message, error.exception_name, error.context))

    def license_error(self) -> Response:
        return json_response(
            402,
            error_body(
                "The Repository Analytics Export API is available only with a commercial or "
                "evaluation license for the app.",
                None,
            ),
        )

    # permissions and scopes -------------------------------------------------------------------
    def readable(self, principal: Principal) -> frozenset[str] | None:
        if principal.projects is None and not self.conditions.forbidden:
            return None
        allowed = principal.projects
        return frozenset(
            slug
            for slug, repo in self.world.repos.items()
            if (allowed is None or repo.project_key in allowed)
            and slug not in self.conditions.forbidden
        )

    def scope_of(self, level: str, path_params: dict[str, str], principal: Any) -> Scope:
        world = self.world
        key = path_params.get("project")
        if key is not None:
            if key not in world.projects:
                raise ApiError(
                    "not_found",
                    f"Project {key} does not exist.",
                    404,
                    EXC + "NoSuchProjectException",
                )
            if principal.projects is not None and key not in principal.projects:
                raise ApiError(
                    "forbidden",
                    "You are not permitted to access this resource",
                    403,
                    EXC + "AuthorisationException",
                )
        slug = path_params.get("repo")
        if slug is not None:
            repo = world.repos.get(slug)
            if repo is None or repo.project_key != key:
                raise ApiError(
                    "not_found",
                    f"Repository {key}/{slug} does not exist.",
                    404,
                    EXC + "NoSuchRepositoryException",
                )
            if slug in self.conditions.forbidden:
                raise ApiError(
                    "forbidden",
                    "You are not permitted to access this resource",
                    403,
                    EXC + "AuthorisationException",
                )
            return ("repo", slug)
        if key is not None:
            return ("project", key)
        user = path_params.get("user")
        if user is not None:
            if user not in world.users:
                raise ApiError(
                    "not_found", f"User {user} does not exist.", 404, EXC + "NoSuchUserException"
                )
            return ("user", user)
        return GLOBAL

    def commit_query(self, request: Request, scope: Scope, principal: Any) -> CommitQuery:
        query = request.query
        days = self.conditions.commit_default_days
        span = window(
            query, "sinceDate", "untilDate", 1, days * 86_400 if days else None, self.world.now_s
        )
        return CommitQuery(
            scope,
            span.since,
            span.until,
            choice(query, "merges", MERGES, "include"),
            choice(query, "order", ("oldest", "newest"), "newest") == "newest",
            self.readable(principal),
        )

    def pull_request_query(
        self, request: Request, scope: Scope, principal: Any
    ) -> PullRequestQuery:
        query = request.query
        span = window(query, "sinceDate", "untilDate", 1000, None, self.world.now_s)
        return PullRequestQuery(
            scope,
            span.since,
            span.until,
            choice(query, "dateType", ("created", "updated"), "created"),
            choice(query, "state", PR_STATES, "all"),
            self.readable(principal),
        )

    def is_later_page(self, request: Request) -> bool:
        return request.query.get("start", "0") not in ("", "0")

    first_page_params = (("start", "0"),)

    def empty_page(self, request: Request) -> Response:
        kind = "commits" if request.path.endswith("/commits") else "pull-requests"
        start = integer(request.query, "start", 0, 0)
        limit = self.page_size(
            integer(request.query, "limit", LIMIT_DEFAULT, 1), LIMIT_MAX[kind], "limit", "clamp"
        )
        body = {
            "size": 0,
            "limit": limit,
            "isLastPage": False,
            "start": start,
            "nextPageStart": start + limit,
            "values": [],
        }
        return json_response(200, orjson.dumps(body))

    # handlers ----------------------------------------------------------------------------------
    def item_list(self, request: Request, path_params: dict[str, str], principal: Any) -> Response:
        kind = "commits" if request.path.endswith("/commits") else "pull-requests"
        scope = self.scope_of("", path_params, principal)
        start = integer(request.query, "start", 0, 0)
        limit = self.page_size(
            integer(request.query, "limit", LIMIT_DEFAULT, 1), LIMIT_MAX[kind], "limit", "clamp"
        )
        if kind == "commits":
            found = self.store.commits(self.commit_query(request, scope, principal))
            item = self.store.commit_item
        else:
            found = self.store.pull_requests(self.pull_request_query(request, scope, principal))
            item = self.store.pull_request_item
        chosen = found[start : start + limit]
        last = start + len(chosen) >= len(found)
        head = b'{"size":%d,"limit":%d,"isLastPage":%s,"start":%d' % (
            len(chosen),
            limit,
            b"true" if last else b"false",
            start,
        )
        if not last:
            head += b',"nextPageStart":%d' % (start + len(chosen))
        body = b"".join((head, b',"values":[', b",".join(item(i) for i in chosen), b"]}"))
        return json_response(200, body)

    def statistics(self, request: Request, path_params: dict[str, str], principal: Any) -> Response:
        scope = self.scope_of("", path_params, principal)
        if "/commits/" in request.path:
            found = self.store.commits(self.commit_query(request, scope, principal))
            commits = self.world.commits
            body: dict[str, Any] = {
                "linesOfCode": {
                    "added": sum(commits[i].added for i in found),
                    "deleted": sum(commits[i].deleted for i in found),
                },
                "commits": len(found),
            }
        else:
            found = self.store.pull_requests(self.pull_request_query(request, scope, principal))
            body = {
                "pullRequests": len(found),
                "state": state_counts(self.world, found, ("declined", "merged", "open")),
            }
        return json_response(200, orjson.dumps(body))

    def csv_window(self, request: Request, scale: int) -> tuple[int, int | None]:
        """(since, until) in seconds (scale 1) or ms (1000): 30 days by default, at most 366.

        Without untilDate the window runs up to and including now (until None), as the list
        with the same sinceDate does: items dated at the present instant are exported.
        """
        span = window(request.query, "sinceDate", "untilDate", scale, None, self.world.now_s)
        end = span.until if span.until is not None else self.world.now_s * scale
        since = span.since if span.since is not None else end - THIRTY_DAYS_S * scale
        if end - since > CSV_MAX_DAYS * 86_400 * scale:
            raise invalid(
                "sinceDate",
                request.query.get("sinceDate", ""),
                f"a timeframe of at most {CSV_MAX_DAYS} days before untilDate="
                f"{request.query.get('untilDate') or 'now'}",
            )
        return since, span.until

    def csv_export(self, request: Request, path_params: dict[str, str], principal: Any) -> Response:
        scope = self.scope_of("", path_params, principal)
        world = self.world
        if "/commits/" in request.path:
            since, until = self.csv_window(request, 1)
            found = self.store.commits(
                replace(self.commit_query(request, scope, principal), since=since, until=until)
            )
            rows: Any = (render.commit_csv_row(world, world.commits[i]) for i in found)
            header: tuple[str, ...] = render.COMMIT_CSV_HEADER
        else:
            since, until = self.csv_window(request, 1000)
            found = self.store.pull_requests(
                replace(
                    self.pull_request_query(request, scope, principal), since=since, until=until
                )
            )
            rows = (render.pull_request_csv_row(world, world.prs[i]) for i in found)
            header = render.PULL_REQUEST_CSV_HEADER
        name = "commits" if "/commits/" in request.path else "pull-requests"
        return Response(
            200,
            csv_chunks(header, rows),
            "text/csv;charset=UTF-8",
            {"Content-Disposition": f'attachment; filename="{name}.csv"'},
        )

    def single_commit(
        self, request: Request, path_params: dict[str, str], principal: Any
    ) -> Response:
        scope = self.scope_of("", path_params, principal)
        slug, wanted = scope[1], path_params["commit"].lower()
        self.check_unindexed(
            slug,
            f"Commit '{wanted}' cannot be found because repository '{slug}' has "
            "unindexed changes. Try again later.",
            409,
            EXC + "RepositoryNotIndexedException",
        )
        world = self.world
        now = world.now_s
        matches = [
            h
            for h in world.commits_matching_prefix(slug, wanted)
            if world.commits[world.commit_by_hash[h]].pushed <= now
        ]
        if len(matches) > 1:
            raise ApiError(
                "ambiguous",
                f"Commit ID '{wanted}' is ambiguous: use more "
                f"characters. Candidates: {', '.join(matches)}",
                400,
                EXC + "AmbiguousCommitIdException",
            )
        if not matches:
            raise ApiError(
                "not_found",
                f"Commit '{wanted}' does not exist in repository '{slug}'.",
                404,
                EXC + "NoSuchCommitException",
            )
        commit = world.commits[world.commit_by_hash[matches[0]]]
        length = self.conditions.server_parent_id_length
        if boolean(request.query, "withFiles"):
            return json_response(200, render.server_commit_with_files(world, commit, length))
        return json_response(200, render.server_commit(world, commit, length))

    # ground truth ------------------------------------------------------------------------------
    def truth(self, kind: str, query: dict[str, str]) -> list[dict[str, Any]]:
        world = self.world
        if kind == "commits":
            out = []
            for idx in self.visible_commits():
                commit = world.commits[idx]
                item = orjson.loads(self.store.commit_item(idx))
                author = world.authors[commit.author]
                item["_sim"] = {
                    "pushed": render.iso_seconds_z(commit.pushed),
                    "offset_minutes": commit.tz_minutes,
                    "user": author.user_slug,
                    "is_merge": commit.is_merge,
                    "parents": list(commit.parents),
                }
                out.append(item)
            return out
        if kind == "pull-requests":
            out = []
            for idx in self.all_pull_requests():
                pr = world.prs[idx]
                item = orjson.loads(self.store.pull_request_item(idx))
                item["_sim"] = {"closed_ms": pr.closed_ms}
                out.append(item)
            return out
        if kind == "users":
            return [
                {
                    **render.server_user(world, u.slug),
                    "slug": u.slug,
                    "_sim": {"aliases": list(u.aliases)},
                }
                for u in world.users.values()
            ]
        if kind == "repositories":
            return [
                {
                    **render.server_repository(world, slug),
                    "_sim": {"forbidden": slug in self.conditions.forbidden},
                }
                for slug in world.repos
            ]
        if kind == "projects":
            return [{"key": p.key, "name": p.name, "type": p.type} for p in world.projects.values()]
        if kind == "files":
            wanted = query.get("commit")
            chosen = [world.commit_by_hash[wanted]] if wanted else self.visible_commits()
            return [
                {
                    "id": world.commits[i].hash,
                    "repository": world.commits[i].repo,
                    "files": [
                        {"path": p, "linesOfCode": {"added": a, "deleted": d}}
                        for p, a, d in render.commit_files(world.commits[i])
                    ],
                }
                for i in chosen
            ]
        raise ApiError(
            "not_found",
            f"unknown truth kind {kind!r}; valid: commits, "
            "pull-requests, users, repositories, projects, files",
            404,
        )


def csv_chunks(header: tuple[str, ...], rows: Iterator[tuple[object, ...]]) -> Iterator[bytes]:
    """The CSV document in chunks of a few hundred rows, so nothing is held whole."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(header)
    count = 0
    for row in rows:
        writer.writerow(row)
        count += 1
        if count % CSV_BATCH_ROWS == 0:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue().encode()
