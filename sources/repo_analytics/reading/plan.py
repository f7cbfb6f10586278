"""Configuration resolved through the one spec (`config.py`) and checked once, before the
first request, into an immutable `RunPlan`."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import ssl
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any, get_args
from urllib.parse import urlsplit

import dlt
from dlt.common.configuration import resolve_configuration
from dlt.common.configuration.exceptions import ConfigValueCannotBeCoercedException
from dlt.common.configuration.resolve import inject_section
from dlt.common.configuration.specs.config_section_context import ConfigSectionContext
from dlt.common.configuration.utils import deserialize_value

from ..config import (
    SECTION,
    RepoAnalyticsConfiguration,
    RetryConfiguration,
    default_of,
    env_name,
    retry_keys,
    retry_table,
    user_fields,
)
from ..dates import parse_user_instant
from ..editions import edition_spec
from ..editions.spec import EditionSpec, Endpoint
from ..errors import ConfigError
from ..settings import (
    DEFAULT_START_DAYS,
    NAIVE_DATE_SLACK_HOURS,
    RETRY_HIGHEST,
    STATISTICS_PERIODS,
)
from .origin import source_identity


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
    client: RetryConfiguration
    credentials: Mapping[str, Any] = field(repr=False)
    ca_bundle: str | None = None  # the CAs' PEM file for HTTPS; None: requests' default

    @cached_property
    def endpoints(self) -> tuple[Endpoint, ...]:
        """The edition's endpoints this run reads: those of its levels and resources."""
        return tuple(
            e
            for e in self.edition.endpoints
            if e.level in self.levels and e.resource in self.resources
        )

    @cached_property
    def shared_children(self) -> frozenset[str]:
        """The child tables that more than one endpoint of the run writes (a commit's parents,
        where its list is read at several levels): their rows are yielded once per parent for
        the whole run; another child table's, once per read of a scope, like its parent's."""
        writers = Counter(child.table for e in self.endpoints for child in e.children)
        return frozenset(table for table, count in writers.items() if count > 1)

    @cached_property
    def api_base(self) -> str:
        return self.base_url.rstrip("/") + self.api_prefix

    @cached_property
    def source(self) -> str:
        """Where this run's rows come from (the `source` column): the host, and the workspace
        of an edition with workspaces. Asked for every table a run reads."""
        return source_identity(
            self.base_url, self.workspace if self.edition.needs_workspace else None
        )

    def cursor_slack(self, naive: bool) -> timedelta:
        return timedelta(hours=NAIVE_DATE_SLACK_HOURS) if naive else timedelta(0)


def one_of(key: str, value: Any, valid: Sequence[str]) -> str:
    if value not in valid:
        raise ConfigError(key, value, "one of " + ", ".join(valid))
    return str(value)


def name_list(key: str, value: Any, valid: Sequence[str] | None = None) -> tuple[str, ...] | None:
    """`all` (or nothing) -> None; a list, its JSON text (an environment variable) or a
    comma-separated string -> names."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        with contextlib.suppress(json.JSONDecodeError):
            value = json.loads(value)
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


def number(key: str, value: Any) -> Any:
    """A number within the setting's limits (`low`, `high`, `whole` in its spec field)."""
    limits = dict(user_fields())[key].metadata
    low, high = limits["low"], limits["high"]
    try:
        parsed = int(value) if limits["whole"] else float(value)
    except (TypeError, ValueError):
        raise ConfigError(key, value, f"a number from {low:g} to {high:g}") from None
    if not low <= parsed <= high:
        raise ConfigError(key, as_written(value), f"a number from {low:g} to {high:g}")
    return parsed


def retry_settings(retry: Any) -> RetryConfiguration:
    """The `retry` table (its keys checked) into the client's settings."""
    valid = "one of " + ", ".join(retry_keys())
    if retry is None:
        retry = {}
    if not isinstance(retry, Mapping):
        raise ConfigError("retry", retry, "a table of settings: " + valid)
    unknown = sorted(str(k) for k in set(retry) - set(retry_keys()))
    if unknown:
        raise ConfigError("retry", unknown[0], valid)
    settings: dict[str, Any] = {str(k): retry_setting(str(k), v) for k, v in retry.items()}
    return RetryConfiguration(**settings)


def retry_setting(key: str, value: Any) -> int | float:
    """One `retry` value, from a number or its text (environment variables are text)."""
    limit = dict(user_fields())[f"retry.{key}"].metadata
    if limit["whole"]:
        expected = f"a whole number from {limit['low']:g} to {RETRY_HIGHEST}"
    elif limit["low_allowed"]:
        expected = f"a number from {limit['low']:g} to {RETRY_HIGHEST}"
    else:
        expected = f"a number above {limit['low']:g}, up to {RETRY_HIGHEST}"
    try:
        parsed = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        parsed = math.nan
    above_low = parsed >= limit["low"] if limit["low_allowed"] else parsed > limit["low"]
    if not (above_low and parsed <= RETRY_HIGHEST) or (limit["whole"] and not parsed.is_integer()):
        raise ConfigError(f"retry.{key}", as_written(value), expected)  # NaN fails all tests
    return int(parsed) if limit["whole"] else parsed


