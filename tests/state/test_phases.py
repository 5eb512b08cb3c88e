"""Atomic phases: each stage's work and its recovery point commit in one RPC, and two lock
holders racing one upload never submit it twice."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest
from test_fencing import expire, hold

from mdame_core.state import (
    Fenced,
    IdempotencyConflict,
    InvalidInput,
    LeaseLost,
    StateConflict,
    StateStore,
)
from tests.adminkit import as_admin

DAY = "2026-11-29"
SHA = "e" * 64
DECISION = {"verdict": "allow", "rule": "ok", "reasons": [], "classifier": "rules"}


def _scenes(script_id: int, cached: bool) -> list[dict[str, Any]]:
    return [
        {
            "key": f"scene-{script_id}-{i}",
            "payload": {"script_id": script_id, "scene_index": i, "scene_hash": f"h{i}"},
            "cached": {"uri": f"media://{'a' * 64}.mp4", "sha256": "a" * 64} if cached else None,
            "job": {"scene_hash": f"h{i}", "prompt": "p"},
        }
        for i in range(3)
    ]


def _to_publishing(a: StateStore) -> dict[str, Any]:
    """One script walked through every phase up to publishing, under `a`'s lock."""
    ids: dict[str, Any] = {}
    ids["dim"] = dim = as_admin(a).upsert_dimension("tech", "Tech")
    ids["account"] = as_admin(a).upsert_dimension_account("tech", "youtube", "@tech", 10_000)
    base = {"dimension_id": dim, "partition_date": DAY}
    [trend] = a.record_trends("tech", [{"key": "tr", "payload": {**base, "title": "AI"}}])
    topic = a.decide_topic("to", {**base, "trend_id": trend}, DECISION)
    ids["script"] = script = a.record_script("sc", {**base, "topic_id": topic}, DECISION)
    assert a.get_work_unit("topic", topic).state == "scripted"
    assert a.plan_scenes(script, _scenes(script, cached=True), "scene_clip", 3, f"{DAY}|tech") == 0
    assert a.finish_visuals(script) == "visuals_ready"
    a.transition("script", script, "visuals_ready", "voice_queued")
    a.record_voice(script, "vo", {"script_id": script, "uri": "media://v"})
    a.transition("script", script, "voiced", "render_queued")
    render = {"script_id": script, "sha256": SHA, "problems": []}
    assert a.record_render(script, "re", render, "technical") == "rendered"
    ids["render"] = a.get_work_unit("script", script).result["render_id"]
    a.transition("script", script, "rendered", "publishing")
    ids["pub_payload"] = {
        "script_id": script,
        "render_id": ids["render"],
        "account_id": ids["account"],
        "content_sha256": SHA,
    }
    return ids


def _begin(s: StateStore, ids: dict[str, Any], grace: int = 0):
    return s.begin_upload("pu", ids["pub_payload"], 1600, "outbox", ["technical"], grace)


def _age_attempt_lease(owner: psycopg.Connection) -> None:
    owner.execute(
        "UPDATE mdame.provider_attempts SET lease_expires_at = now() - interval '1 second'"
    )


def test_phases_walk_a_script_to_published_with_one_commit_each(state, owner) -> None:
    a = hold(state, "tech")
    ids = _to_publishing(a)
    start = _begin(a, ids)
    assert start.action == "submit"
    pub = a.get_work_unit("publication", start.publication_id)
    assert pub.state == "uploading"
    assert a.quota_usage(ids["account"]).reserved_units == 1600
    assert a.finish_upload(start.attempt_id, "succeeded", "vid-1") == "published"
    assert a.quota_usage(ids["account"]).committed_units == 1600
    assert _begin(a, ids).action == "published"  # a rerun does nothing
    a.transition("script", ids["script"], "publishing", "published")
    states = owner.execute(
        """SELECT to_state FROM mdame.events WHERE subject_kind = 'script' AND event = 'transition'
            ORDER BY id"""
    ).fetchall()
    assert [s for (s,) in states] == [
        "approved", "planned", "visuals_ready", "voice_queued", "voiced", "render_queued",
        "rendered", "publishing", "published",
    ]  # fmt: skip


def test_a_phase_that_fails_halfway_changes_nothing(state, owner) -> None:
    a = hold(state, "tech")
    ids = _to_publishing(a)
    script = a.record_script(
        "sc2",
        {"dimension_id": ids["dim"], "partition_date": DAY, "topic_id": 1, "x": 1},
        DECISION,
    )
    scenes = _scenes(script, cached=False)
    scenes[2]["payload"]["scene_hash"] = None  # the last scene is bad: no scene_hash
    jobs = owner.execute("SELECT count(*) FROM mdame.jobs").fetchone()
    with pytest.raises(InvalidInput, match="scene_hash"):
        a.plan_scenes(script, scenes, "scene_clip", 3, f"{DAY}|tech")
    assert owner.execute("SELECT count(*) FROM mdame.jobs").fetchone() == jobs
    assert a.list_work_units("scene", script_id=script) == []
    assert a.get_work_unit("script", script).state == "approved"


def test_a_render_with_problems_fails_its_script_in_the_same_phase(state) -> None:
    a = hold(state, "tech")
    ids = _to_publishing(a)
    base = {"dimension_id": ids["dim"], "partition_date": DAY}
    [trend] = a.record_trends("tech", [{"key": "tr9", "payload": {**base, "title": "B"}}])
    topic = a.decide_topic("to9", {**base, "trend_id": trend}, DECISION)
    script = a.record_script("sc9", {**base, "topic_id": topic}, DECISION)
    a.plan_scenes(script, _scenes(script, cached=True), "scene_clip", 3, f"{DAY}|tech")
    a.finish_visuals(script)
    a.transition("script", script, "visuals_ready", "voice_queued")
    a.record_voice(script, "vo9", {"script_id": script})
    a.transition("script", script, "voiced", "render_queued")
    bad = {"script_id": script, "sha256": "f" * 64, "problems": ["no audio stream"]}
    assert a.record_render(script, "re9", bad, "technical") == "failed"
    render = a.get_work_unit("render", "re9")
    assert render.state == "rejected"
    assert not a.is_approved(render.id, "f" * 64, ["technical"])


