"""Every user setting of the source, declared once: type, default, valid values and help text.

`RepoAnalyticsConfiguration` (with its nested `RetryConfiguration`) is what `.dlt/config.toml`,
`.dlt/secrets.toml`, the `SOURCES__REPO_ANALYTICS__<KEY>` variables (nested keys joined by
`__`) and the CLI's flags resolve through (`plan.resolve_settings`); `plan.build_plan` checks
the values. Each field's metadata holds what the CLI's `--help` and docs/configuration.md show:
`help` (what the key does), `valid` (its values or format) and, where the default is computed
at run time, `default_text`.
"""

import dataclasses
import json
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from dlt.common.configuration import configspec
from dlt.common.configuration.specs import BaseConfiguration
from dlt.common.typing import TSecretStrValue

from .errors import ConfigError
from .settings import (
    DEFAULT_CONCURRENCY,
    DEFAULT_LOOKBACK_DAYS,
    DEFAULT_START_DAYS,
    RETRY_HIGHEST,
    STATISTICS_PERIODS,
)

SECTION = ("sources", "repo_analytics")
SECRET_KEYS = ("token", "username", "password")  # never flags: a command line is public

NameList = str | list[str] | None  # a list, or comma-separated text; `all`: every one


def setting(
    default: Any, help: str, valid: str, default_text: str | None = None, **limits: Any
) -> Any:
    """A field with its help text, valid values and (for numbers) its limits."""
    metadata = {"help": help, "valid": valid, "default_text": default_text, **limits}
    return dataclasses.field(default=default, metadata=metadata)


def attempts(default: int, help: str) -> Any:
    return setting(
        default,
        help,
        f"a whole number from 1 to {RETRY_HIGHEST}",
        whole=True,
        low=1,
        low_allowed=True,
    )


def seconds(default: float, help: str, above_zero: bool = False) -> Any:
    valid = (
        f"seconds, above 0, up to {RETRY_HIGHEST}"
        if above_zero
        else f"seconds, 0 to {RETRY_HIGHEST}"
    )
    return setting(default, help, valid, whole=False, low=0, low_allowed=not above_zero)


@configspec
class RetryConfiguration(BaseConfiguration):
    """Timeouts and retry limits of the HTTP client: `[sources.repo_analytics.retry]`.

    The whole table may also be one value, JSON text in `SOURCES__REPO_ANALYTICS__RETRY`.
    """

    max_attempts: int = attempts(
        8,
        "attempts per request before the run stops (429, 5xx, resets, timeouts, a body cut short)",
    )
    backoff_base: float = seconds(1.0, "back-off base: full-jitter exponential from it")
    max_wait_seconds: float = seconds(
        120.0, "the longest single wait, also for a host's Retry-After"
    )
    total_wait_seconds: float = seconds(
        900.0, "the most a run waits in all; past it the run stops cleanly (exit 4)"
    )
    skip_retry_attempts: int = attempts(
        3, "attempts before a scope with unindexed changes is skipped"
    )
    connect_timeout: float = seconds(10.0, "connect timeout of each request", above_zero=True)
    read_timeout: float = seconds(60.0, "read timeout of each request", above_zero=True)

    __section__: ClassVar[str] = "retry"

    def parse_native_representation(self, native_value: Any) -> None:
        """The table as one value: JSON text (an environment variable) or a mapping."""
        table = retry_table(native_value)
        if not isinstance(table, Mapping):
            raise ConfigError(
                "retry", native_value, "a table of settings: one of " + ", ".join(retry_keys())
            )
        for key, value in table.items():
            setattr(self, str(key), value)


