"""Voice HALT with a backoff retry (0009, 0022): halt_voice and retry_halted_voice on real
PostgreSQL. A HALT for a passing cause is retried with a capped backoff for as long as the retry
window is open, however many halts that takes; a permanent cause fails the script at once; the
window's close fails it with a reason saying so.

Time is moved by updating the row as the owner, never by sleeping.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from mdame_core.state import (
    Fence,
    Fenced,
    LockGrant,
    LockSecret,
    LockToken,
    RetryNotDue,
    StateConflict,
    StateStore,
)
from tests.adminkit import as_admin

DAY = date(2026, 11, 29)
FAR = datetime(2999, 1, 1, tzinfo=UTC)  # a retry window that stays open


def _halt(store: StateStore, script: int, reason: str, **changes: object):
    """halt_voice with the production backoff (15 min doubling to an hour) and an open window."""
    args: dict = {
        "permanent": False,
        "backoff_s": 900,
        "backoff_max_s": 3600,
        "retry_until": FAR,
        **changes,
    }
    return store.halt_voice(script, reason, **args)


@pytest.fixture
def held(state: StateStore) -> StateStore:
    token = state.acquire_pipeline_lock("pipeline:tech", "test", 600)
    assert token is not None
    return state.fenced(Fence("pipeline:tech", "test", token, 600))


@pytest.fixture
def script(held: StateStore) -> int:
    """A script of tech waiting for its voice."""
    dim = as_admin(held).upsert_dimension("tech", "Tech")
    base = {"dimension_id": dim, "partition_date": DAY.isoformat()}
    trend = held.upsert_work_unit("trend", "tr", {**base, "title": "AI chips"})
    topic = held.upsert_work_unit("topic", "to", {**base, "trend_id": trend})
    script = held.upsert_work_unit("script", "sc", {**base, "topic_id": topic})
    for a, b in [
        ("drafted", "approved"),
        ("approved", "planned"),
        ("planned", "visuals_ready"),
        ("visuals_ready", "voice_queued"),
    ]:
        held.transition("script", script, a, b)
    return script


def _expire(owner, script: int) -> None:
    owner.execute(
        "UPDATE mdame.voice_halts SET next_retry_at = now() - interval '1 second' "
        "WHERE script_id = %s",
        (script,),
    )


def test_halt_records_reason_backoff_and_an_alert_event(held, script, owner) -> None:
    next_retry = _halt(held, script, "Edge-TTS 403; Gemini TTS failed")
    now = held.db_now()
    assert next_retry is not None
    assert timedelta(seconds=895) < next_retry - now <= timedelta(seconds=900)
    unit = held.get_work_unit("script", script)
    assert unit.state == "halted" and unit.result["reason"].startswith("Edge-TTS 403")
    alerts = [e for e in held.list_events("script", script) if e.event == "voice_halted"]
    assert len(alerts) == 1 and alerts[0].detail["halts"] == 1
    halt = held.get_voice_halt(script)
    assert (halt.halts, halt.permanent, halt.retry_until) == (1, False, FAR)


def test_retry_is_refused_before_the_backoff_and_allowed_after(held, script, owner) -> None:
    _halt(held, script, "every provider failed")
    with pytest.raises(RetryNotDue, match="not due before"):
        held.retry_halted_voice(script)
    assert held.get_work_unit("script", script).state == "halted"
    assert (
        held.voice_retries_due(held.get_work_unit("script", script).refs["dimension_id"], DAY) == []
    )
    _expire(owner, script)
    assert [h.script_id for h in held.voice_retries_due(
        held.get_work_unit("script", script).refs["dimension_id"], DAY
    )] == [script]  # fmt: skip
    assert [
        (p.partition_date, p.dimension_slug) for p in held.partitions_with_voice_retry_due()
    ] == [(DAY, "tech")]
    assert held.retry_halted_voice(script) == "voice_queued"
    with pytest.raises(StateConflict):  # once only
        held.retry_halted_voice(script)


def test_a_passing_cause_is_retried_past_any_count_with_a_capped_backoff(
    held, script, owner
) -> None:
    gaps = []
    for _ in range(6):  # 0009 failed the script at its 4th halt
        now = held.db_now()
        gaps.append((_halt(held, script, "down") - now).total_seconds())
        _expire(owner, script)
        assert held.retry_halted_voice(script) == "voice_queued"
    assert gaps == pytest.approx([900, 1800, 3600, 3600, 3600, 3600], abs=5)
    assert held.get_voice_halt(script).halts == 6
    assert len([e for e in held.list_events("script", script) if e.event == "voice_halted"]) == 6


def test_a_permanent_cause_fails_the_script_at_once(held, script) -> None:
    reason = "Edge-TTS unknown voice; fix: tts.edge_voice"
    assert _halt(held, script, reason, permanent=True) is None
    unit = held.get_work_unit("script", script)
    assert unit.state == "failed" and "failed for good" in unit.result["error"]
    assert "tts.edge_voice" in unit.result["error"]
    (event,) = [e for e in held.list_events("script", script) if e.event == "voice_halted"]
    assert event.detail["permanent"] is True and event.detail["next_retry_at"] is None


def test_the_next_retry_is_never_after_the_window_closes(held, script, owner) -> None:
    closes = held.db_now() + timedelta(seconds=600)
    assert _halt(held, script, "down", retry_until=closes) == closes  # not 900 s from now
    _expire(owner, script)
    owner.execute(
        "UPDATE mdame.voice_halts SET retry_until = now() - interval '1 second' "
        "WHERE script_id = %s",
        (script,),
    )  # the window closed while the script waited
    assert held.retry_halted_voice(script) == "failed"
    unit = held.get_work_unit("script", script)
    assert unit.state == "failed" and "retry window closed" in unit.result["error"]
    assert "last cause: down" in unit.result["error"]


def test_a_halt_after_the_window_closed_fails_the_script(held, script) -> None:
    closed = held.db_now() - timedelta(seconds=1)
    assert _halt(held, script, "still down", retry_until=closed) is None
    unit = held.get_work_unit("script", script)
    assert unit.state == "failed" and "retry window closed" in unit.result["error"]


def test_halt_and_retry_are_fenced(held, script, state, owner) -> None:
    live = state.get_lock("pipeline:tech").token
    # The live lock's public token is no secret: it does not hold the lock either.
    for secret in (live, live + 1000):
        stale = state.fenced(
            Fence("pipeline:tech", "old", LockGrant(LockToken(live), LockSecret(secret)), 600)
        )
        with pytest.raises(Fenced):
            _halt(stale, script, "down")
    _halt(held, script, "down")
    _expire(owner, script)
    with pytest.raises(Fenced):
        stale.retry_halted_voice(script)
    assert held.get_work_unit("script", script).state == "halted"
