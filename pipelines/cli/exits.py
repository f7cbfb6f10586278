"""Exit codes, and every failure of a command as one line on stderr with its code."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from pipelines.cli.options import telemetry_only_where_asked

if TYPE_CHECKING:
    pass

EXIT_OK, EXIT_FATAL, EXIT_CONFIG, EXIT_PARTIAL, EXIT_STOPPED, EXIT_MISMATCH = 0, 1, 2, 3, 4, 5
EXIT_HELD = 6  # the DuckDB file was held by another process past duckdb_lock_wait_seconds


def exit_code(partial: bool, check: Any) -> int:
    """5 when what landed differs from the API, else 3 when scopes were skipped, else 0."""
    if check is not None and not check.ok:
        return EXIT_MISMATCH
    return EXIT_PARTIAL if partial else EXIT_OK


def root_cause(error: BaseException) -> BaseException:
    """The first of our own errors in the chain dlt wraps around it, else the innermost."""
    from sources.repo_analytics import RepoAnalyticsError

    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        if isinstance(current, RepoAnalyticsError):
            return current
        seen.append(current)
        current = getattr(current, "exception", None) or current.__cause__ or current.__context__
    return seen[-1]


def is_missing_config(error: BaseException) -> bool:
    """A required setting not set (dlt's `ConfigFieldMissingException`, with its `fields`)."""
    return type(error).__name__ == "ConfigFieldMissingException"


def config_message(error: BaseException) -> str:
    if is_missing_config(error):
        fields = getattr(error, "fields", []) or ["?"]
        names = ", ".join(f"`{f}`" for f in fields)
        envs = ", ".join(f"SOURCES__REPO_ANALYTICS__{f.upper()}" for f in fields)
        return (
            f"config error: {names} not set: put it in .dlt/config.toml (secrets in "
            f".dlt/secrets.toml) under [sources.repo_analytics], or set {envs}"
        )
    return f"config error: {error}"


def fail(code: int, message: str) -> int:
    print(f"repo-analytics: {message.splitlines()[0] if message else 'failed'}", file=sys.stderr)
    return code


def guarded(command: Any) -> int:
    """Run a command; every failure becomes one line on stderr and an exit code."""
    import duckdb

    from pipelines.destinations.duckdb.file import MEMORY_KEY
    from sources.repo_analytics import ConfigError, RepoAnalyticsError, RetryBudgetExhausted
    from sources.repo_analytics.errors import DuckDBFileHeld, DuckDBOutOfMemory

    try:
        telemetry_only_where_asked()
        return int(command())
    except Exception as error:  # noqa: BLE001 - every failure becomes one line and a code
        cause = root_cause(error)
        if isinstance(cause, ConfigError) or is_missing_config(cause):
            return fail(EXIT_CONFIG, config_message(cause))
        if isinstance(cause, RetryBudgetExhausted):
            return fail(EXIT_STOPPED, f"stopped: {cause}")
        if isinstance(cause, DuckDBFileHeld):
            return fail(EXIT_HELD, f"stopped: {cause}")
        if isinstance(cause, duckdb.OutOfMemoryException):
            detail = str(cause).splitlines()[0].removeprefix("Out of Memory Error: ")
            return fail(EXIT_FATAL, f"failed: {DuckDBOutOfMemory(detail, MEMORY_KEY)}")
        if isinstance(cause, RepoAnalyticsError):
            return fail(EXIT_FATAL, f"failed: {cause}")
        return fail(EXIT_FATAL, f"failed: {type(cause).__name__}: {cause}")
