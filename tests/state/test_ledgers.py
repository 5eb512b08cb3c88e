"""Budgets, quotas, provider attempts, reviews, scene cache and safety decisions."""

from __future__ import annotations

from datetime import date

import pytest

from mdame_core.state import (
    IdempotencyConflict,
    InvalidInput,
    NotFound,
    ReconcileRequired,
    StateConflict,
)

SHA_A = "a" * 64
SHA_B = "b" * 64


# -- budgets ------------------------------------------------------------------------------
def test_budget_reserve_settle_release(state) -> None:
    assert state.set_budget_cap("tts", "2025-06", 1_000_000) == 1_000_000
    first = state.reserve_budget("tts", "2025-06", 600_000, "call-1")
    assert first is not None
    assert state.reserve_budget("tts", "2025-06", 600_000, "call-1") == first  # same key: once
    assert state.reserve_budget("tts", "2025-06", 500_000, "call-2") is None  # over the cap
    with pytest.raises(IdempotencyConflict):
        state.reserve_budget("tts", "2025-06", 1, "call-1")
    assert state.reserve_budget("tts", "2025-06", 400_000, "call-3") is not None

    assert state.settle_budget("call-1", 550_000) == first
    assert state.settle_budget("call-1", 550_000) == first  # a retry
    with pytest.raises(StateConflict, match="already settled at 550000"):
        state.settle_budget("call-1", 1)
    with pytest.raises(StateConflict, match="cannot be released"):
        state.release_budget("call-1")
    assert state.release_budget("call-3") is True
    assert state.release_budget("call-3") is False
    with pytest.raises(StateConflict):
        state.settle_budget("call-3", 1)

    usage = state.budget_usage("tts", "2025-06")
    assert (usage.reserved_micros, usage.settled_micros, usage.remaining_micros) == (
        0,
        550_000,
        450_000,
    )
    # Settled at less than reserved: the difference is available again.
    assert state.reserve_budget("tts", "2025-06", 450_000, "call-4") is not None
    assert state.reserve_budget("tts", "2025-06", 1, "call-5") is None


def test_budget_refusals(state) -> None:
    with pytest.raises(NotFound, match="no budget cap"):
        state.reserve_budget("tts", "2025-07", 1, "k")
    state.set_budget_cap("tts", "2025-07", 10)
    with pytest.raises(InvalidInput, match="amount_micros"):
        state.reserve_budget("tts", "2025-07", -1, "k")
    with pytest.raises(NotFound):
        state.settle_budget("never-reserved", 1)
    assert state.set_budget_cap("tts", "2025-07", 0) == 0  # lowering is allowed
    assert state.reserve_budget("tts", "2025-07", 1, "k") is None
    assert state.reserve_budget("tts", "2025-07", 0, "free") is not None


# -- quotas -------------------------------------------------------------------------------
def test_quota_per_account_and_day(state) -> None:
    state.upsert_dimension("tech", "Tech")
    account = state.upsert_dimension_account("tech", "youtube", "@tech", 100)
    day, next_day = date(2025, 6, 1), date(2025, 6, 2)
    upload = state.reserve_quota(account, day, 60, "upload:1")
    assert upload is not None
    assert state.reserve_quota(account, day, 60, "upload:1") == upload
    assert state.reserve_quota(account, day, 50, "upload:2") is None
    assert state.reserve_quota(account, next_day, 50, "upload:3") is not None  # a new day
    with pytest.raises(IdempotencyConflict):
        state.reserve_quota(account, next_day, 60, "upload:1")

    assert state.commit_quota("upload:1") == upload
    assert state.commit_quota("upload:1") == upload
    with pytest.raises(StateConflict):
        state.release_quota("upload:1")
    usage = state.quota_usage(account, day)
    assert (usage.committed_units, usage.reserved_units, usage.remaining_units) == (60, 0, 40)

    assert state.reserve_quota(account, day, 40, "upload:4") is not None
    assert state.release_quota("upload:4") is True
    assert state.release_quota("upload:4") is False
    with pytest.raises(StateConflict):
        state.commit_quota("upload:4")
    assert state.quota_usage(account, day).remaining_units == 40
    with pytest.raises(NotFound):
        state.reserve_quota(999, day, 1, "x")
    with pytest.raises(InvalidInput):
        state.reserve_quota(account, day, 0, "zero")


