"""The harness's invariants catch what they claim to: each broken state below is reported."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date

from tests.chaos.invariants import snapshot, violations

DAY = date(2026, 11, 29)


def _dimension(state) -> int:
    dim = state.upsert_dimension("dd", "Dee")
    state.upsert_dimension_account("dd", "outbox", "dd-handle", 10_000)
    return dim


def _trend(state, dim: int) -> int:
    payload = {"dimension_id": dim, "partition_date": DAY.isoformat(), "title": "t"}
    return state.upsert_work_unit("trend", "trend-key", payload)


def test_a_consistent_database_has_no_violations(fresh_db, state, tmp_path) -> None:
    _trend(state, _dimension(state))

    assert violations(fresh_db.app, tmp_path, tmp_path / "media") == []


def test_stuck_units_dead_leases_and_open_reservations_are_reported(
    fresh_db, state, tmp_path
) -> None:
    dim = _dimension(state)
    trend = _trend(state, dim)
    topic = {"dimension_id": dim, "partition_date": DAY.isoformat(), "trend_id": trend}
    state.upsert_work_unit("topic", "topic-key", topic)  # left 'candidate'
    state.enqueue_job("scene_clip", "job-key", {"x": 1})
    state.claim_job("scene_clip", "dead-worker", 60)  # its process is gone
    account = state.list_accounts("dd")[0].id
    state.reserve_quota(account, 1600, "quota-key")  # never committed nor released
    state.acquire_pipeline_lock("pipeline:dd", "dead-run", 60)

    found = violations(fresh_db.app, tmp_path, tmp_path / "media")

    assert any("topic" in v and "non-terminal state candidate" in v for v in found), found
    assert any("dead lease of dead-worker" in v for v in found), found
    assert any("quota reservation quota-key left open" in v for v in found), found
    assert any("lock pipeline:dd still held" in v for v in found), found


def test_illegal_or_broken_event_histories_are_reported(fresh_db, state, owner, tmp_path) -> None:
    trend = _trend(state, _dimension(state))
    owner.execute(
        """INSERT INTO mdame.events (subject_kind, subject_id, event, from_state, to_state)
           VALUES ('trend', %s, 'transition', 'scored', 'published')""",
        [trend],
    )

    found = violations(fresh_db.app, tmp_path, tmp_path / "media")

    assert any("illegal transition in events: trend" in v for v in found), found
    assert any(f"trend {trend} is scored but its events end at published" in v for v in found)


def test_unpublished_outbox_entries_and_half_written_ones_are_reported(
    fresh_db, state, tmp_path
) -> None:
    _dimension(state)
    entry = tmp_path / "outbox" / "dd" / "AAAAAAAAAAA"
    entry.mkdir(parents=True)
    (entry / "metadata.json").write_text(json.dumps({"video_id": entry.name}))
    (tmp_path / "outbox" / "dd" / ".tmp-BBB-x").mkdir()

    found = violations(fresh_db.app, tmp_path, tmp_path / "media")

    assert any("AAAAAAAAAAA belongs to no published publication" in v for v in found), found
    assert any("half-written outbox entries" in v for v in found), found


def test_an_end_state_that_differs_from_the_clean_run_is_reported(
    fresh_db, state, tmp_path
) -> None:
    _trend(state, _dimension(state))
    media = tmp_path / "media"
    clean = snapshot(fresh_db.app, tmp_path, media)
    assert violations(fresh_db.app, tmp_path, media, clean) == []

    other = replace(clean, units={"trend": {"trend-key": "failed"}, "topic": {"t": "approved"}})
    found = violations(fresh_db.app, tmp_path, media, other)

    assert any("trend trend-key is scored, clean run has failed" in v for v in found), found
    assert any("topic t is absent, clean run has approved" in v for v in found), found
