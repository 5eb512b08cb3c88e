"""Job queue semantics in one process: leases, failures, reaping, and the claim plan."""

from __future__ import annotations

import json
from dataclasses import replace

import psycopg
import pytest
from psycopg.types.json import Jsonb

from mdame_core.state import IdempotencyConflict, InvalidInput, LeaseLost, NotFound
from tests.adminkit import admin_connect, as_admin


def _expire(owner: psycopg.Connection, job_id: int) -> None:
    """Age a lease instead of sleeping through it (the owner may write; the app may not)."""
    owner.execute(
        "UPDATE mdame.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = %s",
        (job_id,),
    )


def test_enqueue_is_idempotent_per_key(state) -> None:
    first = as_admin(state).enqueue_job("scene", "k1", {"a": 1, "b": [1, 2]})
    assert as_admin(state).enqueue_job("scene", "k1", {"b": [1, 2], "a": 1}) == first
    with pytest.raises(IdempotencyConflict, match="different type or payload"):
        as_admin(state).enqueue_job("scene", "k1", {"a": 2})
    with pytest.raises(IdempotencyConflict):
        as_admin(state).enqueue_job("voice", "k1", {"a": 1, "b": [1, 2]})
    assert state.count_jobs() == {"queued": 1}


def test_claim_heartbeat_complete_and_lease_checks(state) -> None:
    assert state.claim_job("scene", "w1", 30) is None
    job_id = as_admin(state).enqueue_job("scene", "k", {"x": 1})
    job = state.claim_job("scene", "w1", 30)
    assert (job.id, job.attempt, job.max_attempts, job.payload) == (job_id, 1, 3, {"x": 1})
    assert state.claim_job("scene", "w2", 30) is None  # leased: nobody else gets it

    later = state.heartbeat_job(job, lease_seconds=120)
    assert later > job.lease_expires_at
    with pytest.raises(LeaseLost, match="lease lost: worker 'w2'"):
        state.heartbeat_job(replace(job, worker_id="w2"))
    with pytest.raises(LeaseLost):
        state.complete_job(replace(job, attempt=2))
    with pytest.raises(NotFound):
        state.complete_job(replace(job, id=999_999))
    # The worker id and attempt are public (the app role reads them): without the claim's
    # secret they hold nothing.
    for other in (0, job.lease_secret + 1, job.id):
        with pytest.raises(LeaseLost):
            state.complete_job(replace(job, lease_secret=other))
    assert str(job.lease_secret) not in repr(job)

    assert state.complete_job(job, {"uri": "media://x"}) is True
    assert state.complete_job(job, {"uri": "media://x"}) is False  # a retry
    with pytest.raises(LeaseLost):  # ... by its own claim only
        state.complete_job(replace(job, lease_secret=job.lease_secret + 1), {"uri": "media://x"})
    record = state.get_job(job.id)
    assert (record.state, record.result, record.lease_expires_at) == (
        "succeeded",
        {"uri": "media://x"},
        None,
    )
    with pytest.raises(LeaseLost):
        state.heartbeat_job(job)


def test_fail_retryable_requeues_then_dies_and_non_retryable_fails(state) -> None:
    job_id = as_admin(state).enqueue_job("scene", "retry", {}, max_attempts=2)
    job = state.claim_job("scene", "w", 30)
    assert state.fail_job(job, "GPU OOM", retryable=True) == "queued"
    job = state.claim_job("scene", "w", 30)
    assert job.attempt == 2
    assert state.fail_job(job, "GPU OOM again", retryable=True) == "dead"
    assert state.get_job(job_id).last_error == "GPU OOM again"

    as_admin(state).enqueue_job("scene", "fatal", {})
    job = state.claim_job("scene", "w", 30)
    assert state.fail_job(job, "bad prompt", retryable=False) == "failed"
    assert state.claim_job("scene", "w", 30) is None
    with pytest.raises(LeaseLost):
        state.fail_job(job, "again", retryable=False)


def test_retry_delay_priority_and_types(state) -> None:
    as_admin(state).enqueue_job("scene", "later", {}, delay_seconds=3600)
    as_admin(state).enqueue_job("scene", "low", {}, priority=200)
    as_admin(state).enqueue_job("scene", "high", {}, priority=10)
    as_admin(state).enqueue_job("voice", "other-type", {})
    order = [state.claim_job("scene", "w", 30).idempotency_key for _ in range(2)]
    assert order == ["high", "low"]
    assert state.claim_job("scene", "w", 30) is None  # "later" is not runnable yet
    job = state.claim_job("voice", "w", 30)
    assert state.fail_job(job, "flaky", True, retry_delay_seconds=3600) == "queued"
    assert state.claim_job("voice", "w", 30) is None


