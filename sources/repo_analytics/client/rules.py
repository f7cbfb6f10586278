"""How the client reads an answer that is an error: the rules an edition gives, as data.

An edition's module fills these records (`editions/cloud.py`, `editions/selfhosted.py`); the
client (`api.py`) applies them to every non-2xx answer, and to an error body that arrives with
a 2xx status.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Outcome = Literal["fatal", "skip", "retry_then_skip"]


@dataclass(frozen=True)
class ErrorRule:
    """How to read one kind of error answer: which statuses and message, and what it means."""

    kind: str
    outcome: Outcome
    advice: str  # may use {status}, {url}, {message}
    statuses: tuple[int, ...] = ()
    contains: str = ""  # case-insensitive substring of the error message
    json_body: bool | None = None  # True: JSON error body only; False: non-JSON only

    def matches(self, status: int, message: str, is_json: bool) -> bool:
        if self.statuses and status not in self.statuses:
            return False
        if self.json_body is not None and self.json_body != is_json:
            return False
        return not self.contains or self.contains.lower() in message.lower()


@dataclass(frozen=True)
class ErrorEnvelope:
    """How an edition's error body is recognised whatever the status, a 200 too: a JSON object
    whose `key` equals `value` (cloud `{"type": "error", ...}`), or, without a value, holds a
    non-empty list (self-hosted `{"errors": [...]}`)."""

    key: str
    value: str | None = None

    def matches(self, body: Any) -> bool:
        if not isinstance(body, dict) or self.key not in body:
            return False
        found = body[self.key]
        if self.value is not None:
            return found == self.value
        return isinstance(found, list) and bool(found)
