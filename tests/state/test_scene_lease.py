"""The generation lease (0013): a scene step claims its own scene's job by key.

claim_scene_job hands the job out once (attempt + 1, a lease), refuses with a distinct outcome
(not an exception) while another live worker holds the job or another job of the same
scene_hash, takes over a job whose lease ran out (on the last attempt: dead), waits out a retry
delay, and reports a finished job's state. complete_scene_job records the worker in the scene's
result."""

from __future__ import annotations

import threading

import psycopg
import pytest
from test_fencing import hold

from mdame_core.state import LeaseLost, StateStore
from tests.adminkit import as_admin

DAY = "2026-11-29"
SHA = "e" * 64
DECISION = {"verdict": "allow", "rule": "ok", "reasons": [], "classifier": "rules"}


def plan(state: StateStore, hashes: list[str], name: str = "a", attempts: int = 3) -> list[str]:
    """A script's scenes queued with their jobs (as scene_plan leaves them); the job keys."""
    w = hold(state, "tech", holder=f"plan-{name}")
    dim = as_admin(w).upsert_dimension("tech", "Tech")
    base = {"dimension_id": dim, "partition_date": DAY}
    [trend] = w.record_trends("tech", [{"key": f"tr-{name}", "payload": {**base, "title": name}}])
    topic = w.decide_topic(f"to-{name}", {**base, "trend_id": trend}, DECISION)
    script = w.record_script(f"sc-{name}", {**base, "topic_id": topic}, DECISION)
    scenes = [
        {
            "key": f"scene-{name}-{i}",
            "payload": {"script_id": script, "scene_index": i, "scene_hash": h},
            "cached": None,
            "job": {"scene_hash": h, "prompt": "p", "palette": ["#112233"], "duration_s": 1},
        }
        for i, h in enumerate(hashes)
    ]
    w.plan_scenes(script, scenes, "scene_clip", attempts, f"{DAY}|tech")
    w.release_pipeline_lock(w.fence.lock_name, w.fence.holder, w.fence.secret)
    return [s["key"] for s in scenes]


def expire(owner: psycopg.Connection, key: str) -> None:
    owner.execute(
        "UPDATE mdame.jobs SET lease_expires_at = now() - interval '1 second' "
        "WHERE idempotency_key = %s",
        [key],
    )


def test_a_job_is_claimed_once_and_held_while_its_lease_lives(state) -> None:
    [key] = plan(state, ["h1"])
    first = state.claim_scene_job(key, "host-a:1", 60)
    assert first.outcome == "claimed" and first.job is not None
    assert (first.job.attempt, first.job.worker_id, first.holder) == (1, "host-a:1", "host-a:1")

    again = state.claim_scene_job(key, "host-b:2", 60)
    assert (again.outcome, again.job, again.holder, again.attempt) == ("held", None, "host-a:1", 1)
    assert 55 < again.wait_s <= 60  # the rest of the holder's lease
    # The same worker id is refused too: a claim never shares a live lease.
    assert state.claim_scene_job(key, "host-a:1", 60).outcome == "held"

    state.complete_scene_job(first.job, "media://sha256/x.mp4", SHA, False, 600)
    done = state.claim_scene_job(key, "host-b:2", 60)
    assert (done.outcome, done.job) == ("succeeded", None)
    assert done.result["worker"] == "host-a:1" and done.result["sha256"] == SHA
    scene = state.get_work_unit("scene", key)
    assert scene.state == "ready"
    assert (scene.result["worker"], scene.result["cached"]) == ("host-a:1", False)


def test_a_live_lease_on_the_same_scene_hash_refuses_the_claim(state) -> None:
    [mine] = plan(state, ["same"], "mine")
    [theirs] = plan(state, ["same"], "theirs")
    holder = state.claim_scene_job(theirs, "gpu-host:7", 30)
    assert holder.outcome == "claimed"

    busy = state.claim_scene_job(mine, "other-host:8", 30)
    assert (busy.outcome, busy.job, busy.holder) == ("scene_busy", None, "gpu-host:7")
    assert 25 < busy.wait_s <= 30
    assert state.get_job(busy.job_id).state == "queued"  # untouched: no attempt spent

    # Once the holder is done, the claim goes through and the cache has the clip.
    state.complete_scene_job(holder.job, "media://sha256/same.mp4", SHA, False, 600)
    claimed = state.claim_scene_job(mine, "other-host:8", 30)
    assert claimed.outcome == "claimed" and claimed.attempt == 1
    assert state.lookup_scene_cache("same").uri == "media://sha256/same.mp4"


