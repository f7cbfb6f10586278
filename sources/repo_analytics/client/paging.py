"""One paginator per paging scheme (the loop that drives them: `reading.readers.pages`).

A paging scheme (`NextLink`, `StartLimit`) is data an endpoint table names, with the
edition's parameter and field names; it makes a fresh paginator for each read. A paginator
follows dlt core's three-method shape: `init_request` sets the first page's parameters,
`update_state` reads a page and decides whether there is another, `update_request` sets the
next page's URL or parameters. Each guards against a page token that repeats.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, parse_qsl, unquote, urlsplit

import pyarrow as pa

from ..errors import DowngradeLinkError, EndlessList, FatalApiError, UnsafeLinkError


@dataclass(frozen=True)
class NextLink:
    """Pages linked by an absolute URL in each page (`next_key`), items under `items_key`;
    the first request sets the page size in `page_size_param`."""

    page_size_param: str
    next_key: str
    items_key: str

    @property
    def head(self) -> tuple[tuple[str, pa.DataType], ...]:
        return ((self.next_key, pa.string()),)

    @property
    def required(self) -> tuple[str, ...]:
        return ()

    def paginator(self, page_size: int, api_base: str) -> NextLinkPaginator:
        return NextLinkPaginator(page_size, api_base, self)


@dataclass(frozen=True)
class StartLimit:
    """Offset paging: `start_param`/`page_size_param` until the page says `last_page_key`,
    the next offset in `next_start_key`, items under `items_key`."""

    start_param: str
    page_size_param: str
    last_page_key: str
    next_start_key: str
    items_key: str

    @property
    def head(self) -> tuple[tuple[str, pa.DataType], ...]:
        return ((self.last_page_key, pa.bool_()), (self.next_start_key, pa.int64()))

    @property
    def required(self) -> tuple[str, ...]:
        return (self.last_page_key,)  # absent: the last page

    def paginator(self, page_size: int, api_base: str) -> StartLimitPaginator:
        return StartLimitPaginator(page_size, self)


DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(parts: SplitResult) -> tuple[str, str | None, int | None]:
    """Scheme, host and port, the port made explicit (`https://h/` is `https://h:443/`)."""
    return parts.scheme, parts.hostname, parts.port or DEFAULT_PORTS.get(parts.scheme)


def has_dot_segments(path: str) -> bool:
    """`.` or `..` segments (also percent-encoded): clients resolve them out of the prefix."""
    return any(segment in (".", "..") for segment in unquote(path).split("/"))


class NextLinkPaginator:
    """Follow the absolute next link while there is one (the cloud edition's scheme).

    Sample page (cloud names): `{"values": [...], "page": 2, "pagelen": 500,
    "next": "https://host/rest/latest/workspace/w/commits?page=3&pagelen=500",
    "previous": "https://host/rest/latest/workspace/w/commits?page=1&pagelen=500"}`

    The link is followed only when it points to the configured scheme, host, port and API
    prefix: the session's credentials go nowhere else.
    """

    def __init__(self, page_size: int, api_base: str, scheme: NextLink) -> None:
        self.page_size = page_size
        self.scheme = scheme
        self.api_base = api_base.rstrip("/")
        self._base = urlsplit(self.api_base)
        self._next: str | None = None
        self._seen: set[str] = set()
        self.has_next = False

    def init_request(self, params: dict[str, Any]) -> None:
        params[self.scheme.page_size_param] = self.page_size

    def update_state(self, body: Any) -> None:
        link = body.get(self.scheme.next_key) if isinstance(body, dict) else None
        self.has_next = bool(link)
        if not link:
            return
        if self._base.scheme == "https" and urlsplit(link).scheme.lower() == "http":
            raise DowngradeLinkError(link, self.api_base)
        if not self._is_safe(link):
            raise UnsafeLinkError(link.split("?", 1)[0], self.api_base)
        if link in self._seen:
            raise FatalApiError(
                "repeating_page",
                f"the host sent the same next link twice (`{link}`); stopping instead of looping",
            )
        self._seen.add(link)
        self._next = link

    def _is_safe(self, link: str) -> bool:
        """Same scheme, host and port as the API base, and a path inside its prefix."""
        target = urlsplit(link)
        try:
            same_origin = origin(target) == origin(self._base)
        except ValueError:  # a port that is not a number or out of range
            return False
        return (
            same_origin
            and not has_dot_segments(target.path)
            and target.path.startswith(self._base.path + "/")
        )

    def update_request(self, params: dict[str, Any]) -> str | None:
        """The next URL: it carries every parameter itself, so `params` is emptied."""
        link, self._next = self._next, None
        if link is None:
            return None
        params.clear()
        params.update(parse_qsl(urlsplit(link).query, keep_blank_values=True))
        return link.split("?", 1)[0]

    def items(self, body: Any) -> Sequence[Any]:
        return items_of(body, self.scheme.items_key)


class StartLimitPaginator:
    """Offsets until the last page (the self-hosted edition's scheme).

    Sample page (self-hosted names): `{"values": [...], "size": 1000, "limit": 1000,
    "isLastPage": false, "start": 0, "nextPageStart": 1000}`
    """

    def __init__(self, page_size: int, scheme: StartLimit) -> None:
        self.page_size = page_size
        self.scheme = scheme
        self._next_start: int | None = None
        self._last_start = -1
        self.has_next = False

    def init_request(self, params: dict[str, Any]) -> None:
        # the next start must pass the first page's
        params[self.scheme.start_param] = self._last_start = 0
        params[self.scheme.page_size_param] = self.page_size

    def update_state(self, body: Any) -> None:
        self.has_next = not body.get(self.scheme.last_page_key, True)
        if not self.has_next:
            return
        start = body.get(self.scheme.next_start_key)
        if not isinstance(start, int) or start <= self._last_start:
            raise FatalApiError(
                "repeating_page",
                f"the host sent {self.scheme.next_start_key}="
                f"{start!r} after {self.scheme.start_param}={self._last_start}; "
                "stopping instead of looping",
            )
        # a page holds at most the page size asked (or more, where a host ignores it): a
        # start beyond the items this page had would skip items, or page on for ever
        if start > self._last_start + max(self.page_size, len(self.items(body))):
            raise EndlessList(
                f"sent {self.scheme.next_start_key}={start} after a page of "
                f"{len(self.items(body))} items at {self.scheme.start_param}="
                f"{self._last_start}: no page before made that start plausible"
            )
        self._last_start = start
        self._next_start = start

    def update_request(self, params: dict[str, Any]) -> str | None:
        if self._next_start is None:
            return None
        params[self.scheme.start_param], self._next_start = self._next_start, None
        return ""  # same path

    def items(self, body: Any) -> Sequence[Any]:
        return items_of(body, self.scheme.items_key)


def items_of(body: Any, key: str) -> Sequence[Any]:
    """A page's items: a sequence as it is (a JSON list, or the items Arrow decoded)."""
    found = body.get(key)
    return found if isinstance(found, Sequence) else list(found or ())
