"""Budgets, quotas, provider attempts, reviews, scene cache and safety decisions."""

from __future__ import annotations

import threading
import time
from datetime import date

import psycopg
import pytest
from test_fencing import hold

from mdame_core.state import (
    Fence,
    IdempotencyConflict,
    InvalidInput,
    NotFound,
    ReconcileRequired,
    StateConflict,
    StateStore,
)
from tests.adminkit import admin_connect, as_admin

SHA_A = "a" * 64
SHA_B = "b" * 64


# -- budgets ------------------------------------------------------------------------------
def test_budget_reserve_settle_release(state) -> None:
    assert as_admin(state).set_budget_cap("tts", "2025-06", 1_000_000) == 1_000_000
    first = as_admin(state).reserve_budget("tts", "2025-06", 600_000, "call-1")
    assert first is not None
    assert (
        as_admin(state).reserve_budget("tts", "2025-06", 600_000, "call-1") == first
    )  # same key: once
    assert (
        as_admin(state).reserve_budget("tts", "2025-06", 500_000, "call-2") is None
    )  # over the cap
    with pytest.raises(IdempotencyConflict):
        as_admin(state).reserve_budget("tts", "2025-06", 1, "call-1")
    assert as_admin(state).reserve_budget("tts", "2025-06", 400_000, "call-3") is not None

    assert as_admin(state).settle_budget("call-1", 550_000) == first
    assert as_admin(state).settle_budget("call-1", 550_000) == first  # a retry
    with pytest.raises(StateConflict, match="already settled at 550000"):
        as_admin(state).settle_budget("call-1", 1)
    with pytest.raises(StateConflict, match="cannot be released"):
        as_admin(state).release_budget("call-1")
    assert as_admin(state).release_budget("call-3") is True
    assert as_admin(state).release_budget("call-3") is False
    with pytest.raises(StateConflict):
        as_admin(state).settle_budget("call-3", 1)

    usage = state.budget_usage("tts", "2025-06")
    assert (usage.reserved_micros, usage.settled_micros, usage.remaining_micros) == (
        0,
        550_000,
        450_000,
    )
    # Settled at less than reserved: the difference is available again.
    assert as_admin(state).reserve_budget("tts", "2025-06", 450_000, "call-4") is not None
    assert as_admin(state).reserve_budget("tts", "2025-06", 1, "call-5") is None


def test_budget_refusals(state) -> None:
    with pytest.raises(NotFound, match="no budget cap"):
        as_admin(state).reserve_budget("tts", "2025-07", 1, "k")
    as_admin(state).set_budget_cap("tts", "2025-07", 10)
    with pytest.raises(InvalidInput, match="amount_micros"):
        as_admin(state).reserve_budget("tts", "2025-07", -1, "k")
    with pytest.raises(NotFound):
        as_admin(state).settle_budget("never-reserved", 1)
    assert as_admin(state).set_budget_cap("tts", "2025-07", 0) == 0  # lowering is allowed
    assert as_admin(state).reserve_budget("tts", "2025-07", 1, "k") is None
    assert as_admin(state).reserve_budget("tts", "2025-07", 0, "free") is not None


def test_settle_above_the_reservation_only_while_it_fits_under_the_cap(state) -> None:
    as_admin(state).set_budget_cap("tts", "2025-08", 100)
    as_admin(state).reserve_budget("tts", "2025-08", 40, "a")
    as_admin(state).reserve_budget("tts", "2025-08", 30, "b")
    assert (
        as_admin(state).settle_budget("a", 60) is not None
    )  # 20 over, and 60 + 30 <= 100: accepted
    with pytest.raises(InvalidInput, match=r"actual 80 micros exceeds the reserved 30") as err:
        as_admin(state).settle_budget("b", 80)  # 60 + 80 > 100
    assert "cap of tts/2025-08 (100 micros, 60 in use" in err.value.message
    usage = state.budget_usage("tts", "2025-08")
    assert (usage.reserved_micros, usage.settled_micros) == (30, 60)  # nothing changed
    assert as_admin(state).settle_budget("b", 40) is not None  # exactly up to the cap
    assert state.budget_usage("tts", "2025-08").remaining_micros == 0
    as_admin(state).reserve_budget("tts", "2025-08", 0, "c")
    assert as_admin(state).settle_budget("c", 0) is not None  # below or at the reservation: always


