"""A paid call whose holder was killed holds its budget until someone settles it. When the next
run never asks for that work again (it took another provider), the recovery pass settles it at
its estimate, once the dead holder's lease has run out, and never a live holder's call."""

from __future__ import annotations

import time

from tests.adminkit import as_admin
from tests.state.test_fencing import hold

CAP = 1_000


def test_a_dead_holders_paid_call_is_settled_by_the_next_holders_recovery(state, owner) -> None:
    as_admin(state).upsert_dimension("tech", "Tech", {"daily_budget_micros": CAP})
    dead = hold(state, "tech", ttl=1, holder="killed")
    start = dead.begin_paid_call("tech", "voice:tts", "gemini:tts", "h", 40, None, 3, 0)
    assert start.action == "submit"
    assert dead.settle_orphaned_paid_calls("tech") == 0  # its own holder's call: still live

    time.sleep(1.2)  # the holder was SIGKILLed: its lock and its call's lease run out
    later = hold(state, "tech", holder="next")
    assert later.settle_orphaned_paid_calls("tech") == 1
    (status, detail) = owner.execute(
        "SELECT status, detail FROM mdame.provider_attempts WHERE id = %s", [start.attempt_id]
    ).fetchone()
    assert status == "failed" and detail["settled_at_estimate"] == 40
    ledger = owner.execute("SELECT state, actual_micros FROM mdame.budget_ledger").fetchall()
    assert ledger == [("settled", 40)]
    assert later.settle_orphaned_paid_calls("tech") == 0  # once


def test_another_dimensions_paid_calls_are_not_touched(state, owner) -> None:
    for slug in ("tech", "news"):
        as_admin(state).upsert_dimension(slug, slug.title(), {"daily_budget_micros": CAP})
    news = hold(state, "news", ttl=1, holder="killed")
    news.begin_paid_call("news", "voice:tts", "gemini:tts", "h", 40, None, 3, 0)
    time.sleep(1.2)
    assert hold(state, "tech").settle_orphaned_paid_calls("tech") == 0
    assert owner.execute("SELECT state FROM mdame.budget_ledger").fetchall() == [("reserved",)]
