"""The time accumulator behind the demo's breakdown: a category's own time (an inner category's
time is taken out of the one around it), summed over threads, and the lines it prints."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from mdame_domain import timing
from mdame_domain.timing import CATEGORIES, REMAINDER, breakdown_lines, spent


@pytest.fixture(autouse=True)
def clean() -> Iterator[None]:
    timing.reset()
    yield
    timing.reset()


def test_a_category_inside_another_is_counted_once() -> None:
    with spent("encode"):
        time.sleep(0.05)
        with spent("hashing and copies"):
            time.sleep(0.1)
        time.sleep(0.05)

    totals = timing.totals()
    assert 0.1 <= totals["hashing and copies"] < 0.15, totals
    assert 0.1 <= totals["encode"] < 0.15, totals  # its own time, not the 0.2 s around both
    assert set(totals) == {"encode", "hashing and copies"}


def test_an_exception_still_counts_and_unwinds_the_nesting() -> None:
    with pytest.raises(RuntimeError), spent("probes"):
        time.sleep(0.02)
        raise RuntimeError("ffprobe failed")
    with spent("database"):
        time.sleep(0.02)

    totals = timing.totals()
    assert totals["probes"] >= 0.02 and totals["database"] >= 0.02, totals


def test_threads_add_up_and_reset_clears() -> None:
    def work() -> None:
        for _ in range(50):
            with spent("database"):
                time.sleep(0.001)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert timing.totals()["database"] >= 4 * 50 * 0.001
    timing.reset()
    assert timing.totals() == {}


def test_the_breakdown_names_every_category_and_the_remainder() -> None:
    lines = breakdown_lines(100.0, {"encode": 42.0, "database": 4.4})

    assert lines[0] == "time: 100.0 s of runs"
    text = "\n".join(lines)
    for name in (*CATEGORIES, REMAINDER):
        assert sum(name in line for line in lines[1:]) == 1, (name, text)
    assert any("encode" in line and "42.0 s" in line and "42%" in line for line in lines), text
    assert any(REMAINDER in line and "53.6 s" in line and "54%" in line for line in lines), text
    assert any("voice" in line and "0.0 s" in line for line in lines), text


def test_the_remainder_is_never_negative() -> None:
    # Background threads' time (a lock's heartbeat) overlaps the runs' own.
    lines = breakdown_lines(1.0, {"database": 1.5})
    assert any(REMAINDER in line and " 0.0 s" in line for line in lines), lines


def test_since_is_what_was_spent_after_an_earlier_reading() -> None:
    with spent("voice"):
        time.sleep(0.01)
    before = timing.totals()
    with spent("encode"):
        time.sleep(0.02)

    after = timing.since(before)
    assert after["voice"] == 0.0 and after["encode"] >= 0.02, after
