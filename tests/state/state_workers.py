"""Worker bodies for the concurrency tests, run in separate OS processes (multiprocessing spawn).

Kept in their own module so a spawned child can import them without importing pytest fixtures.
Each reports through a multiprocessing queue; errors are reported, not raised, so the parent can
assert on them.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from mdame_core.state import StateError, StateStore
from tests.adminkit import as_admin


def _store(url: str, pool: int = 1) -> StateStore:
    return StateStore(url, env="dev", pool_max=pool, pool_min=pool)


def queue_worker(url: str, job_type: str, worker_id: str, start: Any, out: Any) -> None:
    """Claim and complete until the queue is empty; report the payload numbers completed."""
    try:
        store = _store(url)
        done: list[int] = []
        start.wait()
        while (job := store.claim_job(job_type, worker_id, 60)) is not None:
            if store.complete_job(job, {"by": worker_id}):
                done.append(job.payload["n"])
        store.close()
        out.put((worker_id, done, None))
    except Exception as exc:  # reported to the parent
        out.put((worker_id, [], repr(exc)))


def budget_worker(
    url: str,
    threads: int,
    start: Any,
    out: Any,
    scope: str,
    period: str,
    amount: int,
    prefix: str,
) -> None:
    """`threads` concurrent reserve_budget calls on their own connections, fired together."""
    store = _store(url, pool=threads)
    results: list[tuple[str, Any]] = []
    lock = threading.Lock()
    ready = threading.Barrier(threads + 1)

    def one(i: int) -> None:
        key = f"{prefix}-{i}"
        ready.wait()
        start.wait()
        try:
            outcome: Any = as_admin(store).reserve_budget(scope, period, amount, key)
        except Exception as exc:
            outcome = repr(exc)
        with lock:
            results.append((key, outcome))

    pool = [threading.Thread(target=one, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    ready.wait()
    out.put(("ready", os.getpid()))
    for t in pool:
        t.join()
    store.close()
    out.put(("done", results))


def lock_racer(
    url: str, lock_name: str, holder: str, ttl: int, start: Any, out: Any, commands: Any
) -> None:
    """Race for the lock, then follow the parent's commands, reporting each outcome."""
    store = _store(url)
    start.wait()
    grant = store.acquire_pipeline_lock(lock_name, holder, ttl)
    out.put((holder, "acquire", grant and grant.token))
    while (command := commands.get()) != "exit":
        try:
            if command == "acquire_until_taken":
                deadline = time.monotonic() + 10 * ttl
                grant = None
                while grant is None and time.monotonic() < deadline:
                    grant = store.acquire_pipeline_lock(lock_name, holder, ttl)
                    if grant is None:
                        time.sleep(0.05)
                out.put((holder, command, grant and grant.token))
            elif command == "heartbeat":
                secret = grant.secret if grant else 0
                out.put((holder, command, store.heartbeat_pipeline_lock(lock_name, holder, secret)))
            elif command == "release":
                secret = grant.secret if grant else 0
                out.put((holder, command, store.release_pipeline_lock(lock_name, holder, secret)))
        except StateError as exc:
            out.put((holder, command, f"{type(exc).__name__}:{exc.sqlstate}"))
    store.close()


def claim_and_hang(url: str, job_type: str, worker_id: str, lease: int, out: Any) -> None:
    """Claim a job and then never finish it (the parent SIGKILLs this process)."""
    store = _store(url)
    job = store.claim_job(job_type, worker_id, lease)
    out.put((worker_id, job))  # with its lease's secret: the test plays the late completion
    time.sleep(3600)


def claim_and_complete(url: str, job_type: str, worker_id: str, out: Any) -> None:
    store = _store(url)
    job = store.claim_job(job_type, worker_id, 60)
    if job is None:
        out.put((worker_id, None))
    else:
        out.put((worker_id, (job.id, job.attempt, store.complete_job(job))))
    store.close()