def _in_transaction(url: str, statement: str, args: tuple) -> psycopg.Connection:
    """A connection that has run `statement` in an open transaction (holding its locks)."""
    conn = admin_connect(url)  # budget ledgers are the operator's RPCs
    conn.execute(statement, args)
    return conn


@pytest.mark.parametrize("first", ["settle", "reserve"])
def test_settle_and_reserve_serialise_on_the_cap(fresh_db, state, first) -> None:
    """An overrun and a new reservation racing for the last room: exactly one gets it, in
    either order, because both take the cap row's lock."""
    as_admin(state).set_budget_cap("tts", "2025-09", 100)
    as_admin(state).reserve_budget("tts", "2025-09", 50, "a")
    settle = ("SELECT mdame.settle_budget(%s, %s)", ("a", 80))
    reserve = ("SELECT mdame.reserve_budget(%s, %s, %s, %s)", ("tts", "2025-09", 50, "b"))
    held, racing = (settle, reserve) if first == "settle" else (reserve, settle)
    holder = _in_transaction(fresh_db.app, *held)
    outcome: list[object] = []

    def race() -> None:
        with admin_connect(fresh_db.app, autocommit=True) as conn:
            try:
                outcome.append(conn.execute(*racing).fetchone()[0])
            except psycopg.Error as exc:
                outcome.append(exc.sqlstate)

    thread = threading.Thread(target=race)
    thread.start()
    time.sleep(0.5)
    assert thread.is_alive(), "the second call did not wait for the cap lock"
    holder.commit()
    holder.close()
    thread.join(10)
    assert outcome == ([None] if first == "settle" else ["MD001"])
    usage = state.budget_usage("tts", "2025-09")
    assert usage.reserved_micros + usage.settled_micros <= usage.cap_micros


def test_reserving_a_budget_again_after_a_release_holds_money_again(state) -> None:
    as_admin(state).set_budget_cap("tts", "2025-10", 100)
    first = as_admin(state).reserve_budget("tts", "2025-10", 60, "k")
    assert as_admin(state).release_budget("k") is True
    assert as_admin(state).reserve_budget("tts", "2025-10", 60, "k") == first
    assert state.budget_usage("tts", "2025-10").reserved_micros == 60
    assert as_admin(state).reserve_budget("tts", "2025-10", 60, "other") is None
    assert as_admin(state).settle_budget("k", 60) == first  # settle after the re-reserve works
    as_admin(state).reserve_budget("tts", "2025-10", 40, "x")
    as_admin(state).release_budget("x")
    as_admin(state).reserve_budget("tts", "2025-10", 40, "y")
    assert (
        as_admin(state).reserve_budget("tts", "2025-10", 40, "x") is None
    )  # no room: nothing held
    with pytest.raises(StateConflict):
        as_admin(state).settle_budget("x", 1)


# -- quotas -------------------------------------------------------------------------------
def _quota_day(owner, tz: str) -> date:
    return owner.execute("SELECT (now() AT TIME ZONE %s)::date", (tz,)).fetchone()[0]


