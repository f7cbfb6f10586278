"""What one request needs around the client: the session it is sent on (requests), the
retryable failure and its reason, the host's Retry-After, one gate per host, and requests'
failures said as this package says them (TLS, redirects, unreachable hosts).
"""

from __future__ import annotations

import errno
import os
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from requests.adapters import HTTPAdapter
from requests.models import DEFAULT_REDIRECT_LIMIT

from ..errors import CertificateError, DowngradeError, FatalApiError, SkippableApiError, bare_url

# a connection could not be opened: refused, no such host name, no route to it
UNREACHABLE_ERRNOS = frozenset({errno.ECONNREFUSED, errno.ENETUNREACH, errno.EHOSTUNREACH})
# a body that broke off (fewer bytes than announced, a bad chunk) or cannot be decoded
BODY_ERRORS = (requests.exceptions.ChunkedEncodingError, requests.exceptions.ContentDecodingError)
# what a GET through requests raises when it fails; a ValueError of its own is http.client's,
# for a chunk size below zero, which urllib3 passes on as it is: a broken body
FAILURES = (requests.RequestException, ValueError)


class RetryableError(Exception):
    """A transient failure; `retry_after` is the host's own wait hint in seconds;
    `unreachable` names the host when no connection could be made (refused, no such name)."""

    def __init__(
        self, reason: str, retry_after: float | None = None, unreachable: str | None = None
    ) -> None:
        super().__init__(reason)
        self.reason, self.retry_after, self.unreachable = reason, retry_after, unreachable


def reason_of(error: BaseException | None) -> str:
    """What failed, for logs and messages."""
    return error.reason if isinstance(error, RetryableError) else str(error)


def is_retryable(error: BaseException) -> bool:
    """Transient failures, and skippable ones the host may clear soon (unindexed changes)."""
    return isinstance(error, RetryableError) or (
        isinstance(error, SkippableApiError) and error.retryable
    )


def sanitise(url: str) -> str:
    """The URL without user info, safe for logs and messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, ""))


def retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as seconds (a number, or an HTTP date relative to now)."""
    if not value:
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(text).timestamp() - time.time())
    except (TypeError, ValueError, IndexError):
        return None


def content_kind(response: requests.Response) -> str:
    """The answer's media type without parameters, lower case (`text/csv`); of a header sent
    twice (joined by urllib3 with a comma), the first."""
    value = response.headers.get("Content-Type", "")
    return value.split(",")[0].split(";")[0].strip().lower()


class HostGate:
    """Shared by every thread talking to one host: a 429 holds all of them, not just one, and
    at most `max_in_flight` requests are open at once, however many windows and scopes run."""

    def __init__(self, max_in_flight: int) -> None:
        self.size = max_in_flight
        self._lock = threading.Lock()
        self._not_before = 0.0
        self.in_flight = threading.BoundedSemaphore(max_in_flight)

    def hold(self, seconds: float) -> None:
        with self._lock:
            self._not_before = max(self._not_before, time.monotonic() + seconds)

    def wait_turn(self) -> float:
        with self._lock:
            delay = self._not_before - time.monotonic()
        if delay > 0:
            time.sleep(delay)
            return delay
        return 0.0


# the session ---------------------------------------------------------------------------------
def environment_ca_bundle() -> str | None:
    """The CA bundle the environment names, as requests reads it (`REQUESTS_CA_BUNDLE`, then
    `CURL_CA_BUNDLE`), or None."""
    return os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or None


def host_adapter(connections: int) -> HTTPAdapter:
    """The connection pools of one client, shared by its threads' sessions: up to
    `connections` kept open per host, no retries of urllib3's (the client's own retries
    count and pace every attempt)."""
    return HTTPAdapter(pool_maxsize=connections, max_retries=0)


class HostSession(requests.Session):
    """requests' session for one thread of a client, with two rules of ours.

    - The environment is not read by requests (`trust_env` off): above all `~/.netrc`, whose
      entry for the host would replace the configured credentials. The proxies and the CA
      bundle requests would take from the environment are given here instead
      (`ApiClient` reads them as requests does).
    - A redirect from HTTPS to plain HTTP is refused before it is sent (`DowngradeError`);
      one to another host is followed without the credentials (requests drops
      `Authorization` there, `Session.should_strip_auth`).

    Args:
        adapter: the client's connection pools, mounted for both schemes.
        headers: sent with every request (auth).
        verify: the CA bundle file or folder HTTPS hosts are verified against; True:
            certifi's store.
        proxies: by scheme (`all` for any), as `requests.utils.get_environ_proxies` reads them.
    """

    def __init__(
        self,
        adapter: HTTPAdapter,
        headers: Mapping[str, str],
        verify: str | bool,
        proxies: Mapping[str, str],
    ) -> None:
        super().__init__()
        self.trust_env = False
        self.verify = verify
        self.proxies = dict(proxies)
        self.headers.update(headers)
        self.mount("https://", adapter)
        self.mount("http://", adapter)

    def rebuild_auth(
        self, prepared_request: requests.PreparedRequest, response: requests.Response
    ) -> None:
        """Called by requests for each redirect, with its target, before it is sent."""
        target = str(prepared_request.url)
        if urlsplit(response.url).scheme == "https" and urlsplit(target).scheme != "https":
            raise DowngradeError(target, "a redirect")
        super().rebuild_auth(prepared_request, response)