def retry_table(value: Any) -> Any:
    """A `retry` table given as JSON text as a dict; anything else as it is."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


@configspec
class RepoAnalyticsConfiguration(BaseConfiguration):
    """The settings of the `repo_analytics` source: `[sources.repo_analytics]`."""

    edition: str = setting(None, "the API edition of the host", "`cloud` or `server`", "required")
    base_url: str = setting(
        None,
        "the API host; no default: it points at someone's data",
        "a URL, e.g. https://analytics.example.com",
        "required",
    )
    api_prefix: str | None = setting(
        None,
        "the API path prefix; real self-hosted installs may use another app segment",
        "a path starting with /",
        "/rest/latest (cloud), /rest/analytics-api/latest (server)",
    )
    # HTTPS (issue 13)
    ca_bundle: str | None = setting(
        None,
        "the CA certificates an HTTPS host is verified against (an internal CA)",
        "the path of a PEM file",
        "REQUESTS_CA_BUNDLE when set, else certifi's store",
    )
    workspace: str | None = setting(
        None, "the workspace slug the token belongs to", "a slug", "required for cloud"
    )
    projects: NameList = setting(
        "all",
        "self-hosted: the projects to read",
        "`all` (discovered) or project keys, comma-separated",
    )
    levels: NameList = setting(
        None,
        "the levels to read",
        "cloud: workspace, repository, user; self-hosted: global, "
        "project, repository, user; comma-separated",
        "all of the edition",
    )
    resources: NameList = setting(
        None,
        "the resource families to read",
        "commits, pull_requests, ... (see docs/resources.md); comma-separated",
        "all",
    )
    with_files: bool = setting(
        False, "self-hosted: fetch each new repository-level commit with its files", "true or false"
    )
    repositories: NameList = setting(
        "all",
        "the repositories to read",
        "`all` (discovered) or slugs (self-hosted: KEY/slug), comma-separated",
    )
    users: NameList = setting(
        "all",
        "the users to read",
        "`all` or user uuids (cloud) / user slugs (self-hosted), comma-separated",
    )
    start_date: str | None = setting(
        None,
        "where a first run starts",
        "a date (2026-01-31, midnight UTC) or an ISO-8601 timestamp with offset",
        f"{DEFAULT_START_DAYS} days before end_date",
    )
    end_date: str | None = setting(
        None,
        "the upper bound of every request of the run",
        "a date or an ISO-8601 timestamp",
        "now, frozen at the start of the run",
    )
    lookback_days: float = setting(
        DEFAULT_LOOKBACK_DAYS,
        "how far behind each cursor every run re-reads, for late data",
        "days, 0 to 366",
        low=0,
        high=366,
        whole=False,
    )
    page_size: int | None = setting(
        None,
        "items per page",
        "a whole number from 1 to 1000",
        "the edition's maximum",
        low=1,
        high=1000,
        whole=True,
    )
    statistics_period: str = setting(
        "month", "the grain of statistics rows", ", ".join(f"`{p}`" for p in STATISTICS_PERIODS)
    )
    concurrency: int = setting(
        DEFAULT_CONCURRENCY,
        "scopes each resource reads at once, and the most requests open to the host at once",
        "a whole number from 1 to 32",
        low=1,
        high=32,
        whole=True,
    )
    retry: RetryConfiguration = dataclasses.field(default_factory=RetryConfiguration)
    token: TSecretStrValue | None = setting(
        None,
        "secret: the access token (cloud: the workspace's; self-hosted: a personal one)",
        "text",
    )
    username: str | None = setting(
        None, "self-hosted: the user name for basic credentials, with `password`", "text"
    )
    password: TSecretStrValue | None = setting(
        None, "secret: self-hosted: the password, with `username`", "text"
    )
    # the DuckDB file while other processes read it (pipelines/destinations/duckdb/file.py)
    duckdb_lock_wait_seconds: float = setting(
        120.0,
        "how long each opening of the DuckDB file waits while another process holds it; "
        "past it the run stops (exit 6) and keeps what it extracted",
        "seconds, 0 (stop at once) to 86400",
        "120",
        low=0,
        high=86400,
        whole=False,
    )
    duckdb_memory_limit: str = setting(
        "80MB",
        "the most memory DuckDB takes for its work on the file (the load's merges, "
        "reconciliation); past it DuckDB spills to a temporary folder next to the file",
        "a size such as 256MB or 2GB (KB, MB, GB, TB, KiB, MiB, GiB, TiB), or `default` "
        "(DuckDB's own: 80 % of the machine's memory)",
        "80MB",
    )
    publish_duckdb_to: str | None = setting(
        None,
        "after each load or backfill, a copy of the DuckDB file for readers (BI tools), "
        "swapped in atomically",
        "a file path in a writable folder",
        "none",
    )


@configspec
class ResolvedInTheSource(BaseConfiguration):
    """The `repo_analytics` source's dlt spec: no field, so dlt injects nothing; the source
    resolves its settings itself, once, through `RepoAnalyticsConfiguration` (a value of the
    wrong type then gets our one-line message, and the pipelines' own arguments are never
    config keys)."""


def user_fields(
    spec: type[BaseConfiguration] = RepoAnalyticsConfiguration,
) -> Iterator[tuple[str, dataclasses.Field[Any]]]:
    """Every setting as (dotted key, field), nested sections flattened (`retry.max_attempts`)."""
    for each in dataclasses.fields(spec):  # type: ignore[arg-type]
        if each.name.startswith("_"):
            continue
        if each.name == "retry":
            for inner in dataclasses.fields(RetryConfiguration):  # type: ignore[arg-type]
                if not inner.name.startswith("_"):
                    yield f"retry.{inner.name}", inner
        else:
            yield each.name, each


def setting_keys() -> tuple[str, ...]:
    """The dotted key of every setting, in declaration order."""
    return tuple(key for key, _ in user_fields())


def retry_keys() -> tuple[str, ...]:
    return tuple(key.removeprefix("retry.") for key in setting_keys() if key.startswith("retry."))


def default_of(key: str) -> Any:
    """The default of a setting (None where it is computed at run time)."""
    found = dict(user_fields())[key]
    return found.default


def env_name(key: str) -> str:
    """The environment variable of a dotted key: `SOURCES__REPO_ANALYTICS__RETRY__MAX_ATTEMPTS`."""
    return "__".join(part.upper() for part in (*SECTION, *key.split(".")))
