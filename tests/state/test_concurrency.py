"""The acceptance concurrency tests: real PostgreSQL, workers in separate OS processes."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

import psycopg
import pytest
import state_workers as w
from psycopg.types.json import Jsonb

from mdame_core.state import Job, LeaseLost
from tests.adminkit import admin_connect, as_admin

CTX = mp.get_context("spawn")


def _enqueue_many(app_url: str, job_type: str, n: int) -> None:
    """Bulk enqueue through the RPC, pipelined in one transaction (setup, not under test)."""
    with admin_connect(app_url) as conn, conn.cursor() as cur:
        cur.executemany(
            "SELECT mdame.enqueue_job(%s, %s, %s)",
            [(job_type, f"{job_type}:{i}", Jsonb({"n": i})) for i in range(n)],
        )


def _wait_past(owner: psycopg.Connection, job_id: int) -> None:
    """Sleep until the job's lease has expired by the database clock."""
    (left,) = owner.execute(
        "SELECT greatest(0, extract(epoch FROM lease_expires_at - now()))::float8 "
        "FROM mdame.jobs WHERE id = %s",
        (job_id,),
    ).fetchone()
    time.sleep(left + 0.05)


def _join(procs: list) -> None:
    for p in procs:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()


def test_eight_workers_complete_2000_jobs_exactly_once(fresh_db, state, owner) -> None:
    _enqueue_many(fresh_db.app, "scene", 2000)
    start = CTX.Barrier(9)
    out = CTX.Queue()
    procs = [
        CTX.Process(target=w.queue_worker, args=(fresh_db.app, "scene", f"w{i}", start, out))
        for i in range(8)
    ]
    for p in procs:
        p.start()
    start.wait(timeout=60)
    results = [out.get(timeout=120) for _ in procs]
    _join(procs)

    assert [r[2] for r in results if r[2]] == []
    done = sorted(n for _, numbers, _ in results for n in numbers)
    assert done == list(range(2000)), "every job completed exactly once"
    assert sum(1 for _, numbers, _ in results if numbers) >= 2, "work was shared"
    assert state.count_jobs("scene") == {"succeeded": 2000}
    bad = owner.execute(
        "SELECT count(*) FROM mdame.jobs WHERE attempt <> 1 OR result->>'by' <> lease_owner"
    ).fetchone()[0]
    assert bad == 0, "no job was claimed twice"


def test_fifty_concurrent_reservations_against_a_cap_that_fits_twenty(fresh_db, state) -> None:
    amount = 1_234_567
    as_admin(state).set_budget_cap("gemini:text", "2025-06-01", 20 * amount + amount - 1)
    processes, threads = 10, 5
    start = CTX.Event()
    out = CTX.Queue()
    procs = [
        CTX.Process(
            target=w.budget_worker,
            args=(fresh_db.app, threads, start, out, "gemini:text", "2025-06-01", amount, f"p{i}"),
        )
        for i in range(processes)
    ]
    for p in procs:
        p.start()
    ready = [out.get(timeout=60) for _ in procs]
    assert all(tag == "ready" for tag, _ in ready)
    start.set()  # all 50 connections are open: fire together
    outcomes = [o for _ in procs for o in out.get(timeout=60)[1]]
    _join(procs)

    assert len(outcomes) == 50
    errors = [o for _, o in outcomes if isinstance(o, str)]
    assert errors == []
    granted = {key: o for key, o in outcomes if o is not None}
    assert len(granted) == 20
    assert len(set(granted.values())) == 20

    usage = state.budget_usage("gemini:text", "2025-06-01")
    assert usage.reserved_micros == 20 * amount
    assert usage.settled_micros == 0
    assert usage.remaining_micros == amount - 1

    # Settle half at another price, release the rest: the totals follow to the micro-unit.
    keys = sorted(granted)
    for key in keys[:10]:
        as_admin(state).settle_budget(key, amount - 7)
    for key in keys[10:]:
        assert as_admin(state).release_budget(key) is True
    usage = state.budget_usage("gemini:text", "2025-06-01")
    assert (usage.reserved_micros, usage.settled_micros) == (0, 10 * (amount - 7))