def as_written(value: Any) -> Any:
    """A number as a user wrote it: dlt reads `-5` for a float setting as -5.0."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def check_value(key: str, value: Any) -> Any:
    """One typed setting checked alone, as `build_plan` checks it: the message for a value of
    the wrong type (`resolve_settings`)."""
    if key.startswith("retry."):
        return retry_setting(key.removeprefix("retry."), value)
    if key == "with_files":
        return flag(key, value)
    if "low" in dict(user_fields())[key].metadata:
        return number(key, value)
    return value


def resolve_settings(explicit: Mapping[str, Any] | None = None) -> RepoAnalyticsConfiguration:
    """Every setting through `RepoAnalyticsConfiguration`: `explicit` values (the source's
    arguments, the CLI's flags; text is read as the setting's type) over the environment,
    `.dlt/secrets.toml` and `.dlt/config.toml`. Unchecked beyond types: `build_plan` checks.

    A value of the wrong type, an unknown `retry` key and an unknown edition given
    explicitly raise today's one-line `ConfigError` (the edition before a missing setting is
    named: the value typed is the one to hear about); a missing required setting raises
    dlt's `ConfigFieldMissingException`.
    """
    given = typed_values(dict(explicit or {}))
    check_retry_keys(given.get("retry"))
    if given.get("edition") is not None:
        edition_spec(given["edition"])
    try:
        with inject_section(ConfigSectionContext(sections=SECTION), lock_context=True):
            return resolve_configuration(RepoAnalyticsConfiguration(), explicit_value=given)
    except ConfigValueCannotBeCoercedException as error:
        key = next(
            (k for k, _ in user_fields() if k.split(".")[-1] == error.field_name), error.field_name
        )
        check_value(key, error.field_value)
        raise ConfigError(
            key, error.field_value, dict(user_fields())[key].metadata["valid"]
        ) from None


def typed_values(explicit: dict[str, Any]) -> dict[str, Any]:
    """Explicit text values read as their setting's type, as dlt reads a provider's text."""
    hints = RepoAnalyticsConfiguration.get_resolvable_fields()
    retry_hints = RetryConfiguration.get_resolvable_fields()
    typed: dict[str, Any] = {}
    for key, value in explicit.items():
        if (
            key == "retry"
            and isinstance(value, Mapping)
            and not isinstance(value, RetryConfiguration)
        ):
            value = {k: typed_value(f"retry.{k}", v, retry_hints.get(k)) for k, v in value.items()}
        elif key != "retry":
            value = typed_value(key, value, hints.get(key))
        typed[key] = value
    return typed


def typed_value(key: str, value: Any, hint: Any) -> Any:
    hint = next((h for h in get_args(hint) if h is not type(None)), hint)  # Optional[X]: X
    if not isinstance(value, str) or hint not in (int, float, bool):
        return value
    try:
        return deserialize_value(key, value, hint)
    except ConfigValueCannotBeCoercedException:
        check_value(key, value)
        raise ConfigError(key, value, dict(user_fields())[key].metadata["valid"]) from None


def check_retry_keys(explicit: Any) -> None:
    """An unknown `retry` key is refused by name wherever it is given (dlt would ignore it):
    the explicit table, the `[sources.repo_analytics.retry]` table, or a
    `SOURCES__REPO_ANALYTICS__RETRY__<KEY>` variable."""
    valid = retry_keys()
    names: list[str] = list(explicit) if isinstance(explicit, Mapping) else []
    table = retry_table(dlt.config.get(".".join((*SECTION, "retry"))))
    if isinstance(table, Mapping):
        names += [str(k) for k in table]
    prefix = env_name("retry") + "__"
    names += [
        name[len(prefix) :].lower()
        for name in os.environ
        if name.startswith(prefix) and len(name) > len(prefix)
    ]
    unknown = sorted(set(names) - set(valid))
    if unknown:
        raise ConfigError("retry", unknown[0], "one of " + ", ".join(valid))


def setting_value(values: Mapping[str, Any], key: str) -> Any:
    """A setting's value, its spec's default when not given."""
    value = values.get(key)
    return default_of(key) if value is None else value


def chosen_resources(edition: EditionSpec, value: Any) -> tuple[str, ...]:
    """The resource families `value` selects (`all` or nothing: every family of the edition),
    checked against the edition's families."""
    families = sorted({e.resource for e in edition.endpoints})
    return name_list("resources", value, families) or tuple(families)


