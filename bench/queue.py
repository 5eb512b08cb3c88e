"""Job-queue throughput: the project's queue next to a minimal SKIP LOCKED floor, 1/4/8 workers.

Creates a fresh database on the local cluster and migrates it. For each worker count it runs two
rounds on that same database, one after the other: the floor, then the project. The floor is the
least a SKIP LOCKED queue can do: one table, a partial index on queued rows, a claim CTE
(UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING) and a guarded
complete, two autocommit statements per job on a plain connection. The project is claim_job +
complete_job through StateStore (validation, leases, the pool). Each round enqueues N jobs of
its own type, starts the workers (separate processes) together and measures how long they take
to claim and complete every job. Prints jobs/s of both and the ratio project/floor per worker
count; drops the database at the end.

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

TARGET_RATIO = 0.8  # bench/README.md


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


# The floor: the minimal SKIP LOCKED queue, in a schema of its own in the same database.
FLOOR_SCHEMA = """
CREATE SCHEMA floor;
CREATE TABLE floor.jobs (
  id               bigserial PRIMARY KEY,
  job_type         text NOT NULL,
  state            text NOT NULL DEFAULT 'queued',
  priority         integer NOT NULL DEFAULT 100,
  payload          jsonb NOT NULL,
  attempt          integer NOT NULL DEFAULT 0,
  lease_owner      text,
  lease_expires_at timestamptz
);
CREATE INDEX floor_jobs_queued_idx ON floor.jobs (job_type, priority, id) WHERE state = 'queued';
"""
FLOOR_CLAIM = """
UPDATE floor.jobs SET state = 'running', attempt = attempt + 1, lease_owner = %s,
       lease_expires_at = now() + interval '60 seconds'
 WHERE id = (SELECT id FROM floor.jobs WHERE state = 'queued' AND job_type = %s
              ORDER BY priority, id FOR UPDATE SKIP LOCKED LIMIT 1)
RETURNING id, attempt, payload
"""
FLOOR_COMPLETE = """
UPDATE floor.jobs SET state = 'succeeded', lease_expires_at = NULL
 WHERE id = %s AND state = 'running' AND lease_owner = %s AND attempt = %s
"""


def project_worker(url: str, job_type: str, worker_id: str, barrier: Any, out: Any) -> None:
    store = StateStore(url, env="dev", pool_max=1)
    barrier.wait()
    done = 0
    while (job := store.claim_job(job_type, worker_id, 60)) is not None:
        store.complete_job(job)
        done += 1
    out.put(done)
    store.close()


def floor_worker(url: str, job_type: str, worker_id: str, barrier: Any, out: Any) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        barrier.wait()
        done = 0
        while (row := conn.execute(FLOOR_CLAIM, (worker_id, job_type)).fetchone()) is not None:
            cur = conn.execute(FLOOR_COMPLETE, (row[0], worker_id, row[1]))
            if cur.rowcount != 1:
                raise RuntimeError(f"floor job {row[0]} lost its lease")
            done += 1
        out.put(done)


def enqueue(kind: str, owner_url: str, job_type: str, n: int) -> None:
    if kind == "floor":
        with psycopg.connect(owner_url) as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO floor.jobs (job_type, payload) VALUES (%s, %s)",
                [(job_type, Jsonb({"n": i})) for i in range(n)],
            )
        table = "floor.jobs"
    else:
        with psycopg.connect(owner_url) as conn, conn.cursor() as cur:
            cur.execute("SET ROLE mdame_admin")  # enqueueing directly is the operator's
            cur.executemany(
                "SELECT mdame.enqueue_job(%s, %s, %s)",
                [(job_type, f"{job_type}:{i}", Jsonb({"n": i})) for i in range(n)],
            )
        table = "mdame.jobs"
    with psycopg.connect(owner_url, autocommit=True) as conn:
        conn.execute(f"VACUUM ANALYZE {table}")  # as autovacuum would after a bulk enqueue


def run_round(
    kind: str, app_url: str, owner_url: str, workers: int, jobs: int, number: int
) -> Round:
    ctx = mp.get_context("spawn")
    job_type = f"bench-{number}-{workers}"  # a round of its own, even for a repeated count
    enqueue(kind, owner_url, job_type, jobs)
    barrier = ctx.Barrier(workers + 1)
    out = ctx.Queue()
    target, url = (floor_worker, owner_url) if kind == "floor" else (project_worker, app_url)
    procs = [
        ctx.Process(target=target, args=(url, job_type, f"w{i}", barrier, out))
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
        with psycopg.connect(owner_url, autocommit=True) as conn:
            conn.execute(FLOOR_SCHEMA)
        pairs = []
        for w in args.workers.split(","):
            floor = run_round("floor", app_url, owner_url, int(w), args.jobs, len(pairs))
            project = run_round("project", app_url, owner_url, int(w), args.jobs, len(pairs))
            pairs.append((floor, project))
    finally:
        with psycopg.connect(settings.superuser_url(), autocommit=True) as su:
            su.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
    print(
        f"floor: SKIP LOCKED claim CTE + guarded complete; project: claim_job + complete_job "
        f"through StateStore; {args.jobs} jobs per round, {os.cpu_count()} CPUs"
    )
    print(
        f"{'workers':>7}  {'floor jobs/s':>12}  {'project jobs/s':>14}  {'project/floor':>13}  "
        "project per-worker jobs (min..max)"
    )
    for floor, project in pairs:
        spread = f"{project.per_worker[0]}..{project.per_worker[-1]}"
        ratio = project.rate / floor.rate
        print(
            f"{floor.workers:>7}  {floor.rate:>12.0f}  {project.rate:>14.0f}  "
            f"{ratio:>12.2f}x  {spread}"
        )
    print(ratio_line(pairs))


def ratio_line(pairs: list[tuple[Round, Round]]) -> str:
    """The measured ratios, the bench's result (bench/README.md: target at least 0.8x)."""
    ratios = "  ".join(f"{f.workers} workers {p.rate / f.rate:.2f}x" for f, p in pairs)
    return f"ratio project/floor: {ratios}  (target >= {TARGET_RATIO:.2f}x)"


if __name__ == "__main__":
    main()