def test_reaper_requeues_expired_and_fences_the_old_worker(state, owner) -> None:
    job_id = as_admin(state).enqueue_job("scene", "k", {}, max_attempts=2)
    slow = state.claim_job("scene", "slow", 60)
    assert state.reap_expired_jobs() == 0  # live lease: left alone
    _expire(owner, job_id)
    assert state.reap_expired_jobs("voice") == 0  # filtered by type
    assert state.reap_expired_jobs() == 1
    for call in (state.heartbeat_job, state.complete_job):
        with pytest.raises(LeaseLost, match="state queued"):
            call(slow)
    again = state.claim_job("scene", "fast", 60)
    assert (again.id, again.attempt) == (job_id, 2)
    with pytest.raises(LeaseLost):
        state.complete_job(slow)
    _expire(owner, job_id)
    assert state.reap_expired_jobs() == 1
    assert state.get_job(job_id).state == "dead"


def test_expired_but_not_reaped_lease_may_still_finish(state, owner) -> None:
    job_id = as_admin(state).enqueue_job("scene", "k", {})
    job = state.claim_job("scene", "w", 60)
    _expire(owner, job_id)
    assert state.complete_job(job) is True
    assert state.reap_expired_jobs() == 0


CLAIM_SELECT = """
SELECT q.id FROM mdame.jobs q
 WHERE q.state = 'queued' AND q.job_type = {job_type} AND q.run_after <= now()
 ORDER BY q.priority, q.id
 LIMIT 1
 FOR UPDATE SKIP LOCKED
"""


def _plan_nodes(plan: dict) -> list[dict]:
    nodes = [plan]
    for child in plan.get("Plans", []):
        nodes.extend(_plan_nodes(child))
    return nodes


def test_claim_uses_the_partial_index_after_bulk_enqueue_and_analyze(fresh_db, state, owner):
    # A few thousand finished jobs and a handful of queued ones, statistics fresh.
    with admin_connect(fresh_db.app) as conn, conn.cursor() as cur:
        cur.executemany(
            "SELECT mdame.enqueue_job('scene', %s, %s)",
            [(f"bulk:{i}", Jsonb({"n": i})) for i in range(3000)],
        )
    with psycopg.connect(fresh_db.app, autocommit=True) as conn:
        conn.execute("""
            DO $$
            DECLARE j record;
            BEGIN
              FOR i IN 1..2990 LOOP
                SELECT * INTO j FROM mdame.claim_job('scene', 'bulk-worker', 60);
                PERFORM mdame.complete_job(j.job_id, 'bulk-worker', j.attempt, j.lease_secret);
              END LOOP;
            END $$""")
    assert state.count_jobs() == {"succeeded": 2990, "queued": 10}
    owner.execute("ANALYZE mdame.jobs")

    # The plan as a one-off query and as the generic plan a plpgsql function ends up caching.
    with owner.transaction(force_rollback=True):
        (custom,) = owner.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + CLAIM_SELECT.format(job_type="'scene'")
        ).fetchone()[0]
        owner.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        owner.execute("PREPARE claim_select(text) AS " + CLAIM_SELECT.format(job_type="$1"))
        (generic,) = owner.execute(
            "EXPLAIN (FORMAT JSON) EXECUTE claim_select('scene')"
        ).fetchone()[0]
        owner.execute("DEALLOCATE claim_select")

    for plan in (custom, generic):
        nodes = _plan_nodes(plan["Plan"])
        text = json.dumps(plan)
        assert not any(n["Node Type"] == "Seq Scan" for n in nodes), text
        assert any(n.get("Index Name") == "jobs_queued_idx" for n in nodes), text
    scan = next(n for n in _plan_nodes(custom["Plan"]) if n.get("Index Name") == "jobs_queued_idx")
    assert scan["Actual Rows"] == 1
    assert scan.get("Rows Removed by Filter", 0) == 0  # finished rows are not walked


# ------------------------------------------------------------------------------------------
# Partition-scoped jobs (0004): a partition's run claims only its own partition's jobs.
# ------------------------------------------------------------------------------------------
def test_a_partition_claim_never_returns_another_partitions_job(state) -> None:
    tech = as_admin(state).enqueue_job("scene", "tech:1", {"n": 1}, partition_key="2026-11-30|tech")
    science = as_admin(state).enqueue_job(
        "scene", "sci:1", {"n": 2}, partition_key="2026-11-30|science"
    )
    loose = as_admin(state).enqueue_job("scene", "loose:1", {"n": 3}, priority=1)  # no partition

    claimed = state.claim_job("scene", "w-tech", 60, partition_key="2026-11-30|tech")
    assert claimed is not None and claimed.id == tech
    # Its own job is taken: nothing else is this partition's, whatever is still queued.
    assert state.claim_job("scene", "w-tech", 60, partition_key="2026-11-30|tech") is None
    assert state.claim_job("scene", "w-x", 60, partition_key="2026-11-29|tech") is None
    # A standalone worker (no partition) claims any: highest priority first.
    assert state.claim_job("scene", "w-any", 60).id == loose
    assert state.claim_job("scene", "w-any", 60).id == science
    assert state.claim_job("scene", "w-any", 60) is None
    assert state.get_job(tech).lease_owner == "w-tech"


