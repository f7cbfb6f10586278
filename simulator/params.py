"""Query-parameter parsing shared by both editions, and the error every handler raises."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime


class ApiError(Exception):
    """An error answer. `kind` selects the status for editions whose spec leaves it open."""

    def __init__(
        self,
        kind: str,
        message: str,
        status: int = 400,
        exception_name: str | None = None,
        context: str | None = None,
        detail: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.exception_name = exception_name
        self.context = context
        self.detail = detail


def invalid(name: str, value: str, expected: str) -> ApiError:
    return ApiError(
        "invalid_request",
        "Invalid Request",
        400,
        "com.analytics.api.InvalidParameterException",
        name,
        f"parameter {name}={value!r}: expected {expected}",
    )


def parse_instant(name: str, value: str) -> int:
    """ISO-8601 date, timestamp with offset or Z, or naive timestamp (taken as UTC) -> epoch s."""
    text = value.strip()
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp())
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise invalid(
            name,
            value,
            "an ISO-8601 date or timestamp such as 2026-01-31 or 2026-01-31T10:00:00+01:00",
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())


def parse_instant_ms(name: str, value: str) -> int:
    text = value.strip()
    try:
        if len(text) > 10:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            return int(round(moment.timestamp() * 1000))
    except ValueError:
        pass
    return parse_instant(name, value) * 1000


def choice(query: dict[str, str], name: str, valid: tuple[str, ...], default: str) -> str:
    value = query.get(name)
    if value is None or value == "":
        return default
    if value.lower() not in valid:
        raise invalid(name, value, "one of " + ", ".join(valid))
    return value.lower()


def integer(query: dict[str, str], name: str, default: int, minimum: int) -> int:
    value = query.get(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise invalid(name, value, f"an integer >= {minimum}") from None
    if number < minimum:
        raise invalid(name, value, f"an integer >= {minimum}")
    return number


def boolean(query: dict[str, str], name: str) -> bool:
    value = query.get(name, "false").lower()
    if value not in ("true", "false", ""):
        raise invalid(name, value, "true or false")
    return value == "true"


@dataclass(frozen=True)
class Window:
    since: int | None
    until: int | None


def window(
    query: dict[str, str],
    since_name: str,
    until_name: str,
    scale: int,
    default_span: int | None,
    now: int,
) -> Window:
    """since/until in seconds (scale 1) or milliseconds (scale 1000).

    With neither bound given and `default_span` set, the window is the last `default_span`
    seconds up to `now` (the 30-day rule of the specs).
    """
    parse = parse_instant if scale == 1 else parse_instant_ms
    since = parse(since_name, query[since_name]) if query.get(since_name) else None
    until = parse(until_name, query[until_name]) if query.get(until_name) else None
    if since is None and until is None and default_span is not None:
        return Window((now - default_span) * scale, None)
    if since is not None and until is not None and since > until:
        raise invalid(since_name, query[since_name], f"a date before {until_name}")
    return Window(since, until)
