"""Work that must wait is not work that failed.

A step that meets something it may not touch yet (another holder's upload or Gemini call whose
answer can still arrive until that holder's lease ends, a gone session the channel may still
list) ends with `NotYet`, saying until when. It is not retried blindly and raises no failure
alert: the partition is requested again once `until` has passed (the hop sensors read the same
time from the database), and `make demo` says so.
"""

from __future__ import annotations

from datetime import UTC, datetime


class NotYet(Exception):
    """This work waits until `until` (UTC); `what` says for what, in a user's words."""

    def __init__(self, what: str, until: datetime | None, detail: str = "") -> None:
        self.what = what
        self.until = until
        super().__init__(f"{what} {until_words(until)}" + (f" ({detail})" if detail else ""))


def until_words(until: datetime | None) -> str:
    """'until 14:02:11 UTC', or 'until its lease ends' when the time is not known."""
    if until is None:
        return "until its lease ends"
    return f"until {until.astimezone(UTC):%H:%M:%S} UTC"


def waiting_words(until: datetime, what: str = "an interrupted upload") -> str:
    """The demo's and the sensors' words for a partition whose work waits for `what`."""
    return f"waiting for {what} to settle {until_words(until)}; run again after that"
