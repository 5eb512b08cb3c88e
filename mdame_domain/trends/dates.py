"""Feed dates: RFC 822 and ISO 8601 dates and Unix timestamps, as UTC datetimes."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any


def _as_utc(moment: datetime) -> datetime:
    # Naive timestamps in feeds are taken as UTC, so comparisons never mix naive and aware.
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _parse_rfc822(value: str) -> datetime | None:
    try:
        return _as_utc(parsedate_to_datetime(value))
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _parse_iso8601(value: str) -> datetime | None:
    try:
        # OverflowError: year 1 or 9999 with an offset has no UTC equivalent.
        return _as_utc(datetime.fromisoformat(value))
    except (ValueError, OverflowError):
        return None


def timestamp_date(value: Any) -> datetime | None:
    """A Unix timestamp as a UTC datetime; None for anything else, NaN, infinities or a moment
    outside datetime's range (one odd date leaves its item undated, never fails the feed)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def parse_feed_date(value: str | None, *, rfc822_first: bool) -> datetime | None:
    """Parse a feed date; feeds mix formats in practice, so the other format is the fallback."""
    if not value or not value.strip():
        return None
    value = value.strip()
    parsers = (_parse_rfc822, _parse_iso8601) if rfc822_first else (_parse_iso8601, _parse_rfc822)
    for parser in parsers:
        parsed = parser(value)
        if parsed is not None:
            return parsed
    return None
