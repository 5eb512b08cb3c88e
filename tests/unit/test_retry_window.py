"""The retry rule the hop sensors and the content retry sensor share: a backoff that doubles,
is jittered from the partition key and capped, and a window that closes by the calendar."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from mdame_core import settings
from mdame_core.settings import SettingsError
from mdame_domain.retry_window import JITTER, RetryWindow, retry_verdict

KEY = "2026-11-29|science"
DAY = date(2026, 11, 29)
WINDOW = RetryWindow(days=1, backoff_s=120.0, backoff_max_s=3600.0)


def test_the_backoff_doubles_with_each_retry_until_the_cap_and_never_passes_it():
    waits = [WINDOW.backoff(KEY, n) for n in range(1, 12)]
    for n, wait in enumerate(waits, start=1):
        ceiling = min(3600.0, 120.0 * 2 ** (n - 1))
        assert ceiling * (1 - JITTER) <= wait <= ceiling
    assert waits[:5] == sorted(waits[:5]) and len(set(waits[:5])) == 5  # 120 s .. 1920 s
    assert all(3600 * (1 - JITTER) <= w <= 3600 for w in waits[5:])  # capped from retry 6 on
    assert 3600 * (1 - JITTER) <= WINDOW.backoff(KEY, 10_000) <= 3600  # no overflow


def test_the_jitter_is_fixed_by_the_partition_and_the_retry_and_spreads_partitions():
    assert WINDOW.backoff(KEY, 3) == WINDOW.backoff(KEY, 3)
    keys = [f"2026-11-29|dimension{i}" for i in range(20)]
    spread = {round(WINDOW.backoff(k, 3), 3) for k in keys}
    assert len(spread) == 20  # one outage's failures do not all come back at once


def test_a_retry_is_due_once_its_backoff_has_passed():
    ended = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
    wait = WINDOW.backoff(KEY, 2)
    early = retry_verdict(WINDOW, KEY, DAY, 2, ended, ended + timedelta(seconds=wait - 1))
    assert not early.due and "retry 2" in early.reason and f"{wait:.0f}s backoff" in early.reason
    due = retry_verdict(WINDOW, KEY, DAY, 2, ended, ended + timedelta(seconds=wait))
    assert due.due and "retry 2" in due.reason
    # The verdict is a function of its arguments: asking again changes nothing.
    assert retry_verdict(WINDOW, KEY, DAY, 2, ended, ended + timedelta(seconds=wait)) == due


@pytest.mark.parametrize(
    ("days", "last_moment"),
    [
        (0, datetime(2026, 11, 29, 23, 59, 59, tzinfo=UTC)),
        (1, datetime(2026, 11, 30, 23, 59, 59, tzinfo=UTC)),
    ],
    ids=["its-day-only", "its-day-and-the-next"],
)
def test_the_window_closes_at_midnight_utc_after_the_partitions_day_plus_its_days(
    days, last_moment
):
    window = RetryWindow(days=days, backoff_s=1.0, backoff_max_s=1.0)
    ended = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
    assert window.closes_at(DAY) == last_moment + timedelta(seconds=1)
    assert retry_verdict(window, KEY, DAY, 40, ended, last_moment).due
    closed = retry_verdict(window, KEY, DAY, 1, ended, last_moment + timedelta(seconds=1))
    assert not closed.due
    assert (
        f"left the {days}-day retry window at {last_moment.date() + timedelta(days=1)} 00:00 UTC"
        in closed.reason
    )
    assert window.first_day(last_moment.date()) == DAY


def test_the_window_in_days_is_a_whole_number_setting(monkeypatch):
    name = "MDAME_RETRY_WINDOW_DAYS"
    assert settings.default(name) == RetryWindow().days == 1
    monkeypatch.delenv(name, raising=False)
    assert settings.get(name) == 1
    monkeypatch.setenv(name, "0")
    assert settings.get(name) == 0
    monkeypatch.setenv(name, "3")
    assert settings.get(name) == 3
    for bad in ("-1", "1.5", "x"):
        monkeypatch.setenv(name, bad)
        with pytest.raises(SettingsError) as refused:
            settings.get(name)
        assert str(refused.value) == (
            f"{name}={bad!r} is not allowed: it takes a whole number >= 0, in days"
        )
