"""The one exception family of the extractor. Messages say what was wrong and what to do."""

from __future__ import annotations

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