def test_quota_per_account_and_quota_day(state, owner) -> None:
    as_admin(state).upsert_dimension("tech", "Tech")
    account = as_admin(state).upsert_dimension_account("tech", "youtube", "@tech", 100)
    upload = as_admin(state).reserve_quota(account, 60, "upload:1")
    assert upload is not None
    assert as_admin(state).reserve_quota(account, 60, "upload:1") == upload
    assert as_admin(state).reserve_quota(account, 50, "upload:2") is None
    with pytest.raises(IdempotencyConflict):
        as_admin(state).reserve_quota(account, 50, "upload:1")

    assert as_admin(state).commit_quota("upload:1") == upload
    assert as_admin(state).commit_quota("upload:1") == upload
    assert as_admin(state).reserve_quota(account, 60, "upload:1") == upload  # committed: still held
    with pytest.raises(StateConflict):
        as_admin(state).release_quota("upload:1")
    usage = state.quota_usage(account)
    assert usage.day == _quota_day(owner, "America/Los_Angeles")  # YouTube's quota day
    assert (usage.committed_units, usage.reserved_units, usage.remaining_units) == (60, 0, 40)
    assert state.quota_usage(account, usage.day) == usage

    assert as_admin(state).reserve_quota(account, 40, "upload:4") is not None
    assert as_admin(state).release_quota("upload:4") is True
    assert as_admin(state).release_quota("upload:4") is False
    with pytest.raises(StateConflict):
        as_admin(state).commit_quota("upload:4")
    assert state.quota_usage(account).remaining_units == 40
    with pytest.raises(NotFound):
        as_admin(state).reserve_quota(999, 1, "x")
    with pytest.raises(InvalidInput):
        as_admin(state).reserve_quota(account, 0, "zero")


def test_quota_day_follows_the_account_time_zone(state, owner) -> None:
    as_admin(state).upsert_dimension("tech", "Tech")
    east = as_admin(state).upsert_dimension_account(
        "tech", "youtube", "@east", 10, True, "Pacific/Kiritimati"
    )
    west = as_admin(state).upsert_dimension_account(
        "tech", "youtube", "@west", 10, True, "Pacific/Pago_Pago"
    )
    as_admin(state).reserve_quota(east, 1, "e")
    as_admin(state).reserve_quota(west, 1, "w")
    days = dict(owner.execute("SELECT quota_key, day FROM mdame.quota_ledger").fetchall())
    assert days == {
        "e": _quota_day(owner, "Pacific/Kiritimati"),
        "w": _quota_day(owner, "Pacific/Pago_Pago"),
    }
    assert days["e"] > days["w"]  # 25 hours apart: never the same date
    assert [a.quota_timezone for a in state.list_accounts("tech")] == [
        "Pacific/Kiritimati",
        "Pacific/Pago_Pago",
    ]
    with pytest.raises(psycopg.errors.CheckViolation):
        owner.execute("UPDATE mdame.dimension_accounts SET quota_timezone = 'Nowhere/Atlantis'")


def test_a_seven_day_backfill_spends_one_days_quota(state, owner) -> None:
    """Seven partition dates reserve on the same real quota day and stop at the cap."""
    as_admin(state).upsert_dimension("tech", "Tech")
    account = as_admin(state).upsert_dimension_account("tech", "youtube", "@tech", 3 * 1600)
    granted = [
        as_admin(state).reserve_quota(account, 1600, f"publication:2026-11-{day:02d}|tech")
        for day in range(21, 28)
    ]
    assert [g is not None for g in granted] == [True] * 3 + [False] * 4
    days = owner.execute("SELECT DISTINCT day FROM mdame.quota_ledger").fetchall()
    assert days == [(_quota_day(owner, "America/Los_Angeles"),)]
    assert state.quota_usage(account).remaining_units == 0


def test_reserving_again_after_a_release_holds_units_again(state) -> None:
    as_admin(state).upsert_dimension("tech", "Tech")
    account = as_admin(state).upsert_dimension_account("tech", "youtube", "@tech", 100)
    first = as_admin(state).reserve_quota(account, 60, "upload:1")
    assert as_admin(state).release_quota("upload:1") is True
    assert (
        as_admin(state).reserve_quota(account, 60, "upload:1") == first
    )  # the same row, held again
    assert state.quota_usage(account).reserved_units == 60
    assert as_admin(state).reserve_quota(account, 60, "other") is None  # the units really are held
    assert as_admin(state).commit_quota("upload:1") == first  # commit after the re-reserve works
    assert state.quota_usage(account).committed_units == 60
    # Released, and the units went to someone else meanwhile: no id for nothing held.
    as_admin(state).reserve_quota(account, 30, "upload:2")
    as_admin(state).release_quota("upload:2")
    assert as_admin(state).reserve_quota(account, 40, "upload:3") is not None
    assert as_admin(state).reserve_quota(account, 30, "upload:2") is None
    with pytest.raises(StateConflict):
        as_admin(state).commit_quota("upload:2")


