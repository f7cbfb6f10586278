"""One paginator per paging scheme, and the one loop that drives them.

A paging scheme (`NextLink`, `StartLimit`) is data an endpoint table names, with the
edition's parameter and field names; it makes a fresh paginator for each read. A paginator
follows dlt core's three-method shape: `init_request` sets the first page's parameters,
`update_state` reads a page and decides whether there is another, `update_request` sets the
next page's URL or parameters. Each guards against a page token that repeats.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import SplitResult, parse_qsl, unquote, urlencode, urlsplit

import pyarrow as pa

from .errors import DowngradeLinkError, EndlessList, FatalApiError, UnsafeLinkError, bare_url
from .mapping import ArrowItems
from .settings import EMPTY_PAGES_MOST

if TYPE_CHECKING:
    from .arrow_pages import PageShape
    from .client import ApiClient


class Paginator(Protocol):
    def init_request(self, params: dict[str, Any]) -> None: ...
    def update_state(self, body: Any) -> None: ...
    def update_request(self, params: dict[str, Any]) -> str | None: ...
    def items(self, body: Any) -> Sequence[Any]: ...
    @property
    def has_next(self) -> bool: ...


class Paging(Protocol):
    """A paging scheme with an edition's names: what an endpoint table names."""

    @property
    def page_size_param(self) -> str: ...
    @property
    def items_key(self) -> str: ...
    @property
    def head(self) -> tuple[tuple[str, pa.DataType], ...]:
        """The page's top-level fields the paginator reads, with their types (`arrow_pages`)."""

    @property
    def required(self) -> tuple[str, ...]:
        """Those of them whose absence the paginator reads otherwise than a null."""

    def paginator(self, page_size: int, api_base: str) -> Paginator: ...
    def __hash__(self) -> int: ...


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
    """A page's items: those Arrow decoded as they are, else as a list."""
    found = body.get(key)
    return found if isinstance(found, ArrowItems) else list(found or ())


def pages(
    client: ApiClient,
    paginator: Paginator,
    path: str,
    params: Mapping[str, Any],
    label: str,
    shape: PageShape | None = None,
) -> Iterator[Sequence[Any]]:
    """Every page's items, in the host's order; the only paging loop of the extractor.
    `shape`: how Arrow may read a page (`arrow_pages`).

    A list that would not end stops with `EndlessList` (a skippable error naming the
    request): `EMPTY_PAGES_MOST` empty pages in a row that say more follow, or a paginator's
    own finding (a next start no page made plausible)."""
    query = dict(params)
    paginator.init_request(query)
    url = path
    empty = 0  # empty pages in a row that said more follow
    while True:
        body = client.get_json(url, query, label, shape).body
        try:
            paginator.update_state(body)
        except EndlessList as error:
            raise EndlessList(error.reason, request_text(url, query)) from None
        items = paginator.items(body)
        empty = 0 if len(items) or not paginator.has_next else empty + 1
        if empty >= EMPTY_PAGES_MOST:
            raise EndlessList(
                f"answered {empty} empty pages in a row, each saying more follow",
                request_text(url, query),
            )
        yield items
        if not paginator.has_next:
            return
        following = paginator.update_request(query)
        if following is None:
            return
        if following:
            url = following


def request_text(url: str, query: Mapping[str, Any]) -> str:
    """A request as a message names it: its path (or link, without user info) and query
    (paging and dates: no secret travels in a list's query)."""
    where = bare_url(url) if "://" in url else url
    return f"{where}?{urlencode(query, safe=':')}" if query else where
