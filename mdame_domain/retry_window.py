"""When a partition whose run failed is requested again: the one rule every retrying sensor uses.

A failed partition is retried for as long as its day is inside the retry window, each retry
after an exponential backoff with jitter, capped. The bound is time, not a count of attempts:
an outage of any length inside the window heals once the provider answers, and a partition
that keeps failing stops costing runs once its day is over.

- The window: a partition of day D is retried until midnight UTC at the end of day D + `days`
  (`days` 0: only on its own day; 1, the default: on its day and the next).
- Retry n (1 for the first) waits `backoff_s * 2**(n-1)`, capped at `backoff_max_s`, shortened
  by up to JITTER of itself. The jitter comes from the partition key and n, not from a random
  source: evaluating the rule again with the same facts gives the same answer, and partitions
  that failed together (one outage) still come back spread out.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

JITTER = 0.2  # the share of a backoff that jitter may take off (never added: the cap holds)
_MAX_DOUBLINGS = 64  # beyond this the cap has long been reached; keeps 2**n a small float


@dataclass(frozen=True)
class RetryWindow:
    days: int = 1
    backoff_s: float = 120.0
    backoff_max_s: float = 3600.0

    def closes_at(self, day: date) -> datetime:
        """The moment a partition of `day` stops being retried."""
        return datetime.combine(day + timedelta(days=self.days + 1), time.min, tzinfo=UTC)

    def first_day(self, today: date) -> date:
        """The oldest partition day still inside the window on `today`."""
        return today - timedelta(days=self.days)

    def backoff(self, key: str, retry: int) -> float:
        """Seconds to wait before retry number `retry` (>= 1) of partition `key`."""
        doublings = min(max(retry, 1) - 1, _MAX_DOUBLINGS)
        capped = min(self.backoff_max_s, self.backoff_s * 2.0**doublings)
        return capped * (1.0 - JITTER * _fraction(f"{key}:{retry}"))


@dataclass(frozen=True)
class RetryVerdict:
    due: bool
    reason: str


def retry_verdict(
    window: RetryWindow, key: str, day: date, retry: int, last_end: datetime, now: datetime
) -> RetryVerdict:
    """Whether retry number `retry` of partition `key` (of `day`), whose last run ended at
    `last_end`, is due at `now`; the reason says why not, or which retry it is."""
    closes = window.closes_at(day)
    if now >= closes:
        return RetryVerdict(
            False,
            f"{key}: its day left the {window.days}-day retry window at "
            f"{closes:%Y-%m-%d %H:%M} UTC; not retried (re-run it by hand)",
        )
    wait_s = window.backoff(key, retry)
    due_at = last_end + timedelta(seconds=wait_s)
    if now < due_at:
        return RetryVerdict(
            False, f"{key}: retry {retry} due at {due_at:%H:%M:%S} UTC ({wait_s:.0f}s backoff)"
        )
    return RetryVerdict(True, f"{key}: retry {retry} after a {wait_s:.0f}s backoff")


def _fraction(text: str) -> float:
    """A number in [0, 1) fixed by `text`."""
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64