def build_plan(
    edition: EditionSpec, values: Mapping[str, Any], now: datetime | None = None
) -> RunPlan:
    """Validate config values (resolved by `resolve_settings`, or any mapping: a missing key
    takes the spec's default) into a plan; the first bad value raises `ConfigError`."""
    edition_spec(edition.name)  # a registered edition
    base_url = str(values.get("base_url") or "")
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            "base_url", base_url or "(empty)", "the host's URL, e.g. https://analytics.example.com"
        )
    source_identity(base_url)  # a bad port is refused here
    prefix = str(values.get("api_prefix") or edition.default_prefix)
    if not prefix.startswith("/"):
        raise ConfigError("api_prefix", prefix, "a path starting with /")
    workspace = values.get("workspace")
    if edition.needs_workspace and not workspace:
        raise ConfigError("workspace", workspace or "(empty)", "the workspace slug of the token")
    all_levels = tuple(dict.fromkeys(e.level for e in edition.endpoints))
    levels = name_list("levels", values.get("levels"), all_levels) or all_levels
    resources = chosen_resources(edition, values.get("resources"))
    until = (
        parse_user_instant("end_date", values["end_date"])
        if values.get("end_date")
        else (now or datetime.now(UTC)).replace(microsecond=0)
    )
    start = (
        parse_user_instant("start_date", values["start_date"])
        if values.get("start_date")
        else until - timedelta(days=DEFAULT_START_DAYS)
    )
    if start >= until:
        raise ConfigError(
            "start_date", values.get("start_date"), f"a date before end_date ({until.isoformat()})"
        )
    page_size = values.get("page_size")
    client = retry_settings(values.get("retry"))
    return RunPlan(
        edition=edition,
        base_url=base_url.rstrip("/"),
        api_prefix=prefix.rstrip("/"),
        workspace=str(workspace) if workspace else None,
        levels=levels,
        resources=resources,
        projects=name_list("projects", setting_value(values, "projects")),
        repositories=name_list("repositories", setting_value(values, "repositories")),
        users=name_list("users", setting_value(values, "users")),
        start=start,
        until=until,
        lookback=timedelta(days=number("lookback_days", setting_value(values, "lookback_days"))),
        page_size=None if page_size is None or page_size == "" else number("page_size", page_size),
        statistics_period=one_of(
            "statistics_period",
            values.get("statistics_period") or default_of("statistics_period"),
            STATISTICS_PERIODS,
        ),
        concurrency=number("concurrency", setting_value(values, "concurrency")),
        with_files=flag("with_files", setting_value(values, "with_files")),
        backfill=bool(values.get("backfill")),
        merge_strategy=one_of(
            "merge_strategy",
            values.get("merge_strategy") or "delete-insert",
            ("delete-insert", "upsert"),
        ),
        client=client,
        credentials=check_credentials(edition, values),
        ca_bundle=check_ca_bundle(values.get("ca_bundle"), parts.scheme),
    )


# HTTPS (issue 13) ------------------------------------------------------------------------------
CA_BUNDLE_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")  # requests reads these
CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")  # no header may carry one


def check_ca_bundle(value: Any, scheme: str) -> str | None:
    """`ca_bundle` as a path to a PEM file of certificates that loads; without it, for an
    HTTPS host, the file requests would take from its variables, checked the same way."""
    if value not in (None, ""):
        return pem_file("ca_bundle", str(value))
    if scheme == "https":
        for name in CA_BUNDLE_VARIABLES:
            if os.environ.get(name):
                if not os.path.isdir(os.environ[name]):  # requests takes a folder of CAs too
                    pem_file(name, os.environ[name])
                break
    return None


def pem_file(key: str, path: str) -> str:
    """The path, when it names a readable file of PEM certificates; else a `ConfigError`."""
    expected = "the path of a readable PEM file of CA certificates (set ca_bundle to one)"
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise ConfigError(key, path, expected)
    try:
        ssl.create_default_context(cafile=path)
    except (ssl.SSLError, OSError, ValueError):
        raise ConfigError(key, path, expected + "; this one holds no certificate") from None
    return path


def check_credentials(edition: EditionSpec, values: Mapping[str, Any]) -> dict[str, Any]:
    """The first of the edition's credential forms whose settings are all set; one with a
    line break or another control character (a secret pasted with its newline) is refused
    here, not at the first request, and never shown."""
    for form in edition.credential_forms:
        if all(values.get(name) for name in form):
            for name in form:
                if CONTROL_CHARACTER.search(str(values[name])):
                    raise ConfigError(
                        name,
                        "(hidden: it holds a line break or another control character)",
                        "the value without them (check the end of the line it was pasted in)",
                    )
            return {name: values[name] for name in form}
    raise ConfigError("token", "(empty)", edition.credentials_expected)
