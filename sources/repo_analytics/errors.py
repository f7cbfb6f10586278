"""The one exception family of the extractor. Messages say what was wrong and what to do."""

from __future__ import annotations

from contextlib import suppress
from urllib.parse import urlsplit, urlunsplit

from dlt.common.exceptions import DltException


class RepoAnalyticsError(DltException):
    """Base of every error this package raises on purpose."""


class ConfigError(RepoAnalyticsError):
    """A configuration value is invalid; raised before the first request."""

    def __init__(self, key: str, value: object, expected: str) -> None:
        self.key, self.value, self.expected = key, value, expected
        super().__init__(f"config `{key}` has invalid value `{value}`: expected {expected}")


class FatalApiError(RepoAnalyticsError):
    """The host refused the whole run (credentials, licence, app, proxy): stop, write nothing."""

    def __init__(
        self, kind: str, message: str, status: int | None = None, url: str | None = None
    ) -> None:
        self.kind, self.status, self.url = kind, status, url
        super().__init__(message)


class SkippableApiError(RepoAnalyticsError):
    """One scope cannot be read (missing, forbidden, not indexed): skip it and report it.

    `retryable` ones (unindexed changes) are retried a few times before the skip.
    """

    def __init__(
        self,
        kind: str,
        message: str,
        status: int | None = None,
        url: str | None = None,
        retryable: bool = False,
    ) -> None:
        self.kind, self.status, self.url, self.retryable = kind, status, url, retryable
        super().__init__(message)


class EndlessList(SkippableApiError):
    """A list whose pages would never end (empty pages that say more follow, a next page
    start no page before made plausible): its read stops, and the scope is skipped."""

    def __init__(self, reason: str, request: str = "") -> None:
        self.reason, self.request = reason, request
        where = f"the list at `{request}`" if request else "a list"
        super().__init__(
            "endless_list",
            f"{where} {reason}; its read stopped there and the scope is skipped (read again "
            "on the next run): the host, or a proxy in front of it, pages this list wrongly",
        )


class RetryBudgetExhausted(RepoAnalyticsError):
    """Retries or total waiting went past their configured caps: stop cleanly, resume later."""


class UnsafeLinkError(FatalApiError):
    """A pagination link points outside the configured host and prefix; not followed."""

    def __init__(self, link: str, expected_base: str) -> None:
        super().__init__(
            "unsafe_link",
            f"refused to follow pagination link `{link}`: it is outside the configured API "
            f"base `{expected_base}`, and credentials are never sent elsewhere; check the "
            "base_url setting or the proxy in front of the host",
        )


# HTTPS (issue 13) ------------------------------------------------------------------------------
CA_BUNDLE_HINT = "set ca_bundle (SOURCES__REPO_ANALYTICS__CA_BUNDLE, --ca-bundle)"


def bare_url(url: str) -> str:
    """Scheme, host, port and path: no user info, no query (messages never carry secrets)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    with suppress(ValueError):  # a port that is not a number: left out
        host = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class CertificateError(FatalApiError):
    """An HTTPS host's certificate failed verification: fatal at once, never retried."""

    def __init__(self, url: str, reason: str) -> None:
        parts = urlsplit(bare_url(url))
        origin = f"{parts.scheme}://{parts.netloc}"
        reason = reason.strip().rstrip(".")
        if "mismatch" in reason.lower():
            advice = (
                f"the certificate of {origin} is not valid for that host name ({reason}): use "
                "in base_url a host name the certificate names"
            )
        else:
            advice = (
                f"the certificate of {origin} is not trusted ({reason}; self-signed or an "
                f"internal CA): {CA_BUNDLE_HINT} to the PEM file of the CA that signed it"
            )
        super().__init__("certificate", f"{advice}; nothing of this run was written", url=origin)


class DowngradeError(FatalApiError):
    """An HTTPS host redirected the run to a plain-HTTP URL: refused (before it is sent), so
    that the credentials never travel unencrypted."""

    def __init__(self, url: str, how: str) -> None:
        super().__init__(
            "downgrade",
            f"refused to follow {how} to plain HTTP `{bare_url(url)}`: base_url is HTTPS and "
            "credentials are never sent over plain HTTP; check base_url and the proxy or host "
            "settings that rewrite the scheme (nothing of this run was written)",
            url=bare_url(url),
        )


class DowngradeLinkError(UnsafeLinkError):
    """A `next` link from an HTTPS host to plain HTTP: an unsafe link, said as a downgrade."""

    def __init__(self, link: str, expected_base: str) -> None:
        FatalApiError.__init__(
            self,
            "unsafe_link",
            f"refused to follow a next link to plain HTTP `{bare_url(link)}`: the configured API "
            f"base `{expected_base}` is HTTPS and credentials are never sent over plain HTTP; "
            "check base_url and the proxy or host settings that rewrite the scheme (nothing of "
            "this run was written)",
        )


class DuckDBFileHeld(RepoAnalyticsError):
    """Another process held the DuckDB file longer than the run waits for it (exit 6)."""

    def __init__(
        self, path: str, pid: int, name: str, seconds: float, leaves: str, key: str
    ) -> None:
        self.path, self.pid, self.name, self.seconds = path, pid, name, seconds
        super().__init__(
            f"the DuckDB file {path} is held by process {pid} ({name}) for more than "
            f'{seconds:g} s; {leaves} — close that connection (BI tools: see "Reading the '
            f'DuckDB file while loads run" in the README) or raise {key}'
        )


class PublishFailed(RepoAnalyticsError):
    """The copy of the DuckDB file for readers (`publish_duckdb_to`) could not be written."""

    def __init__(self, path: str, error: OSError, leaves: str) -> None:
        self.path = path
        super().__init__(
            f"could not publish the DuckDB file to {path}: {error.strerror or error}; "
            f"{leaves} — check that its folder can be written and has room"
        )


class DuckDBOutOfMemory(RepoAnalyticsError):
    """DuckDB needed more memory than `duckdb_memory_limit` lets it take, spilling included."""

    def __init__(self, detail: str, key: str) -> None:
        super().__init__(
            f"DuckDB ran out of memory under {key}: {detail}; a package that was extracted "
            f"is kept and lands on the next run — raise {key} (e.g. 1GB, or `default`: "
            "DuckDB's own 80 % of the machine's memory) and rerun"
        )
