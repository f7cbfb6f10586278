"""One paginator per paging scheme, and the one loop that drives them.

A paginator follows dlt core's three-method shape: `init_request` sets the first page's
parameters, `update_state` reads a page and decides whether there is another, `update_request`
sets the next page's URL or parameters. Each guards against a page token that repeats.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import SplitResult, parse_qsl, unquote, urlsplit

from .errors import FatalApiError, UnsafeLinkError

if TYPE_CHECKING:
    from .client import ApiClient


class Paginator(Protocol):
    def init_request(self, params: dict[str, Any]) -> None: ...
    def update_state(self, body: Any) -> None: ...
    def update_request(self, params: dict[str, Any]) -> str | None: ...
    def items(self, body: Any) -> list[Any]: ...
    @property
    def has_next(self) -> bool: ...


DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(parts: SplitResult) -> tuple[str, str | None, int | None]:
    """Scheme, host and port, the port made explicit (`https://h/` is `https://h:443/`)."""
    return parts.scheme, parts.hostname, parts.port or DEFAULT_PORTS.get(parts.scheme)


def has_dot_segments(path: str) -> bool:
    """`.` or `..` segments (also percent-encoded): clients resolve them out of the prefix."""
    return any(segment in (".", "..") for segment in unquote(path).split("/"))


class NextLinkPaginator:
    """Cloud edition: follow the absolute `next` link while there is one.

    Sample page: `{"values": [...], "page": 2, "pagelen": 500,
    "next": "https://host/rest/latest/workspace/w/commits?page=3&pagelen=500",
    "previous": "https://host/rest/latest/workspace/w/commits?page=1&pagelen=500"}`

    The link is followed only when it points to the configured scheme, host, port and API
    prefix: the session's credentials go nowhere else.
    """

    def __init__(self, page_size: int, api_base: str) -> None:
        self.page_size = page_size
        self.api_base = api_base.rstrip("/")
        self._base = urlsplit(self.api_base)
        self._next: str | None = None
        self._seen: set[str] = set()
        self.has_next = False

    def init_request(self, params: dict[str, Any]) -> None:
        params["pagelen"] = self.page_size

    def update_state(self, body: Any) -> None:
        link = body.get("next") if isinstance(body, dict) else None
        self.has_next = bool(link)
        if not link:
            return
        if not self._is_safe(link):
            raise UnsafeLinkError(link.split("?", 1)[0], self.api_base)
        if link in self._seen:
            raise FatalApiError("repeating_page", f"the host sent the same next link twice "
                                f"(`{link}`); stopping instead of looping")
        self._seen.add(link)
        self._next = link

    def _is_safe(self, link: str) -> bool:
        """Same scheme, host and port as the API base, and a path inside its prefix."""
        target = urlsplit(link)
        try:
            same_origin = origin(target) == origin(self._base)
        except ValueError:  # a port that is not a number or out of range
            return False
        return (same_origin and not has_dot_segments(target.path)
                and target.path.startswith(self._base.path + "/"))

    def update_request(self, params: dict[str, Any]) -> str | None:
        """The next URL: it carries every parameter itself, so `params` is emptied."""
        link, self._next = self._next, None
        if link is None:
            return None
        params.clear()
        params.update(parse_qsl(urlsplit(link).query, keep_blank_values=True))
        return link.split("?", 1)[0]

    @staticmethod
    def items(body: Any) -> list[Any]:
        return list(body.get("values") or ())


class StartLimitPaginator:
    """Self-hosted edition: `start`/`limit` offsets until `isLastPage`.

    Sample page: `{"values": [...], "size": 1000, "limit": 1000, "isLastPage": false,
    "start": 0, "nextPageStart": 1000}`
    """

    def __init__(self, page_size: int, api_base: str = "") -> None:
        self.page_size = page_size
        self._next_start: int | None = None
        self._last_start = -1
        self.has_next = False

    def init_request(self, params: dict[str, Any]) -> None:
        params["start"] = self._last_start = 0  # the next start must pass the first page's
        params["limit"] = self.page_size

    def update_state(self, body: Any) -> None:
        self.has_next = not body.get("isLastPage", True)
        if not self.has_next:
            return
        start = body.get("nextPageStart")
        if not isinstance(start, int) or start <= self._last_start:
            raise FatalApiError("repeating_page", f"the host sent nextPageStart={start!r} "
                                f"after start={self._last_start}; stopping instead of looping")
        self._last_start = start
        self._next_start = start

    def update_request(self, params: dict[str, Any]) -> str | None:
        if self._next_start is None:
            return None
        params["start"], self._next_start = self._next_start, None
        return ""  # same path

    @staticmethod
    def items(body: Any) -> list[Any]:
        return list(body.get("values") or ())


def pages(client: ApiClient, paginator: Paginator, path: str,
          params: Mapping[str, Any], label: str) -> Iterator[list[Any]]:
    """Every page's items, in the host's order; the only paging loop of the extractor."""
    query = dict(params)
    paginator.init_request(query)
    url = path
    while True:
        body = client.get_json(url, query, label).body
        paginator.update_state(body)
        yield paginator.items(body)
        if not paginator.has_next:
            return
        following = paginator.update_request(query)
        if following is None:
            return
        if following:
            url = following
