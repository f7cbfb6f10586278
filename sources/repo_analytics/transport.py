"""What one request needs around the client: the retryable failure and its reason, the
host's Retry-After, one gate per host, and the TLS and redirect guards.
"""

from __future__ import annotations

import os
import ssl
import threading
import time
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from .errors import CertificateError, FatalApiError, SkippableApiError

if TYPE_CHECKING:
    from .connection import Reply


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


def content_kind(response: Reply) -> str:
    """The answer's media type without parameters, lower case (`text/csv`)."""
    return response.headers.get("Content-Type", "").split(";")[0].strip().lower()


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


def environment_ca_bundle() -> str | None:
    """The CA bundle the environment names, as requests reads it (`REQUESTS_CA_BUNDLE`, then
    `CURL_CA_BUNDLE`), or None."""
    return os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or None


def ssl_failure(error: BaseException) -> ssl.SSLError | None:
    """The `ssl.SSLError` inside urllib3's wrappers of `error`, if any."""
    seen: list[BaseException] = []
    todo: list[Any] = [error]
    while todo:
        current = todo.pop()
        if not isinstance(current, BaseException) or current in seen:
            continue
        seen.append(current)
        if isinstance(current, ssl.SSLError):
            return current
        todo += [*current.args, getattr(current, "reason", None), current.__cause__]
        todo.append(current.__context__)
    return None


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


def refused_elsewhere(url: str, response: Reply) -> FatalApiError | None:
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
