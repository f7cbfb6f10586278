"""The one HTTP client: a requests session per thread, auth, timeouts, tenacity retries,
error classes.

Every request of the extractor goes through `ApiClient`; nothing else talks HTTP. requests
and urllib3 do the HTTP (connections kept alive, TLS verification, proxies, gzip, redirects);
what is ours is here and in `transport.py`: retries and their budget, the host gate for
Retry-After and the in-flight bound, the edition's error rules, sanitised URLs in every
message, and the redirect rules (`transport.HostSession`).
"""

from __future__ import annotations

import random
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO, Any

import orjson
import requests
from dlt.common import logger
from requests.utils import get_environ_proxies, requote_uri
from tenacity import RetryCallState, Retrying, retry_if_exception

from ..config import RetryConfiguration
from ..errors import FatalApiError, RetryBudgetExhausted, SkippableApiError
from ..report import RunReport
from ..settings import DEFAULT_CONCURRENCY, RETRYABLE_STATUSES
from .rules import ErrorEnvelope, ErrorRule
from .transport import (
    FAILURES,
    HostGate,
    HostSession,
    RetryableError,
    content_kind,
    environment_ca_bundle,
    host_adapter,
    is_retryable,
    reason_of,
    refused_elsewhere,
    request_failure,
    retry_after_seconds,
    sanitise,
)

# reads a list page's bytes another way than orjson: the page, or None to leave it to orjson
Decoder = Callable[[bytes], Any]
JSON_TYPES = ("application/json", "text/json")
CHUNK_BYTES = 64 * 1024
# a streamed body past this goes to a temporary file, not to memory, where a dozen exports
# read at once held the run's peak (`docs/decisions/csv-exports.md`)
SPOOL_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class Answer:
    """A decoded JSON answer and the URL it came from."""

    body: Any
    raw_url: str

    @property
    def url(self) -> str:
        """The URL it came from, sanitised."""
        return sanitise(self.raw_url)