# -- provider attempts --------------------------------------------------------------------
def test_attempts_count_across_prompts_and_unknown_blocks_until_reconciled(state) -> None:
    state = hold(state, "tech")  # attempts are recorded under a live pipeline lock
    key = "script:tech:2025-06-01:topic-1"
    first = as_admin(state).record_attempt(key, "gemini", "prompt-v1", "failed")
    as_admin(state).record_attempt(key, "gemini", "prompt-v2", "submitted")
    with pytest.raises(ReconcileRequired, match="still submitted"):
        as_admin(state).record_attempt(key, "gemini", "prompt-v2", "submitted")
    second = state.list_attempts(key)[-1].id
    assert (
        as_admin(state).finish_attempt(second, "unknown", {"error": "timeout after send"})
        == "unknown"
    )
    with pytest.raises(ReconcileRequired, match="still unknown"):
        as_admin(state).record_attempt(key, "gemini", "prompt-v3", "submitted")
    assert (
        as_admin(state).reconcile_attempt(second, "succeeded", {"found": "response id r1"})
        == "succeeded"
    )
    assert as_admin(state).reconcile_attempt(second, "succeeded") == "succeeded"  # idempotent
    with pytest.raises(StateConflict):
        as_admin(state).reconcile_attempt(second, "failed")
    with pytest.raises(StateConflict):
        as_admin(state).reconcile_attempt(first, "succeeded")
    as_admin(state).record_attempt(key, "gemini", "prompt-v3", "succeeded")

    attempts = state.list_attempts(key)
    assert [(a.attempt_no, a.request_hash, a.status) for a in attempts] == [
        (1, "prompt-v1", "failed"),
        (2, "prompt-v2", "succeeded"),
        (3, "prompt-v3", "succeeded"),
    ]
    assert attempts[1].detail["reconciled_from"] == "unknown"
    assert state.list_attempts("other-key") == []
    with pytest.raises(InvalidInput):
        as_admin(state).record_attempt(key, "gemini", "h", "maybe")
    with pytest.raises(NotFound):
        as_admin(state).reconcile_attempt(999_999, "failed")


# -- reviews ------------------------------------------------------------------------------
@pytest.fixture
def render(state) -> tuple[StateStore, int]:
    """A render of a script, and a view holding tech's pipeline lock (reviews are fenced)."""
    dim = as_admin(state).upsert_dimension("tech", "Tech")
    token = state.acquire_pipeline_lock("pipeline:tech", "test", 600)
    held = state.fenced(Fence("pipeline:tech", "test", token, 600))
    base = {"dimension_id": dim, "partition_date": "2025-06-01"}
    allow = {"verdict": "allow", "rule": "ok", "reasons": [], "classifier": "rules"}
    [trend] = held.record_trends("tech", [{"key": "tr", "payload": base}])
    topic = held.decide_topic("t", {**base, "trend_id": trend}, allow)
    script = held.record_script("s", {**base, "topic_id": topic}, allow)
    return held, held.upsert_work_unit("render", "r", {"script_id": script})


BOTH = ["technical", "safety"]


def test_approval_is_bound_to_the_file_hash(render) -> None:
    state, render_id = render
    assert state.is_approved(render_id, SHA_A, BOTH) is False  # never reviewed
    state.record_review(render_id, SHA_A, "technical", "approved", {"lufs": -14})
    state.record_review(render_id, SHA_A, "safety", "approved")
    assert state.is_approved(render_id, SHA_A, BOTH) is True
    assert state.is_approved(render_id, SHA_B, BOTH) is False  # another file

    state.record_review(render_id, SHA_A, "safety", "rejected", {"reason": "logo"})
    assert state.is_approved(render_id, SHA_A, BOTH) is False
    assert state.is_approved(render_id, SHA_A, ["technical"]) is False  # any rejection counts
    state.record_review(render_id, SHA_A, "safety", "approved")
    assert state.is_approved(render_id, SHA_A, BOTH) is True

    # The file was re-rendered: a review of the new hash voids the old approval.
    state.record_review(render_id, SHA_B, "technical", "approved")
    assert state.is_approved(render_id, SHA_A, BOTH) is False
    assert state.is_approved(render_id, SHA_B, ["technical"]) is True
    with pytest.raises(InvalidInput, match="SHA-256"):
        state.record_review(render_id, "ABC", "technical", "approved")
    with pytest.raises(NotFound):
        state.is_approved(999_999, SHA_A, BOTH)


