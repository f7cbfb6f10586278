"""Configuration checked once, before the first request, into an immutable `RunPlan`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from .dates import parse_user_instant
from .editions import edition_spec
from .errors import ConfigError
from .settings import (
    DEFAULT_CONCURRENCY,
    DEFAULT_LOOKBACK_DAYS,
    DEFAULT_START_DAYS,
    NAIVE_DATE_SLACK_HOURS,
    RETRY_HIGHEST,
    RETRY_LIMITS,
    STATISTICS_PERIODS,
    ClientSettings,
)
from .tables import EditionSpec


@dataclass(frozen=True)
class RunPlan:
    """Everything one run needs to know, validated; `until` is frozen at the start."""

    edition: EditionSpec
    base_url: str
    api_prefix: str
    workspace: str | None
    levels: tuple[str, ...]
    resources: tuple[str, ...]
    projects: tuple[str, ...] | None  # None: discover (self-hosted)
    repositories: tuple[str, ...] | None  # None: discover
    users: tuple[str, ...] | None  # None: every user of the user list
    start: datetime
    until: datetime
    lookback: timedelta
    page_size: int | None
    statistics_period: str
    concurrency: int
    with_files: bool
    backfill: bool
    merge_strategy: str
    client: ClientSettings
    credentials: Mapping[str, Any] = field(repr=False)

    @property
    def api_base(self) -> str:
        return self.base_url.rstrip("/") + self.api_prefix

    def cursor_slack(self, naive: bool) -> timedelta:
        return timedelta(hours=NAIVE_DATE_SLACK_HOURS) if naive else timedelta(0)


def one_of(key: str, value: Any, valid: Sequence[str]) -> str:
    if value not in valid:
        raise ConfigError(key, value, "one of " + ", ".join(valid))
    return str(value)


def name_list(key: str, value: Any, valid: Sequence[str] | None = None) -> tuple[str, ...] | None:
    """`all` (or nothing) -> None; a list or comma-separated string -> names."""
    if value is None or value == "all" or value == ["all"]:
        return None
    names = [v.strip() for v in value.split(",")] if isinstance(value, str) else list(value)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ConfigError(key, value, "`all` or a list of names")
    if valid is not None:
        for name in names:
            one_of(key, name, valid)
    return tuple(names)


def flag(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("true", "1", "yes"):
        return True
    if str(value).lower() in ("false", "0", "no", "", "none"):
        return False
    raise ConfigError(key, value, "true or false")


def number(key: str, value: Any, low: float, high: float, kind: type = float) -> Any:
    try:
        parsed = kind(value)
    except (TypeError, ValueError):
        raise ConfigError(key, value, f"a number from {low:g} to {high:g}") from None
    if not low <= parsed <= high:
        raise ConfigError(key, value, f"a number from {low:g} to {high:g}")
    return parsed


def retry_settings(retry: Any) -> ClientSettings:
    """The `retry` table (its keys checked) into the client's settings."""
    valid = "one of " + ", ".join(RETRY_LIMITS)
    if retry is None:
        retry = {}
    if not isinstance(retry, Mapping):
        raise ConfigError("retry", retry, "a table of settings: " + valid)
    unknown = sorted(str(k) for k in set(retry) - set(RETRY_LIMITS))
    if unknown:
        raise ConfigError("retry", unknown[0], valid)
    settings: dict[str, Any] = {str(k): retry_setting(str(k), v) for k, v in retry.items()}
    return ClientSettings(**settings)


def retry_setting(key: str, value: Any) -> int | float:
    """One `retry` value, from a number or its text (environment variables are text)."""
    limit = RETRY_LIMITS[key]
    if limit.whole:
        expected = f"a whole number from {limit.low:g} to {RETRY_HIGHEST}"
    elif limit.low_allowed:
        expected = f"a number from {limit.low:g} to {RETRY_HIGHEST}"
    else:
        expected = f"a number above {limit.low:g}, up to {RETRY_HIGHEST}"
    try:
        parsed = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        parsed = math.nan
    above_low = parsed >= limit.low if limit.low_allowed else parsed > limit.low
    if not (above_low and parsed <= RETRY_HIGHEST) or (limit.whole and not parsed.is_integer()):
        raise ConfigError(f"retry.{key}", value, expected)  # NaN fails every comparison
    return int(parsed) if limit.whole else parsed


def build_plan(edition: EditionSpec, values: Mapping[str, Any],
               now: datetime | None = None) -> RunPlan:
    """Validate raw config values into a plan; the first bad value raises `ConfigError`."""
    edition_spec(edition.name)  # a registered edition
    base_url = str(values.get("base_url") or "")
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError("base_url", base_url or "(empty)",
                          "the host's URL, e.g. https://analytics.example.com")
    prefix = str(values.get("api_prefix") or edition.default_prefix)
    if not prefix.startswith("/"):
        raise ConfigError("api_prefix", prefix, "a path starting with /")
    workspace = values.get("workspace")
    if edition.needs_workspace and not workspace:
        raise ConfigError("workspace", workspace or "(empty)", "the workspace slug of the token")
    all_levels = tuple(dict.fromkeys(e.level for e in edition.endpoints))
    levels = name_list("levels", values.get("levels"), all_levels) or all_levels
    families = sorted({e.resource for e in edition.endpoints})
    resources = name_list("resources", values.get("resources"), families) or tuple(families)
    until = (parse_user_instant("end_date", values["end_date"]) if values.get("end_date")
             else (now or datetime.now(UTC)).replace(microsecond=0))
    start = (parse_user_instant("start_date", values["start_date"]) if values.get("start_date")
             else until - timedelta(days=DEFAULT_START_DAYS))
    if start >= until:
        raise ConfigError("start_date", values.get("start_date"),
                          f"a date before end_date ({until.isoformat()})")
    page_size = values.get("page_size")
    client = retry_settings(values.get("retry"))
    return RunPlan(
        edition=edition,
        base_url=base_url.rstrip("/"),
        api_prefix=prefix.rstrip("/"),
        workspace=str(workspace) if workspace else None,
        levels=levels,
        resources=resources,
        projects=name_list("projects", values.get("projects")),
        repositories=name_list("repositories", values.get("repositories")),
        users=name_list("users", values.get("users")),
        start=start,
        until=until,
        lookback=timedelta(days=number("lookback_days", values.get(
            "lookback_days", DEFAULT_LOOKBACK_DAYS), 0, 366)),
        page_size=None if page_size is None or page_size == "" else number(
            "page_size", page_size, 1, 1000, int),
        statistics_period=one_of("statistics_period",
                                 values.get("statistics_period") or "month", STATISTICS_PERIODS),
        concurrency=number("concurrency", values.get("concurrency", DEFAULT_CONCURRENCY),
                           1, 32, int),
        with_files=flag("with_files", values.get("with_files", False)),
        backfill=bool(values.get("backfill")),
        merge_strategy=one_of("merge_strategy", values.get("merge_strategy") or "delete-insert",
                              ("delete-insert", "upsert")),
        client=client,
        credentials=check_credentials(edition, values),
    )


def check_credentials(edition: EditionSpec, values: Mapping[str, Any]) -> dict[str, Any]:
    """The first of the edition's credential forms whose settings are all set."""
    for form in edition.credential_forms:
        if all(values.get(name) for name in form):
            return {name: values[name] for name in form}
    raise ConfigError("token", "(empty)", edition.credentials_expected)
