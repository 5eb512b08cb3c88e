"""Voice HALT with a backoff retry (0009): halt_voice and retry_halted_voice on real PostgreSQL.

Time is moved by updating the row as the owner, never by sleeping.
"""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from mdame_core.state import Fence, Fenced, RetryNotDue, StateConflict, StateStore

DAY = date(2026, 11, 29)


@pytest.fixture
def held(state: StateStore) -> StateStore:
    token = state.acquire_pipeline_lock("pipeline:tech", "test", 600)
    assert token is not None
    return state.fenced(Fence("pipeline:tech", "test", token, 600))


@pytest.fixture
def script(held: StateStore) -> int:
    """A script of tech waiting for its voice."""
    dim = held.upsert_dimension("tech", "Tech")
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
    next_retry = held.halt_voice(script, "Edge-TTS 403; Gemini TTS failed", 900, 4)
    now = held.db_now()
    assert next_retry is not None
    assert timedelta(seconds=895) < next_retry - now <= timedelta(seconds=900)
    unit = held.get_work_unit("script", script)
    assert unit.state == "halted" and unit.result["reason"].startswith("Edge-TTS 403")
    alerts = [e for e in held.list_events("script", script) if e.event == "voice_halted"]
    assert len(alerts) == 1 and alerts[0].detail["halts"] == 1
    halt = held.get_voice_halt(script)
    assert (halt.halts, halt.max_halts) == (1, 4)


def test_retry_is_refused_before_the_backoff_and_allowed_after(held, script, owner) -> None:
    held.halt_voice(script, "every provider failed", 900, 4)
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


def test_the_backoff_doubles_and_the_last_halt_fails_the_script(held, script, owner) -> None:
    gaps = []
    for _ in range(2):
        now = held.db_now()
        gaps.append((held.halt_voice(script, "down", 900, 3) - now).total_seconds())
        _expire(owner, script)
        held.retry_halted_voice(script)
    assert gaps[0] == pytest.approx(900, abs=5) and gaps[1] == pytest.approx(1800, abs=5)
    assert held.halt_voice(script, "still down", 900, 3) is None
    unit = held.get_work_unit("script", script)
    assert unit.state == "failed" and "no retry left" in unit.result["error"]
    assert len([e for e in held.list_events("script", script) if e.event == "voice_halted"]) == 3


def test_halt_and_retry_are_fenced(held, script, state, owner) -> None:
    live = state.get_lock("pipeline:tech").token
    stale = state.fenced(Fence("pipeline:tech", "old", live + 1000, 600))
    with pytest.raises(Fenced):
        stale.halt_voice(script, "down", 900, 4)
    held.halt_voice(script, "down", 900, 4)
    _expire(owner, script)
    with pytest.raises(Fenced):
        stale.retry_halted_voice(script)
    assert held.get_work_unit("script", script).state == "halted"