# failures ------------------------------------------------------------------------------------
def causes(error: BaseException) -> list[BaseException]:
    """`error` and what it wraps (urllib3's and requests' wrappers keep the cause in their
    arguments, `reason` or `__cause__`), outermost first."""
    seen: list[BaseException] = []
    todo: list[Any] = [error]
    while todo:
        current = todo.pop(0)
        if not isinstance(current, BaseException) or any(current is s for s in seen):
            continue
        seen.append(current)
        todo += [*current.args, getattr(current, "reason", None), current.__cause__]
        todo.append(current.__context__)
    return seen


def ssl_failure(error: BaseException) -> ssl.SSLError | None:
    """The `ssl.SSLError` inside `error`, if any."""
    return next((c for c in causes(error) if isinstance(c, ssl.SSLError)), None)


def tls_error(error: BaseException, url: str) -> Exception:
    """A failed TLS handshake: fatal when retrying cannot help (a certificate that fails
    verification, a port that does not speak TLS), else retried like a reset connection."""
    found = ssl_failure(error)
    if isinstance(found, ssl.SSLCertVerificationError):
        return CertificateError(url, str(found.verify_message or found.reason or "failed"))
    if found is not None and found.reason == "WRONG_VERSION_NUMBER":
        return FatalApiError(
            "not_tls",
            f"{sanitise(url)} does not answer TLS (most likely it speaks plain HTTP): check the "
            "scheme of base_url; nothing of this run was written",
        )
    reason = found.reason if found is not None and found.reason else type(error).__name__
    return RetryableError(f"TLS error from {sanitise(url)}: {reason}")


def unreachable(error: BaseException) -> bool:
    """No connection could be made: refused, no such host name, no route to the host."""
    return any(
        isinstance(c, socket.gaierror) or (isinstance(c, OSError) and c.errno in UNREACHABLE_ERRNOS)
        for c in causes(error)
    )


def request_failure(error: Exception, url: str) -> Exception:
    """requests' failure of a GET of `url` as the client raises it: retryable unless retrying
    cannot help; the URL in the message sanitised, never a header's value."""
    where = sanitise(url)
    if isinstance(error, requests.exceptions.SSLError):
        return tls_error(error, url)
    if isinstance(error, requests.exceptions.InvalidHeader):  # its message holds the value
        return FatalApiError(
            "invalid_header",
            "a header of the request holds a line break or another control character: check "
            "the credentials' settings (the end of the line they were pasted in)",
        )
    if isinstance(error, BODY_ERRORS) or not isinstance(error, requests.RequestException):
        return RetryableError(f"truncated body from {where}")
    if isinstance(error, requests.Timeout) or any(
        isinstance(c, TimeoutError) for c in causes(error)
    ):
        return RetryableError(f"timeout from {where}")
    if isinstance(error, requests.TooManyRedirects):
        return FatalApiError(
            "redirect_loop",
            f"more than {DEFAULT_REDIRECT_LIMIT} redirects from {bare_url(url)}: check base_url",
        )
    if not isinstance(error, requests.exceptions.ProxyError) and unreachable(error):
        return RetryableError(
            f"connection refused or host not found: {where}", unreachable=urlsplit(where).netloc
        )
    innermost = causes(error)[-1]
    return RetryableError(f"connection error from {where}: {type(innermost).__name__}")


def refused_elsewhere(url: str, response: requests.Response) -> FatalApiError | None:
    """A 401 or 403 from another host a redirect led to: that host got no credentials
    (they are dropped when the host changes), so the refusal says nothing of them."""
    if not response.history or response.status_code not in (401, 403):
        return None
    asked, answered = urlsplit(url), urlsplit(str(response.url or ""))
    if (asked.scheme, asked.netloc) == (answered.scheme, answered.netloc):
        return None
    return FatalApiError(
        "redirected_elsewhere",
        f"the host redirected {sanitise(url)} to another host, {sanitise(str(response.url))},"
        f" which refused it (HTTP {response.status_code}) without the credentials: they are "
        "sent only to the host of base_url. Set base_url to the host the API answers on; "
        "nothing of this run was written",
        response.status_code,
        sanitise(str(response.url)),
    )