class ApiClient:
    """GETs against one host's API prefix, with retries and classified errors.

    Args:
        api_base: base URL including the API prefix, e.g. `https://host/rest/latest`.
        headers: auth and other headers (kept out of every log and message).
        error_rules: the edition's classification of non-2xx answers.
        error_message: reads the message out of the edition's error body.
        error_envelope: recognises the edition's error body, which is an error whatever the
            status (a 200 too) and never data.
        settings: timeouts and retry limits.
        report: where requests, retries and waits are counted.
        gate: the host's gate, shared with the other clients of the host (backfill windows).
        ca_bundle: the PEM file of the CAs an HTTPS host is verified against; None: requests'
            default (`REQUESTS_CA_BUNDLE` or `CURL_CA_BUNDLE` when set, else certifi's store).
            The environment's proxies are read once, as requests reads them (`HTTPS_PROXY`,
            `NO_PROXY`, ...); `~/.netrc` is never read (`transport.HostSession`).
    """

    def __init__(
        self,
        api_base: str,
        headers: Mapping[str, str],
        error_rules: tuple[ErrorRule, ...],
        error_message: Any,
        error_envelope: ErrorEnvelope,
        settings: RetryConfiguration,
        report: RunReport,
        gate: HostGate | None = None,
        ca_bundle: str | None = None,
    ) -> None:
        self.api_base = requote_uri(api_base.rstrip("/"))
        self.gate = gate or HostGate(DEFAULT_CONCURRENCY)
        self._headers = dict(headers)
        self._verify: str | bool = ca_bundle or environment_ca_bundle() or True
        self._proxies = get_environ_proxies(self.api_base)  # NO_PROXY applied
        # a streamed body keeps its connection past the gate: room for as many again
        self._adapter = host_adapter(2 * self.gate.size)
        self._local = threading.local()
        self._rules = error_rules
        self._error_message = error_message
        self._envelope = error_envelope
        self.settings = settings
        self.report = report
        self._wait_lock = threading.Lock()
        self._waited = 0.0

    def _session(self) -> requests.Session:
        """This thread's session (requests' sessions are not made to be shared by threads);
        the connection pools are the client's, shared by all of them."""
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = HostSession(self._adapter, self._headers, self._verify, self._proxies)
            self._local.session = session
        return session

    def url(self, path: str) -> str:
        """The URL of `path` below the API base (its values quoted by `Scope.path`), or of an
        absolute URL (a next link: quoted as requests quotes it)."""
        if path.startswith(("http://", "https://")):
            return requote_uri(path)
        return self.api_base + path

    # requests --------------------------------------------------------------------------------
    def get_json(
        self,
        path: str,
        params: Mapping[str, Any] | None,
        label: str,
        decode: Decoder | None = None,
    ) -> Answer:
        """One JSON answer; retried on transient failures, classified otherwise. `decode`:
        reads a list page's bytes (Arrow: `arrow.pages.page_decoder`), or None for orjson's."""
        return self._retrying(lambda: self._get_json_once(path, params, label, decode), label)

    def get_body(
        self, path: str, params: Mapping[str, Any] | None, label: str, accept: str = "text/csv"
    ) -> IO[bytes]:
        """A text body (CSV exports) as a file to read from its start, never held whole in
        memory; the caller closes it.

        The body is read to its end into a spooled file (memory up to `SPOOL_BYTES`, disk
        beyond) before it is handed over: a stream cut short is retried like a cut JSON
        body, the export asked for again whole, and no line of a partial body is read.
        """
        body: IO[bytes] = self._retrying(lambda: self._download(path, params, label, accept), label)
        return body

    def _retrying(self, call: Any, label: str) -> Any:
        retrying = Retrying(
            stop=self._stop,
            wait=self._wait,
            retry=retry_if_exception(is_retryable),
            before_sleep=lambda state: self._before_sleep(state, label),
            reraise=True,
        )
        try:
            return retrying(call)
        except RetryableError as error:
            if error.unreachable:
                raise RetryBudgetExhausted(
                    f"cannot connect to {error.unreachable} ({error.reason}) after "
                    f"{self.settings.max_attempts} attempts: check base_url and that the host "
                    "is up and reachable from here, then rerun; nothing of this run was "
                    "loaded and the saved state is unchanged"
                ) from None
            raise RetryBudgetExhausted(
                f"`{label}` still failing after {self.settings.max_attempts} attempts "
                f"({error.reason}); nothing of this run was loaded and the saved state is "
                "unchanged: rerun later, or raise retry.max_attempts"
            ) from None

    def _stop(self, state: RetryCallState) -> bool:
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, SkippableApiError):
            return state.attempt_number >= self.settings.skip_retry_attempts
        return state.attempt_number >= self.settings.max_attempts

    def _wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        hint = error.retry_after if isinstance(error, RetryableError) else None
        backoff = min(
            self.settings.max_wait_seconds,
            self.settings.backoff_base * 2 ** (state.attempt_number - 1),
        )
        seconds = hint if hint is not None else random.uniform(0, backoff)  # full jitter
        failure = f" (last failure: {reason_of(error)})"
        if seconds > self.settings.max_wait_seconds:
            raise RetryBudgetExhausted(
                f"the host asked to wait {seconds:.0f} s, more than retry.max_wait_seconds="
                f"{self.settings.max_wait_seconds:g}{failure}; nothing of this run was loaded: "
                "rerun later"
            )
        with self._wait_lock:
            if self._waited + seconds > self.settings.total_wait_seconds:
                raise RetryBudgetExhausted(
                    f"waiting {seconds:.1f} s more would pass retry.total_wait_seconds="
                    f"{self.settings.total_wait_seconds:g} for this run{failure}; nothing of "
                    "this run was loaded and the saved state is unchanged: rerun later"
                )
            self._waited += seconds
        return seconds

    def _before_sleep(self, state: RetryCallState, label: str) -> None:
        error = state.outcome.exception() if state.outcome else None
        reason = reason_of(error)
        seconds = state.upcoming_sleep
        self.report.count_retry(label, seconds)
        if isinstance(error, RetryableError) and error.retry_after is not None:
            self.gate.hold(seconds)
        # a host that cannot be reached says so once, in the final error: not a line per try
        log = (
            logger.info
            if isinstance(error, RetryableError) and error.unreachable
            else logger.warning
        )
        log(f"retrying {label} in {seconds:.2f} s (attempt {state.attempt_number}): {reason}")

    def _send(
        self, path: str, params: Mapping[str, Any] | None, label: str, accept: str
    ) -> requests.Response:
        """The answer, its body unread unless an error's (the caller reads and closes it);
        requests' failures as this package's (`transport.request_failure`)."""
        began = time.monotonic()
        waited = self.gate.wait_turn()
        if waited:
            self.report.count_wait(label, waited, began)
        url = self.url(path)
        self.report.count_request(label)
        try:
            with self.gate.in_flight:
                response = self._session().get(
                    url,
                    params=params,
                    headers={"Accept": accept},
                    timeout=(self.settings.connect_timeout, self.settings.read_timeout),
                    stream=True,
                )
        except FAILURES as error:
            raise request_failure(error, url) from None
        if response.status_code >= 400 or response.status_code in RETRYABLE_STATUSES:
            with response:
                try:
                    body = whole_body(response)
                except FAILURES:
                    body = b""
            elsewhere = refused_elsewhere(url, response)
            if elsewhere is not None:
                raise elsewhere
            self._raise_for(response, body)
        return response

    def _get_json_once(
        self, path: str, params: Mapping[str, Any] | None, label: str, decode: Decoder | None
    ) -> Answer:
        with self._send(path, params, label, "application/json") as response:
            kind = content_kind(response)
            if kind not in JSON_TYPES:
                raise self._not_expected(response, kind, "JSON")
            return Answer(self._json_body(response, decode), response.url)

    def _json_body(self, response: requests.Response, decode: Decoder | None = None) -> Any:
        """The decoded body; the edition's error body, whatever the status, raised as an error."""
        try:
            content = whole_body(response)
        except FAILURES as error:
            raise request_failure(error, response.url) from None
        body = None
        if decode is not None:
            body = decode(content)
        by_arrow = body is not None
        if body is None:
            try:
                body = orjson.loads(content)
            except orjson.JSONDecodeError:
                raise RetryableError(
                    f"undecodable JSON body from {sanitise(response.url)}"
                ) from None
        if self._envelope.matches(body):
            if by_arrow:  # the message, which Arrow did not read
                body = orjson.loads(content)
            self._raise_for_error_body(response.status_code, sanitise(response.url), body)
        return body

    @staticmethod
    def _not_expected(response: requests.Response, kind: str, wanted: str) -> FatalApiError:
        advice = (
            "check base_url and api_prefix; if they are right, report it with this line"
            if kind in JSON_TYPES
            else "most likely a single sign-on or proxy login page: "
            "check base_url and that the API is reachable without an interactive login"
        )
        return FatalApiError(
            "not_json" if wanted == "JSON" else "not_csv",
            f"the host answered {sanitise(response.url)} with {response.status_code} and "
            f"`{kind or 'no content type'}` instead of {wanted} — {advice}",
            response.status_code,
            sanitise(response.url),
        )

    def _download(
        self, path: str, params: Mapping[str, Any] | None, label: str, accept: str
    ) -> IO[bytes]:
        response = self._send(path, params, label, accept)
        kind = content_kind(response)
        if kind in JSON_TYPES or kind == "text/html":
            self._refuse_stream(response, kind)
        spool: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
        try:
            with response:
                for chunk in response.iter_content(chunk_size=CHUNK_BYTES):
                    spool.write(chunk)
        except FAILURES:  # a read timeout or a reset mid-body too
            read = spool.tell()
            spool.close()
            raise RetryableError(
                f"the stream from {sanitise(response.url)} broke off after {read} bytes"
            ) from None
        except BaseException:
            spool.close()
            raise
        spool.seek(0)
        return spool

    def _refuse_stream(self, response: requests.Response, kind: str) -> None:
        """A JSON or HTML answer where a text export was asked for: an error, never rows."""
        with response:
            if kind in JSON_TYPES:
                self._json_body(response)
        raise self._not_expected(response, kind, "CSV")

    # classification ----------------------------------------------------------------------------
    def _raise_for(self, response: requests.Response, body: bytes) -> None:
        status = response.status_code
        url = sanitise(response.url)
        if status in RETRYABLE_STATUSES:
            raise RetryableError(
                f"HTTP {status} from {url}",
                retry_after_seconds(response.headers.get("Retry-After")),
            )
        is_json = content_kind(response) in JSON_TYPES
        message = ""
        if is_json:
            try:
                message = self._message_of(orjson.loads(body))
            except orjson.JSONDecodeError:
                message = ""
        self._raise_by_rules(status, url, message, is_json)
        raise FatalApiError(
            "unexpected",
            f"HTTP {status} from {url}: "
            f"{message or 'no error message'}; the host refused a request this "
            "extractor did not expect to fail",
            status,
            url,
        )

    def _raise_for_error_body(self, status: int, url: str, body: Any) -> None:
        """The edition's error body in a 2xx answer: an error whatever the status, never data.
        One the rules know (a licence or indexing message) is read as they say; any other is
        retried like a 5xx, and past the retry budget the run stops."""
        message = self._message_of(body)
        self._raise_by_rules(status, url, message, True)
        raise RetryableError(
            f"HTTP {status} from {url} with the API's error body instead of "
            f"data: {message or 'no message'}"
        )

    def _message_of(self, body: Any) -> str:
        """The message of an error body, on one line; empty when it has none."""
        try:
            return " ".join(str(self._error_message(body) or "").split())
        except (AttributeError, KeyError, IndexError, TypeError):
            return ""

    def _raise_by_rules(self, status: int, url: str, message: str, is_json: bool) -> None:
        for rule in self._rules:
            if rule.matches(status, message, is_json):
                text = rule.advice.format(status=status, url=url, message=message)
                if rule.outcome in ("skip", "retry_then_skip"):
                    raise SkippableApiError(
                        rule.kind, text, status, url, retryable=rule.outcome == "retry_then_skip"
                    )
                raise FatalApiError(rule.kind, text, status, url)


def whole_body(response: requests.Response) -> bytes:
    """The body of a streamed answer, read to its end at once: `Response.content` reads it in
    small chunks, a list page in tens of reads (`docs/decisions/http-requests.md`)."""
    return b"".join(response.iter_content(chunk_size=None))
