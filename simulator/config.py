"""What a simulated host is told at start-up, and the host conditions that can change later."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

EDITIONS = ("cloud", "server")
API_PREFIXES = {"cloud": "/rest/latest", "server": "/rest/analytics-api/latest"}

DEFAULT_CLOUD_TOKEN = "sim-cloud-token"
DEFAULT_EXPIRED_TOKEN = "sim-expired-token"
DEFAULT_SERVER_USER = "analyst"
DEFAULT_SERVER_PASSWORD = "analyst-pass"
DEFAULT_SERVER_TOKEN = "sim-server-token"
RESTRICTED_USER = "restricted"
RESTRICTED_PASSWORD = "restricted-pass"
DEFAULT_WORKSPACE = "sim-workspace"
MAX_LATENCY_MS = 60_000  # the `latency_ms` condition's largest value: a minute

# Status codes the cloud spec leaves open; each is a documented choice and can be changed.
CLOUD_STATUS_DEFAULTS = {
    "invalid_request": 400,
    "license": 403,
    "forbidden": 403,
    "unindexed": 409,
    "loc_disabled": 400,
    "repo_not_found": 404,
    "workspace_not_found": 404,
    "user_not_found": 404,
}


@dataclass
class Principal:
    """A self-hosted user that can sign in: what it may read (None = every project)."""

    username: str
    password: str
    tokens: tuple[str, ...] = ()
    projects: tuple[str, ...] | None = None


@dataclass
class Conditions:
    """Host conditions that tests switch at run time through /_sim/conditions."""

    licensed: bool = True
    app_version: str = "5.4.0"
    proxy_login: bool = False
    loc_disabled: list[str] = field(default_factory=list)
    unindexed: dict[str, int] = field(default_factory=dict)  # repo -> failures left, -1 forever
    forbidden: list[str] = field(default_factory=list)
    path_forms: str = "both"  # cloud endpoints 6 and 7: both | short | long
    next_link_base: str | None = None  # cloud next/previous links point here when set
    redirect_base: str | None = None  # every API request answers 302 to this base + its path
    page_overflow: str = "default"  # default (cloud error, server clamp) | clamp | error
    until_inclusive: bool = False
    commit_default_days: int | None = None  # commit lists' window when no dates are given
    server_parent_id_length: int = 20
    cloud_status: dict[str, int] = field(default_factory=lambda: dict(CLOUD_STATUS_DEFAULTS))
    # every API answer held this long before it goes out: a host across a network (the
    # control surface under /_sim/ is never delayed)
    latency_ms: float = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def update(self, changes: dict[str, Any]) -> None:
        """Apply all of `changes` or, when one is not valid, none of them."""
        for key, value in changes.items():
            check_condition(key, value)
        for key, value in changes.items():
            if key == "cloud_status":
                self.cloud_status.update({k: int(v) for k, v in value.items()})
            else:
                setattr(self, key, value)

    @property
    def app_present(self) -> bool:
        major, minor, *_ = (int(p) for p in (self.app_version.split(".") + ["0", "0"])[:3])
        return (major, minor) >= (5, 2)


CONDITION_TYPES: dict[str, tuple[type, ...]] = {
    "licensed": (bool,),
    "app_version": (str,),
    "proxy_login": (bool,),
    "loc_disabled": (list, tuple),
    "unindexed": (dict,),
    "forbidden": (list, tuple),
    "path_forms": (str,),
    "next_link_base": (str, type(None)),
    "redirect_base": (str, type(None)),
    "page_overflow": (str,),
    "until_inclusive": (bool,),
    "commit_default_days": (int, type(None)),
    "server_parent_id_length": (int,),
    "cloud_status": (dict,),
    "latency_ms": (int, float),
}
CONDITION_CHOICES = {
    "path_forms": ("both", "short", "long"),
    "page_overflow": ("default", "clamp", "error"),
}


def check_condition(key: str, value: Any) -> None:
    """KeyError for an unknown field, TypeError or ValueError for a value the host cannot use."""
    types = CONDITION_TYPES.get(key)
    if types is None:
        raise KeyError(f"unknown condition `{key}`; valid: {', '.join(CONDITION_TYPES)}")
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        raise TypeError(
            f"condition `{key}` must be {' or '.join(t.__name__ for t in types)}, not {value!r}"
        )
    if value not in CONDITION_CHOICES.get(key, (value,)):
        raise ValueError(f"condition `{key}`={value!r}; valid: {', '.join(CONDITION_CHOICES[key])}")
    if isinstance(value, dict) and not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value.values()
    ):
        raise TypeError(f"condition `{key}` must map names to integers, not {value!r}")
    if key == "latency_ms" and not (
        isinstance(value, int | float) and 0 <= value <= MAX_LATENCY_MS
    ):
        raise ValueError(f"condition `latency_ms`={value!r}; valid: 0 to {MAX_LATENCY_MS}")
    if key == "app_version" and not re.fullmatch(r"\d+(\.\d+){0,2}", str(value)):
        raise ValueError(f"condition `app_version`={value!r} is not a version such as 5.4.0")


@dataclass
class SimConfig:
    """Everything fixed when the simulator starts."""

    edition: str = "cloud"
    host: str = "127.0.0.1"
    port: int = 0
    seed: int = 1
    size: str = "tiny"
    now: int | None = None  # epoch seconds; default: the wall clock rounded down to the hour
    from_git: tuple[str, ...] = ()
    faults: str = ""
    api_prefix: str | None = None
    workspace: str = DEFAULT_WORKSPACE
    token: str = DEFAULT_CLOUD_TOKEN
    expired_tokens: tuple[str, ...] = (DEFAULT_EXPIRED_TOKEN,)
    username: str = DEFAULT_SERVER_USER
    password: str = DEFAULT_SERVER_PASSWORD
    server_token: str = DEFAULT_SERVER_TOKEN
    tls: bool = False  # HTTPS with a CA made for the run (`Simulator.ca_file`)
    conditions: Conditions = field(default_factory=Conditions)

    @property
    def prefix(self) -> str:
        return (self.api_prefix or API_PREFIXES[self.edition]).rstrip("/")

    def principals(self, first_project: str | None) -> dict[str, Principal]:
        """The sign-ins of a self-hosted host: the configured reader and a restricted one."""
        return {
            self.username: Principal(self.username, self.password, (self.server_token,)),
            RESTRICTED_USER: Principal(
                RESTRICTED_USER,
                RESTRICTED_PASSWORD,
                ("sim-restricted-token",),
                (first_project,) if first_project else (),
            ),
        }
