"""Job-queue throughput: claim_job + complete_job through StateStore, 1/4/8 worker processes.

Creates a fresh database on the local cluster, migrates it, and for each worker count enqueues
N jobs of its own type, starts the workers (separate processes) together and measures how long
they take to claim and complete every job. Prints a table; drops the database at the end.

    PYTHONPATH=. ENV=dev python bench/queue.py [--jobs 4000] [--workers 1,4,8]
"""
# ruff: noqa: E402  (imports follow the sys.path fix below, on purpose)

from __future__ import annotations

import os
import sys

# Run as a script, this file's folder comes first on sys.path and "queue" would shadow the
# standard library module that multiprocessing and psycopg import: drop the folder, add the repo.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))

import argparse
import multiprocessing as mp
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg.types.json import Jsonb

from mdame_core import settings
from mdame_core.migrate import migrate
from mdame_core.state import StateStore


@dataclass(frozen=True)
class Round:
    workers: int
    jobs: int
    seconds: float
    per_worker: list[int]

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds


def _url(user: str, dbname: str) -> str:
    parts = urlsplit(settings.superuser_url())
    return f"postgresql://{user}@{parts.hostname}:{parts.port}/{dbname}"


def worker(url: str, job_type: str, worker_id: str, barrier: Any, out: Any) -> None:
    store = StateStore(url, env="dev", pool_max=1)
    barrier.wait()
    done = 0
    while (job := store.claim_job(job_type, worker_id, 60)) is not None:
        store.complete_job(job.id, worker_id, job.attempt)
        done += 1
    out.put(done)
    store.close()


def enqueue(app_url: str, owner_url: str, job_type: str, n: int) -> None:
    with psycopg.connect(app_url) as conn, conn.cursor() as cur:
        cur.executemany(
            "SELECT mdame.enqueue_job(%s, %s, %s)",
            [(job_type, f"{job_type}:{i}", Jsonb({"n": i})) for i in range(n)],
        )
    with psycopg.connect(owner_url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE mdame.jobs")  # as autovacuum would after a bulk enqueue


def run_round(app_url: str, owner_url: str, workers: int, jobs: int) -> Round:
    ctx = mp.get_context("spawn")
    job_type = f"bench-{workers}"
    enqueue(app_url, owner_url, job_type, jobs)
    barrier = ctx.Barrier(workers + 1)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=worker, args=(app_url, job_type, f"w{i}", barrier, out))
        for i in range(workers)
    ]
    for p in procs:
        p.start()
    barrier.wait()  # every worker is connected: start the clock
    started = time.perf_counter()
    counts = [out.get(timeout=600) for _ in procs]
    seconds = time.perf_counter() - started
    for p in procs:
        p.join()
    if sum(counts) != jobs:
        raise SystemExit(f"lost or duplicated jobs: completed {sum(counts)} of {jobs}")
    return Round(workers, jobs, seconds, sorted(counts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--workers", default="1,4,8")
    args = parser.parse_args()
    os.environ.setdefault("ENV", "dev")
    dbname = f"mdame_bench_{os.getpid()}"
    with psycopg.connect(settings.superuser_url(), autocommit=True) as su:
        su.execute(f'CREATE DATABASE "{dbname}" OWNER mdame_owner')
    try:
        owner_url, app_url = _url("mdame_owner", dbname), _url("mdame_app", dbname)
        migrate(owner_url, "dev")
        rounds = [run_round(app_url, owner_url, int(w), args.jobs) for w in args.workers.split(",")]
    finally:
        with psycopg.connect(settings.superuser_url(), autocommit=True) as su:
            su.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
    print(f"claim_job + complete_job, {args.jobs} jobs per round, {os.cpu_count()} CPUs")
    print(f"{'workers':>7}  {'seconds':>8}  {'jobs/s':>8}  per-worker jobs (min..max)")
    for r in rounds:
        spread = f"{r.per_worker[0]}..{r.per_worker[-1]}"
        print(f"{r.workers:>7}  {r.seconds:>8.2f}  {r.rate:>8.0f}  {spread}")


if __name__ == "__main__":
    main()
