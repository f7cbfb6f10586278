"""Config the source's signature cannot resolve alone: the `retry` section in every form."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import dlt
from dlt.common.configuration.providers import EnvironProvider

RETRY_SECTION = ("sources", "repo_analytics", "retry")


def retry_values(given: Any = None) -> Any:
    """The `retry` settings, unchecked (`plan.retry_settings` checks them).

    An argument given by the caller is used as it is. Otherwise, and when `given` is what dlt
    injected from config, the `[sources.repo_analytics.retry]` table (or its JSON text in
    `SOURCES__REPO_ANALYTICS__RETRY`) with every `SOURCES__REPO_ANALYTICS__RETRY__<KEY>`
    variable over it, key by key: dlt resolves a `dict` argument only as a whole, so the
    nested variables would be ignored. Unknown keys are kept, to be rejected by name.
    """
    table = as_table(dlt.config.get(".".join(RETRY_SECTION)))
    if given is not None and given != table:
        return given
    if table is not None and not isinstance(table, Mapping):
        return table
    values = dict(table or {})
    prefix = EnvironProvider.get_key_name("", *RETRY_SECTION)
    for name, value in os.environ.items():
        if name.startswith(prefix) and len(name) > len(prefix):
            values[name[len(prefix):].lower()] = value
    return values or None


def as_table(value: Any) -> Any:
    """A table given as JSON text (an environment variable) as a dict; anything else as is."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value