def test_the_partition_is_stored_and_part_of_the_idempotency_check(state, owner) -> None:
    first = as_admin(state).enqueue_job("scene", "k", {"a": 1}, partition_key="2026-11-30|tech")
    assert (
        as_admin(state).enqueue_job("scene", "k", {"a": 1}, partition_key="2026-11-30|tech")
        == first
    )
    for other in ("2026-11-30|science", None):
        with pytest.raises(IdempotencyConflict, match="another partition"):
            as_admin(state).enqueue_job("scene", "k", {"a": 1}, partition_key=other)
    stored = owner.execute("SELECT partition_key FROM mdame.jobs WHERE id = %s", (first,))
    assert stored.fetchone() == ("2026-11-30|tech",)


@pytest.mark.parametrize("bad", ["", "x" * 201])
def test_a_bad_partition_key_is_refused(state, bad) -> None:
    with pytest.raises(InvalidInput, match="partition_key"):
        as_admin(state).enqueue_job("scene", "k", {"a": 1}, partition_key=bad)
    with pytest.raises(InvalidInput, match="partition_key"):
        state.claim_job("scene", "w", 60, partition_key=bad)
    assert state.count_jobs() == {}


def test_the_hot_path_keeps_every_check(state) -> None:
    """claim_job and complete_job test their arguments inline (0004): still refused, with the
    helpers' messages."""
    for args, message in [
        (("", "w", 60), "job_type must not be NULL or empty"),
        (("scene", "", 60), "worker_id must not be NULL or empty"),
        (("scene", "w" * 201, 60), "worker_id is longer than 200"),
        (("scene", "w", 0), "lease_seconds must be between 1 and 31622400"),
        (("scene", "w", None), "lease_seconds must not be NULL"),
    ]:
        with pytest.raises(InvalidInput, match=message):
            state.claim_job(*args)
    as_admin(state).enqueue_job("scene", "k", {"a": 1})
    job = state.claim_job("scene", "w", 60)
    for changes, message in [
        ({"id": None}, "job_id must not be NULL"),
        ({"worker_id": ""}, "worker_id must not be NULL or empty"),
        ({"attempt": 0}, "attempt must be between 1 and 100"),
        ({"attempt": None}, "attempt must not be NULL"),
        ({"lease_secret": None}, "lease_secret must not be NULL"),
    ]:
        with pytest.raises(InvalidInput, match=message):
            state.complete_job(replace(job, **changes))
    with pytest.raises(InvalidInput, match="result must be a JSON object"):
        state.call("complete_job", *job.lease, Jsonb([1]))
    with pytest.raises(InvalidInput, match="over the 256 KiB limit"):
        state.complete_job(job, {"big": "x" * 300_000})
    with pytest.raises(LeaseLost):
        state.complete_job(replace(job, worker_id="other"))
    assert state.complete_job(job) is True


def test_a_partition_claim_uses_its_partial_index_after_bulk_enqueue_and_analyze(
    fresh_db, state, owner
):
    # Thousands of finished jobs over 30 partitions, a few queued in each, statistics fresh.
    with admin_connect(fresh_db.app) as conn, conn.cursor() as cur:
        cur.executemany(
            "SELECT mdame.enqueue_job('scene', %s, %s, p_partition_key => %s)",
            [(f"bulk:{i}", Jsonb({"n": i}), f"2026-11-{1 + i % 30:02d}|tech") for i in range(3000)],
        )
    with psycopg.connect(fresh_db.app, autocommit=True) as conn:
        conn.execute("""
            DO $$
            DECLARE j record;
            BEGIN
              FOR i IN 1..2900 LOOP
                SELECT * INTO j FROM mdame.claim_job('scene', 'bulk-worker', 60);
                PERFORM mdame.complete_job(j.job_id, 'bulk-worker', j.attempt, j.lease_secret);
              END LOOP;
            END $$""")
    owner.execute("ANALYZE mdame.jobs")
    query = """SELECT q.id FROM mdame.jobs q
                WHERE q.state = 'queued' AND q.job_type = 'scene' AND q.partition_key = {key}
                  AND q.run_after <= now()
                ORDER BY q.priority, q.id LIMIT 1 FOR UPDATE SKIP LOCKED"""
    with owner.transaction(force_rollback=True):
        (custom,) = owner.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + query.format(key="'2026-11-15|tech'")
        ).fetchone()[0]
        owner.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        owner.execute("PREPARE claim_part(text) AS " + query.format(key="$1"))
        (generic,) = owner.execute(
            "EXPLAIN (FORMAT JSON) EXECUTE claim_part('2026-11-15|tech')"
        ).fetchone()[0]
        owner.execute("DEALLOCATE claim_part")
    for plan in (custom, generic):
        nodes = _plan_nodes(plan["Plan"])
        text = json.dumps(plan)
        assert not any(n["Node Type"] == "Seq Scan" for n in nodes), text
        assert any(n.get("Index Name") == "jobs_queued_partition_idx" for n in nodes), text
    scan = next(
        n for n in _plan_nodes(custom["Plan"]) if n.get("Index Name") == "jobs_queued_partition_idx"
    )
    assert scan["Actual Rows"] == 1
    assert scan.get("Rows Removed by Filter", 0) == 0  # neither finished nor other partitions'
