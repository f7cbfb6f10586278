"""Dates at the boundary: user input in, aware UTC inside, explicit offsets on the wire."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta

from .errors import ConfigError

DATE_FORMS = "a date (2026-01-31) or an ISO-8601 timestamp (2026-01-31T10:00:00+01:00)"


def parse_user_instant(key: str, value: object) -> datetime:
    """A user's date or timestamp as aware UTC; date-only means midnight UTC."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            if len(text) == 10:
                day = date.fromisoformat(text)
                moment = datetime(day.year, day.month, day.day)
            else:
                moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise ConfigError(key, value, DATE_FORMS) from None
    else:
        raise ConfigError(key, value, DATE_FORMS)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def wire(moment: datetime) -> str:
    """The form sent to the API: seconds precision with an explicit +00:00 offset."""
    return moment.astimezone(UTC).isoformat(timespec="seconds")


def utc_from_iso(text: str | None) -> datetime | None:
    """An API timestamp with a zone (`...Z` or an offset) as aware UTC."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def utc_from_epoch_ms(value: int | None) -> datetime | None:
    if value is None:
        return None
    return datetime.fromtimestamp(value / 1000, UTC)


def naive_local(text: str) -> datetime:
    """The cloud commit `date`: local wall time whose zone the API drops. Kept naive."""
    return datetime.fromisoformat(text)


def windows(
    since: datetime, until: datetime, step: timedelta
) -> Iterator[tuple[datetime, datetime]]:
    """Half-open windows [start, end) covering [since, until) in steps of `step`."""
    start = since
    while start < until:
        end = min(start + step, until)
        yield start, end
        start = end


def period_floor(moment: datetime, period: str) -> datetime:
    """The start of the UTC day, ISO week (Monday) or month holding `moment`."""
    day = moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "week":
        return day - timedelta(days=day.weekday())
    if period == "month":
        return day.replace(day=1)
    return day


def period_next(start: datetime, period: str) -> datetime:
    if period == "week":
        return start + timedelta(days=7)
    if period == "month":
        return (start.replace(day=28) + timedelta(days=4)).replace(day=1)
    return start + timedelta(days=1)


def periods(since: datetime, until: datetime, period: str) -> Iterator[tuple[datetime, datetime]]:
    """Calendar periods from the one holding `since` up to `until`; the last may be partial."""
    start = period_floor(since, period)
    while start < until:
        end = period_next(start, period)
        yield start, min(end, until)
        start = end
