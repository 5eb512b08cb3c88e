"""Per-minute call limits kept in the ledger (mdame.call_windows): a window never holds more
calls than its limit, whoever takes them, and a slot that frees too late leaves the call unsent."""

from __future__ import annotations

import threading
import time

import pytest
from test_fencing import hold

from mdame_domain.channel import NotSent
from mdame_resources.providers.publisher.pacing import CallPacer
from tests.adminkit import admin_connect, as_admin


@pytest.fixture
def account(state) -> int:
    as_admin(state).upsert_dimension("tech", "Tech")
    return as_admin(state).upsert_dimension_account("tech", "tiktok", "@tech-tt", 10_000)


def _rows(owner, account: int, bucket: str) -> int:
    (count,) = owner.execute(
        "SELECT count(*) FROM mdame.call_windows WHERE account_id = %s AND bucket = %s",
        [account, bucket],
    ).fetchone()
    return int(count)


def test_a_full_window_says_when_it_frees_and_takes_again_once_it_has(
    state, owner, account
) -> None:
    a = hold(state, "tech")
    assert [a.take_call_slot(account, "init", 2, 600) for _ in range(2)] == [0, 0]
    wait_ms = a.take_call_slot(account, "init", 2, 600)
    assert 0 < wait_ms <= 600
    assert a.take_call_slot(account, "status", 2, 600) == 0  # each bucket its own window
    assert _rows(owner, account, "init") == 2  # a refused take records nothing
    time.sleep(wait_ms / 1000 + 0.05)
    assert a.take_call_slot(account, "init", 2, 600) == 0
    # The calls that left the window were pruned by the take.
    assert _rows(owner, account, "init") <= 2


def test_concurrent_takers_never_overfill_a_window(fresh_db, state, account) -> None:
    start = threading.Barrier(8)
    taken: list[int] = []

    def taker() -> None:
        with admin_connect(fresh_db.app, autocommit=True) as conn:
            start.wait(timeout=30)
            for _ in range(3):
                (wait,) = conn.execute(
                    "SELECT mdame.take_call_slot(%s, 'init', 5, 60000)", [account]
                ).fetchone()
                taken.append(wait)

    threads = [threading.Thread(target=taker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(taken) == 24
    assert taken.count(0) == 5
    assert all(0 < w <= 60_000 for w in taken if w)


def test_the_pacer_waits_for_a_slot_that_frees_before_the_deadline(state, owner, account) -> None:
    a = hold(state, "tech")
    pace = CallPacer(a, account, "TikTok", {"init": 1}, 0.3, lambda: None, guard_s=0)
    pace("init")
    pace("init")  # waited about 0.3 s for the first to leave the window
    pace("list")  # not limited: nothing recorded
    assert _rows(owner, account, "init") == 1 and _rows(owner, account, "list") == 0


def test_a_slot_that_frees_after_the_deadline_leaves_the_call_unsent(state, owner, account) -> None:
    a = hold(state, "tech")
    pace = CallPacer(a, account, "TikTok", {"init": 1}, 60.0, lambda: time.time() + 5)
    pace("init")
    with pytest.raises(
        NotSent, match=r"TikTok allows 1 init calls per 60 s .* next frees in 6\d s"
    ):
        pace("init")
    assert _rows(owner, account, "init") == 1
