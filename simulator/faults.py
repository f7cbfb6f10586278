"""Faults a real host or the network in front of it produces, deterministic from a seed.

Spec string (CLI `--faults`, or `{"spec": ...}` to /_sim/faults):
    `429=0.1,503=0.05,reset=0.02,seed=7,retry_after=2,match=commits`
Kinds carry a rate in [0, 1]; `seed`, `retry_after`, `slow_seconds`, `match`, `path` and
`count` apply to every rule of the string. The JSON form `{"seed": 7, "rules": [{"kind": "429",
"rate": 1, "count": 3, "match": "commits.repository", "retry_after": 2}]}` sets them per rule.
"""

from __future__ import annotations

import math
import random
import threading
from dataclasses import asdict, dataclass
from email.utils import formatdate
from typing import Any

FAULT_KINDS = (
    "429",
    "429date",
    "500",
    "502",
    "503",
    "504",
    "error200",
    "reset",
    "slow",
    "truncate",
    "html",
    "insert",
    "repeat",
    "first_page",
    "empty_pages",
    "same_page",
)
RULE_OPTIONS = ("retry_after", "slow_seconds", "match", "path", "count")
# kinds that answer a paged list otherwise, with status 200 and a well-formed page
PAGE_KINDS = ("first_page", "empty_pages", "same_page")


class FaultSpecError(ValueError):
    """A fault spec that cannot be read; the message names the bad part and the valid ones."""


@dataclass
class FaultRule:
    kind: str
    rate: float
    match: str = ""  # substring of the endpoint name; empty = every API request
    path: str = ""  # substring of the request's (decoded) path; empty = every path
    count: int | None = None  # fire at most this many times
    retry_after: float = 1.0
    slow_seconds: float = 2.0
    fired: int = 0

    def validate(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise FaultSpecError(
                f"unknown fault kind `{self.kind}`; valid kinds: {', '.join(FAULT_KINDS)}"
            )
        if not 0.0 <= self.rate <= 1.0:
            raise FaultSpecError(f"fault rate `{self.rate}` for `{self.kind}` is not in [0, 1]")


@dataclass
class Fault:
    """What one request is to suffer."""

    kind: str
    retry_after: float
    slow_seconds: float

    def retry_after_header(self, now_epoch: float) -> str:
        if self.kind == "429date":
            # rounded up: an HTTP date has whole seconds, and the wait must not come out shorter
            return formatdate(math.ceil(now_epoch + self.retry_after), usegmt=True)
        return str(math.ceil(self.retry_after))  # delay-seconds are whole digits (RFC 9110)


def parse_spec(spec: str) -> tuple[int, list[FaultRule]]:
    """Read the compact string form into (seed, rules)."""
    seed = 0
    rates: list[tuple[str, float]] = []
    options: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, sep, value = part.partition("=")
        if not sep:
            raise FaultSpecError(f"fault spec part `{part}` is not NAME=VALUE")
        if name == "seed":
            seed = convert_option(name, value)
        elif name in RULE_OPTIONS:
            convert_option(name, value)
            options[name] = value
        elif name in FAULT_KINDS:
            try:
                rates.append((name, float(value)))
            except ValueError:
                raise FaultSpecError(f"fault rate `{value}` for `{name}` is not a number") from None
        else:
            raise FaultSpecError(
                f"unknown fault spec name `{name}`; valid: seed, {', '.join(RULE_OPTIONS)}, "
                f"{', '.join(FAULT_KINDS)}"
            )
    rules = [rule_from_dict({"kind": kind, "rate": rate, **options}) for kind, rate in rates]
    return seed, rules


OPTION_FORMS = {
    "seed": "an integer",
    "count": "an integer >= 0",
    "retry_after": "a number of seconds >= 0",
    "slow_seconds": "a number of seconds >= 0",
}


def convert_option(name: str, value: Any) -> Any:
    """An option's value in its type; FaultSpecError naming the option and its valid form."""
    if name in ("match", "path"):
        return str(value)
    try:
        number = int(value) if name in ("seed", "count") else float(value)
        if name != "seed" and not number >= 0:
            raise ValueError
    except (TypeError, ValueError):
        raise FaultSpecError(
            f"fault option `{name}={value}` is not valid; expected {OPTION_FORMS[name]}"
        ) from None
    return number


def rule_from_dict(data: dict[str, Any]) -> FaultRule:
    unknown = set(data) - {"kind", "rate", *RULE_OPTIONS}
    if unknown:
        raise FaultSpecError(
            f"unknown fault rule fields {sorted(unknown)}; valid: kind, rate, "
            f"{', '.join(RULE_OPTIONS)}"
        )
    if "kind" not in data:
        raise FaultSpecError(f"fault rule without `kind`; valid kinds: {', '.join(FAULT_KINDS)}")
    try:
        rate = float(data.get("rate", 1.0))
    except (TypeError, ValueError):
        raise FaultSpecError(
            f"fault rate `{data.get('rate')}` for `{data['kind']}` is not a number"
        ) from None
    rule = FaultRule(
        kind=str(data["kind"]),
        rate=rate,
        match=str(data.get("match", "")),
        path=str(data.get("path", "")),
        count=convert_option("count", data["count"])
        if data.get("count") not in (None, "")
        else None,
        retry_after=convert_option("retry_after", data.get("retry_after", 1.0)),
        slow_seconds=convert_option("slow_seconds", data.get("slow_seconds", 2.0)),
    )
    rule.validate()
    return rule


class FaultPlan:
    """The active rules; decisions come from one seeded generator, in request order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self._rng = random.Random(0)
        self.seed = 0
        # `same_page`: the first answer to each (endpoint, query), served for every path
        self._replays: dict[tuple[str, tuple[tuple[str, str], ...]], bytes] = {}

    def set(self, seed: int, rules: list[FaultRule]) -> None:
        with self._lock:
            self.seed, self._rules, self._rng = seed, rules, random.Random(seed)
            self._replays = {}

    def replayed(
        self, key: tuple[str, tuple[tuple[str, str], ...]], body: bytes | None = None
    ) -> bytes | None:
        """The page kept for `key` (an endpoint and a query), keeping `body` when none is."""
        with self._lock:
            if key not in self._replays and body is not None:
                self._replays[key] = body
            return self._replays.get(key)

    def set_from(self, data: dict[str, Any] | str) -> None:
        if isinstance(data, str):
            self.set(*parse_spec(data))
        elif "spec" in data:
            self.set(*parse_spec(str(data["spec"])))
        else:
            self.set(
                convert_option("seed", data.get("seed", 0)),
                [rule_from_dict(r) for r in data.get("rules", [])],
            )

    def clear(self) -> None:
        self.set(0, [])

    def describe(self) -> dict[str, Any]:
        with self._lock:
            return {"seed": self.seed, "rules": [asdict(r) for r in self._rules]}

    def draw(self, endpoint: str, path: str = "", later_page: bool = False) -> Fault | None:
        """The fault for a request to `endpoint` at `path`, or None; every rule that matches
        the request draws once (`first_page` only on a page after the first: `later_page`)."""
        with self._lock:
            chosen: Fault | None = None
            for rule in self._rules:
                if rule.match not in endpoint or rule.path not in path:  # "" is in every one
                    continue
                if rule.kind == "first_page" and not later_page:
                    continue
                hit = self._rng.random() < rule.rate
                if chosen is None and hit and (rule.count is None or rule.fired < rule.count):
                    rule.fired += 1
                    chosen = Fault(rule.kind, rule.retry_after, rule.slow_seconds)
            return chosen