# -- provider attempts --------------------------------------------------------------------
def test_attempts_count_across_prompts_and_unknown_blocks_until_reconciled(state) -> None:
    key = "script:tech:2025-06-01:topic-1"
    first = state.record_attempt(key, "gemini", "prompt-v1", "failed")
    state.record_attempt(key, "gemini", "prompt-v2", "submitted")
    with pytest.raises(ReconcileRequired, match="still submitted"):
        state.record_attempt(key, "gemini", "prompt-v2", "submitted")
    second = state.list_attempts(key)[-1].id
    assert state.finish_attempt(second, "unknown", {"error": "timeout after send"}) == "unknown"
    with pytest.raises(ReconcileRequired, match="still unknown"):
        state.record_attempt(key, "gemini", "prompt-v3", "submitted")
    assert state.reconcile_attempt(second, "succeeded", {"found": "response id r1"}) == "succeeded"
    assert state.reconcile_attempt(second, "succeeded") == "succeeded"  # idempotent
    with pytest.raises(StateConflict):
        state.reconcile_attempt(second, "failed")
    with pytest.raises(StateConflict):
        state.reconcile_attempt(first, "succeeded")
    state.record_attempt(key, "gemini", "prompt-v3", "succeeded")

    attempts = state.list_attempts(key)
    assert [(a.attempt_no, a.request_hash, a.status) for a in attempts] == [
        (1, "prompt-v1", "failed"),
        (2, "prompt-v2", "succeeded"),
        (3, "prompt-v3", "succeeded"),
    ]
    assert attempts[1].detail["reconciled_from"] == "unknown"
    assert state.list_attempts("other-key") == []
    with pytest.raises(InvalidInput):
        state.record_attempt(key, "gemini", "h", "maybe")
    with pytest.raises(NotFound):
        state.reconcile_attempt(999_999, "failed")


# -- reviews ------------------------------------------------------------------------------
@pytest.fixture
def render_id(state) -> int:
    dim = state.upsert_dimension("tech", "Tech")
    base = {"dimension_id": dim, "partition_date": "2025-06-01"}
    topic = state.upsert_work_unit("topic", "t", base)
    script = state.upsert_work_unit("script", "s", {**base, "topic_id": topic})
    return state.upsert_work_unit("render", "r", {"script_id": script})


def test_approval_is_bound_to_the_file_hash(state, render_id) -> None:
    assert state.is_approved(render_id, SHA_A) is False  # never reviewed
    state.record_review(render_id, SHA_A, "technical", "approved", {"lufs": -14})
    state.record_review(render_id, SHA_A, "safety", "approved")
    assert state.is_approved(render_id, SHA_A) is True
    assert state.is_approved(render_id, SHA_B) is False  # another file

    state.record_review(render_id, SHA_A, "safety", "rejected", {"reason": "logo"})
    assert state.is_approved(render_id, SHA_A) is False
    state.record_review(render_id, SHA_A, "safety", "approved")
    assert state.is_approved(render_id, SHA_A) is True

    # The file was re-rendered: a review of the new hash voids the old approval.
    state.record_review(render_id, SHA_B, "technical", "approved")
    assert state.is_approved(render_id, SHA_A) is False
    assert state.is_approved(render_id, SHA_B) is True
    with pytest.raises(InvalidInput, match="SHA-256"):
        state.record_review(render_id, "ABC", "technical", "approved")
    with pytest.raises(NotFound):
        state.is_approved(999_999, SHA_A)


# -- scene cache --------------------------------------------------------------------------
def test_scene_cache_ttl_and_idempotent_put(state, owner) -> None:
    assert state.lookup_scene_cache("h1") is None
    entry = state.put_scene_cache("h1", "media://a", SHA_A, 3600)
    assert (entry.uri, entry.content_sha256) == ("media://a", SHA_A)
    assert state.lookup_scene_cache("h1") == entry
    again = state.put_scene_cache("h1", "media://a", SHA_A, 60)
    assert again == entry  # same clip: idempotent, the longer TTL is kept
    racer = state.put_scene_cache("h1", "media://b", SHA_B, 3600)
    assert racer == entry  # a live entry wins over a concurrent second clip

    owner.execute("UPDATE mdame.scene_cache SET expires_at = now() - interval '1 second'")
    assert state.lookup_scene_cache("h1") is None
    replaced = state.put_scene_cache("h1", "media://b", SHA_B, 3600)
    assert (replaced.uri, replaced.content_sha256) == ("media://b", SHA_B)
    assert state.lookup_scene_cache("h1") == replaced
    with pytest.raises(InvalidInput):
        state.put_scene_cache("h2", "media://c", SHA_A, 0)


# -- safety -------------------------------------------------------------------------------
def test_safety_decisions_are_logged(state, owner) -> None:
    state.upsert_dimension("tech", "Tech")
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