def test_lock_race_takeover_and_fencing(fresh_db) -> None:
    start = CTX.Event()
    out = CTX.Queue()
    commands = {h: CTX.Queue() for h in ("A", "B")}
    procs = {
        h: CTX.Process(
            target=w.lock_racer,
            args=(fresh_db.app, "pipeline:tech", h, 1, start, out, commands[h]),
        )
        for h in ("A", "B")
    }
    for p in procs.values():
        p.start()
    start.set()
    first = dict((holder, token) for holder, _, token in (out.get(timeout=60) for _ in procs))
    winners = [h for h, token in first.items() if token is not None]
    assert len(winners) == 1, first
    winner = winners[0]
    loser = "B" if winner == "A" else "A"

    # The winner stops heartbeating; once its lease expires the loser takes over.
    commands[loser].put("acquire_until_taken")
    _, _, new_token = out.get(timeout=30)
    assert new_token is not None and new_token > first[winner]

    for command in ("heartbeat", "release"):
        commands[winner].put(command)
        holder, done, outcome = out.get(timeout=30)
        assert (holder, done, outcome) == (winner, command, "LeaseLost:MD004")
    commands[loser].put("heartbeat")
    holder, _, outcome = out.get(timeout=30)
    assert holder == loser and not isinstance(outcome, str)

    for q in commands.values():
        q.put("exit")
    _join(list(procs.values()))


def _kill_holder(fresh_db, owner, job_type: str, worker_id: str) -> Job:
    out = CTX.Queue()
    p = CTX.Process(target=w.claim_and_hang, args=(fresh_db.app, job_type, worker_id, 1, out))
    p.start()
    _, claimed = out.get(timeout=60)
    assert claimed is not None
    os.kill(p.pid, signal.SIGKILL)  # mid-job: no complete, no fail, no goodbye
    p.join(timeout=10)
    assert p.exitcode == -signal.SIGKILL
    _wait_past(owner, claimed.id)
    return claimed


def test_sigkilled_worker_job_is_reaped_and_completed_by_another(fresh_db, state, owner) -> None:
    job_id = as_admin(state).enqueue_job("gpu", "scene:1", {"scene": 1}, max_attempts=3)
    claimed = _kill_holder(fresh_db, owner, "gpu", "doomed-worker")
    assert (claimed.id, claimed.attempt) == (job_id, 1)
    assert state.get_job(job_id).state == "running"  # nothing happens until the reaper runs

    assert state.reap_expired_jobs() == 1
    record = state.get_job(job_id)
    assert (record.state, record.lease_owner) == ("queued", None)
    assert "lease expired" in record.last_error
    with pytest.raises(LeaseLost):  # the dead worker's late completion would be refused
        state.complete_job(claimed)

    out = CTX.Queue()
    p = CTX.Process(target=w.claim_and_complete, args=(fresh_db.app, "gpu", "rescuer", out))
    p.start()
    assert out.get(timeout=60) == ("rescuer", (job_id, 2, True))
    _join([p])
    assert state.get_job(job_id).state == "succeeded"


def test_job_is_dead_after_max_attempts_not_retried_forever(fresh_db, state, owner) -> None:
    job_id = as_admin(state).enqueue_job("gpu", "scene:2", {"scene": 2}, max_attempts=2)
    for attempt in (1, 2):
        crashed = _kill_holder(fresh_db, owner, "gpu", f"crasher-{attempt}")
        assert (crashed.id, crashed.attempt) == (job_id, attempt)
        assert state.reap_expired_jobs() == 1
    record = state.get_job(job_id)
    assert (record.state, record.attempt) == ("dead", 2)
    assert state.claim_job("gpu", "anyone", 60) is None
    assert state.reap_expired_jobs() == 0
    events = [(e.event, e.to_state) for e in state.list_events("job", job_id)]
    assert events == [("lease_expired", "queued"), ("lease_expired", "dead")]
