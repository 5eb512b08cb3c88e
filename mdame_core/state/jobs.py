"""Jobs: the leased queue (the generic pull, and a scene step's claim of its own job), and
its reads."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from mdame_core.state.client import ClientBase, JsonObject, _json, _obj
from mdame_core.state.records import Job, JobRecord, SceneClaim


class Jobs(ClientBase):
    """The job RPCs and reads."""

    def enqueue_job(
        self,
        job_type: str,
        idempotency_key: str,
        payload: JsonObject,
        max_attempts: int = 3,
        priority: int = 100,
        delay_seconds: int = 0,
        partition_key: str | None = None,
    ) -> int:
        """The job's id, once per key; `partition_key` scopes it to one partition's claims."""
        return self._scalar(
            "enqueue_job",
            job_type,
            idempotency_key,
            _json(payload),
            max_attempts,
            priority,
            delay_seconds,
            partition_key,
        )

    def claim_job(
        self, job_type: str, worker_id: str, lease_seconds: int, partition_key: str | None = None
    ) -> Job | None:
        """The next runnable job under a lease, or None. With `partition_key`, only that
        partition's jobs; without, any partition's. The generic queue pull: the product no
        longer calls it (scene steps claim their own job, claim_scene_job); bench/queue.py
        measures it."""
        rows = self.call("claim_job", job_type, worker_id, lease_seconds, partition_key)
        if not rows:
            return None
        job_id, job_type_, key, payload, attempt, max_attempts, lease_expires_at, secret = rows[0]
        return Job(
            job_id,
            job_type_,
            key,
            payload,
            attempt,
            max_attempts,
            lease_expires_at,
            worker_id,
            secret,
        )

    def heartbeat_job(self, job: Job, lease_seconds: int = 60) -> datetime:
        """Extends `job`'s lease; LeaseLost once it is no longer this claim's."""
        return self._scalar("heartbeat_job", *job.lease, lease_seconds)

    def complete_job(self, job: Job, result: JsonObject | None = None) -> bool:
        """True: completed now; False: this lease had already completed it; LeaseLost: lost."""
        return self._scalar("complete_job", *job.lease, _obj(result))

    def fail_job(self, job: Job, error: str, retryable: bool, retry_delay_seconds: int = 0) -> str:
        """Returns the job's new state: queued, dead (retries used up) or failed."""
        return self._scalar("fail_job", *job.lease, error, retryable, retry_delay_seconds)

    def requeue_dead_job(self, job_id: int, worker_id: str, attempt: int, error: str) -> str | None:
        """The operator's (admin role) requeue of a job whose worker is known dead, by the
        worker id and attempt: its new state, or None when that attempt no longer holds it."""
        return self._scalar("requeue_dead_job", job_id, worker_id, attempt, error)

    def reap_expired_jobs(self, job_type: str | None = None) -> int:
        return self._scalar("reap_expired_jobs", job_type)

    def claim_scene_job(self, job_key: str, worker_id: str, lease_seconds: int) -> SceneClaim:
        """A scene step claims its own scene's job by key, under a generation lease: refused
        (not raised) while another live worker holds this job or another job of the same
        scene_hash. Not fenced by the pipeline lock: the job lease is the fence."""
        [row] = self.call("claim_scene_job", job_key, worker_id, lease_seconds)
        outcome, job_id, job_type, payload, result, attempt, max_attempts, expires, holder = row[:9]
        wait, secret = row[9:]
        job = None
        if outcome == "claimed":
            job = Job(
                job_id,
                job_type,
                job_key,
                payload,
                attempt,
                max_attempts,
                expires,
                worker_id,
                secret,
            )
        return SceneClaim(
            outcome, job_id, payload, result, attempt, max_attempts, holder, float(wait), job
        )

    def get_job(self, job_id: int) -> JobRecord | None:
        rows = self._select(
            """SELECT id, job_type, idempotency_key, state, payload, result, attempt,
                      max_attempts, lease_owner, lease_expires_at, last_error
                 FROM mdame.jobs WHERE id = %s""",
            [job_id],
        )
        return JobRecord(*rows[0]) if rows else None

    def count_jobs(self, job_type: str | None = None) -> dict[str, int]:
        """Jobs per state (of one type, or all)."""
        rows = self._select(
            """SELECT state, count(*) FROM mdame.jobs
                WHERE %(t)s::text IS NULL OR job_type = %(t)s GROUP BY state""",
            {"t": job_type},
        )
        return {state: n for state, n in rows}

    def job_states(self, idempotency_keys: Sequence[str]) -> dict[str, str]:
        """State of each job by its idempotency key (keys with no job are absent)."""
        rows = self._select(
            """SELECT k.idempotency_key, j.state FROM mdame.job_keys k
                 JOIN mdame.jobs j ON j.id = k.job_id WHERE k.idempotency_key = ANY(%s)""",
            [list(idempotency_keys)],
        )
        return dict(rows)