def test_a_stale_holder_racing_a_new_one_never_submits_twice(state, owner) -> None:
    """A (stale, upload in flight) and B (took the lock over): B may not settle A's attempt
    while A's lease runs, A's late result is refused, and B settles it from the channel once
    the lease is over, so the channel holds one video."""
    channel: dict[str, str] = {}  # work key -> video id: what the platform really has
    a = hold(state, "tech", holder="run-a")
    ids = _to_publishing(a)
    start_a = _begin(a, ids, grace=60)
    assert start_a.action == "submit"  # A submits; its upload is now in flight

    expire(owner, "tech")  # A's heartbeat stalls; B takes over
    b = hold(state, "tech", holder="run-b")
    start_b = _begin(b, ids)
    assert start_b.action == "reconcile" and start_b.attempt_id == start_a.attempt_id
    asked = b.db_now()
    assert channel.get("pu") is None  # A's upload has not landed yet
    with pytest.raises(LeaseLost, match="lease runs"):
        b.reconcile_upload(start_a.publication_id, None, asked)  # would double-post: refused

    channel["pu"] = "vid-a"  # A's upload lands after all
    with pytest.raises(Fenced):
        a.finish_upload(start_a.attempt_id, "succeeded", "vid-a")  # A may record nothing

    _age_attempt_lease(owner)  # A's lease (lock expiry + grace) is over
    with pytest.raises(LeaseLost):  # an answer asked before the lease ended is not enough
        b.reconcile_upload(start_a.publication_id, None, asked - timedelta(minutes=5))
    asked = b.db_now()
    assert b.reconcile_upload(start_a.publication_id, channel.get("pu"), asked) == "published"
    assert _begin(b, ids).action == "published"
    assert len(channel) == 1
    pub = b.get_work_unit("publication", start_a.publication_id)
    assert pub.result["video_id"] == "vid-a"
    assert b.quota_usage(ids["account"]).committed_units == 1600


def test_an_aborted_stale_upload_is_submitted_once_more_by_the_new_holder(state, owner) -> None:
    a = hold(state, "tech", holder="run-a")
    ids = _to_publishing(a)
    start_a = _begin(a, ids, grace=60)
    expire(owner, "tech")
    b = hold(state, "tech", holder="run-b")
    _age_attempt_lease(owner)  # A cancelled itself; its last request is over
    asked = b.db_now()
    assert b.reconcile_upload(start_a.publication_id, None, asked) == "pending"
    assert b.quota_usage(ids["account"]).reserved_units == 0  # released with the failure
    start_b = _begin(b, ids)
    assert start_b.action == "submit" and start_b.attempt_id != start_a.attempt_id
    assert b.finish_upload(start_b.attempt_id, "succeeded", "vid-b") == "published"
    attempts = b.list_attempts("pu")
    assert [x.status for x in attempts] == ["failed", "succeeded"]


def test_the_lock_heartbeat_extends_the_holders_attempt_leases(state, owner) -> None:
    a = hold(state, "tech", holder="run-a")
    ids = _to_publishing(a)
    start = _begin(a, ids, grace=30)
    lease = owner.execute("SELECT lease_expires_at FROM mdame.provider_attempts").fetchone()[0]
    state.heartbeat_pipeline_lock("pipeline:tech", "run-a", a.fence.secret, 3600)
    longer = owner.execute(
        "SELECT lease_expires_at, lease_expires_at - now() > interval '3620 seconds' "
        "FROM mdame.provider_attempts WHERE id = %s",
        [start.attempt_id],
    ).fetchone()
    assert longer[0] > lease and longer[1]


def test_begin_upload_refuses_a_file_not_approved_as_exactly_these_bytes(state) -> None:
    a = hold(state, "tech")
    ids = _to_publishing(a)
    other = {**ids["pub_payload"], "content_sha256": "0" * 64}
    with pytest.raises(StateConflict, match="not approved"):
        a.begin_upload("pu-x", other, 1600, "outbox", ["technical"], 0)
    with pytest.raises(StateConflict, match="not approved"):
        a.begin_upload("pu-y", ids["pub_payload"], 1600, "outbox", ["technical", "safety"], 0)
    assert a.begin_upload("pu", ids["pub_payload"], 1600, "outbox", ["technical"], 0)
    with pytest.raises(IdempotencyConflict):  # the same key with other content
        a.begin_upload("pu", other, 1600, "outbox", ["technical"], 0)


def test_fail_script_releases_quota_and_refuses_when_a_video_may_be_out(state) -> None:
    a = hold(state, "tech")
    ids = _to_publishing(a)
    start = _begin(a, ids)
    with pytest.raises(StateConflict, match="not voice_queued"):  # it moved on: re-read
        a.fail_script(ids["script"], "voice_queued", "stalled")
    assert a.fail_script(ids["script"], "publishing", "stalled") is False  # maybe out
    assert a.get_work_unit("script", ids["script"]).state == "publishing"
    a.finish_upload(start.attempt_id, "failed")  # a definite refusal: pending, quota back
    assert a.fail_script(ids["script"], "publishing", "stalled") is True
    assert a.get_work_unit("script", ids["script"]).state == "failed"
    assert a.get_work_unit("publication", start.publication_id).state == "failed"
    assert a.quota_usage(ids["account"]).reserved_units == 0