def test_approval_needs_every_required_review(render) -> None:
    state, render_id = render
    """A render approved only "technically" fails a dimension that also requires safety."""
    state.record_review(render_id, SHA_A, "technical", "approved")
    assert state.is_approved(render_id, SHA_A, ["technical"]) is True
    assert state.is_approved(render_id, SHA_A, ["technical", "safety"]) is False
    state.record_review(render_id, SHA_B, "safety", "approved")  # safety saw other bytes
    state.record_review(render_id, SHA_A, "technical", "approved")
    assert state.is_approved(render_id, SHA_A, ["technical", "safety"]) is False
    state.record_review(render_id, SHA_A, "safety", "approved")
    assert state.is_approved(render_id, SHA_A, ["technical", "safety"]) is True
    for empty in ([], None):
        with pytest.raises(InvalidInput, match="required_checks"):
            state.is_approved(render_id, SHA_A, empty)


# -- scene cache --------------------------------------------------------------------------
def test_scene_cache_ttl_and_idempotent_put(state, owner) -> None:
    assert state.lookup_scene_cache("h1") is None
    entry = as_admin(state).put_scene_cache("h1", "media://a", SHA_A, 3600)
    assert (entry.uri, entry.content_sha256) == ("media://a", SHA_A)
    assert state.lookup_scene_cache("h1") == entry
    again = as_admin(state).put_scene_cache("h1", "media://a", SHA_A, 60)
    assert again == entry  # same clip: idempotent, the longer TTL is kept
    racer = as_admin(state).put_scene_cache("h1", "media://b", SHA_B, 3600)
    assert racer == entry  # a live entry wins over a concurrent second clip

    owner.execute("UPDATE mdame.scene_cache SET expires_at = now() - interval '1 second'")
    assert state.lookup_scene_cache("h1") is None
    replaced = as_admin(state).put_scene_cache("h1", "media://b", SHA_B, 3600)
    assert (replaced.uri, replaced.content_sha256) == ("media://b", SHA_B)
    assert state.lookup_scene_cache("h1") == replaced
    with pytest.raises(InvalidInput):
        as_admin(state).put_scene_cache("h2", "media://c", SHA_A, 0)


# -- safety -------------------------------------------------------------------------------
def test_safety_decisions_are_logged(state, owner) -> None:
    as_admin(state).upsert_dimension("tech", "Tech")
    state = hold(state, "tech")  # decisions are logged under the dimension's pipeline lock
    first = state.log_safety_decision(
        "topic", "topic-key", "tech", "block", "medical-claims", ["cures cancer"], "rules-v1"
    )
    second = state.log_safety_decision("script", "s-key", None, "allow", "default", [], "gemini")
    assert second > first
    rows = owner.execute(
        "SELECT subject_kind, verdict, reasons, dimension_id IS NOT NULL "
        "FROM mdame.safety_audit_logs ORDER BY id"
    ).fetchall()
    assert rows == [("topic", "block", ["cures cancer"], True), ("script", "allow", [], False)]
    assert state.last_safety_verdict("topic", "topic-key") == "block"
    state.log_safety_decision("topic", "topic-key", "tech", "allow", "appeal", [], "human")
    assert state.last_safety_verdict("topic", "topic-key") == "allow"
    assert state.last_safety_verdict("topic", "never-seen") is None
    with pytest.raises(InvalidInput, match="verdict"):
        state.log_safety_decision("topic", "k", None, "maybe", "r", [], "c")
    with pytest.raises(NotFound, match="unknown dimension"):
        state.log_safety_decision("topic", "k", "nope", "allow", "r", [], "c")