def test_an_expired_lease_on_the_same_hash_does_not_block(state, owner) -> None:
    [mine] = plan(state, ["same"], "mine")
    [theirs] = plan(state, ["same"], "theirs")
    assert state.claim_scene_job(theirs, "dead-host:7", 30).outcome == "claimed"
    expire(owner, theirs)
    assert state.claim_scene_job(mine, "live-host:8", 30).outcome == "claimed"


def test_concurrent_claims_of_one_scene_hash_hand_out_one_lease(fresh_db) -> None:
    """The advisory lock on the scene_hash serializes the claims: never two generations."""
    with StateStore(fresh_db.app, env="dev", pool_max=12) as state:
        keys = plan(state, ["contended"] * 8, "many")
        barrier, outcomes = threading.Barrier(len(keys)), []

        def claim(key: str, n: int) -> None:
            barrier.wait()
            outcomes.append(state.claim_scene_job(key, f"host-{n}:{n}", 60).outcome)

        threads = [threading.Thread(target=claim, args=(k, n)) for n, k in enumerate(keys)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert sorted(outcomes) == ["claimed"] + ["scene_busy"] * 7


def test_an_expired_lease_is_taken_over_and_the_old_holder_fenced_out(state, owner) -> None:
    [key] = plan(state, ["h1"])
    old = state.claim_scene_job(key, "crashed:1", 60).job
    expire(owner, key)

    new = state.claim_scene_job(key, "rescuer:2", 60)
    assert new.outcome == "claimed" and new.job.attempt == 2
    [event] = [e for e in state.list_events("job", new.job_id) if e.event == "lease_expired"]
    assert (event.from_state, event.to_state) == ("running", "queued")
    assert event.detail == {"worker_id": "crashed:1", "attempt": 1, "taken_over_by": "rescuer:2"}
    # The old holder's late result is refused: the lease is the fence.
    with pytest.raises(LeaseLost):
        state.complete_scene_job(old, "media://sha256/late.mp4", SHA, False, 600)
    state.complete_scene_job(new.job, "media://sha256/x.mp4", SHA, False, 600)
    assert state.get_work_unit("scene", key).result["worker"] == "rescuer:2"


def test_an_expired_last_attempt_is_dead_and_a_retry_delay_is_waited_out(state, owner) -> None:
    [last] = plan(state, ["h1"], "last", attempts=1)
    [delayed] = plan(state, ["h2"], "delayed", attempts=3)
    assert state.claim_scene_job(last, "crashed:1", 60).outcome == "claimed"
    expire(owner, last)
    dead = state.claim_scene_job(last, "rescuer:2", 60)
    assert (dead.outcome, dead.job, dead.attempt) == ("dead", None, 1)
    assert state.get_job(dead.job_id).state == "dead"
    assert state.claim_scene_job(last, "rescuer:2", 60).outcome == "dead"  # stays so

    job = state.claim_scene_job(delayed, "w:1", 60).job
    assert state.fail_job(job, "CUDA out of memory", True, 30) == "queued"
    not_due = state.claim_scene_job(delayed, "w:2", 60)
    assert (not_due.outcome, not_due.job) == ("not_due", None)
    assert 25 < not_due.wait_s <= 30


def test_claims_of_one_scene_hash_queue_on_its_advisory_lock(state, fresh_db) -> None:
    """What makes the check-then-claim safe: a claim takes the scene_hash's transaction lock
    before it looks for other holders, so a second claim cannot look before the first commits.
    Another session holding that lock stalls claims of that hash only."""
    [contended] = plan(state, ["contended"], "c")
    [other] = plan(state, ["other"], "o")
    with psycopg.connect(fresh_db.owner) as blocker:
        blocker.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('mdame.scene_hash:' || %s, 0))",
            ["contended"],
        )
        assert state.claim_scene_job(other, "w:1", 60).outcome == "claimed"  # not stalled
        got: list[str] = []
        waiting = threading.Thread(
            target=lambda: got.append(state.claim_scene_job(contended, "w:2", 60).outcome)
        )
        waiting.start()
        waiting.join(1.0)
        assert waiting.is_alive() and got == []  # queued behind the lock
        blocker.rollback()
    waiting.join(10)
    assert got == ["claimed"]
