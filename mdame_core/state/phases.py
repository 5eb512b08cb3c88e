"""Phases: a stage's work and its recovery point in one transaction, from the day's
trends to the render, and the requeues of damaged media."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from mdame_core.state.client import ClientBase, JsonObject, _json
from mdame_core.state.records import CacheEntry, Job


class Phases(ClientBase):
    """The phase RPCs of the stages before publishing."""

    def record_trends(self, dimension_slug: str, items: Sequence[JsonObject]) -> list[int]:
        """Stores the day's trends ({"key", "payload"} each), all or none; their ids."""
        return self._scalar("record_trends", dimension_slug, _json(list(items)), self._token())

    def decide_topic(self, idempotency_key: str, payload: JsonObject, decision: JsonObject) -> int:
        """Creates the topic once and, while a candidate, logs the safety decision ({"verdict",
        "rule", "reasons", "classifier"}) and approves or rejects it, together."""
        return self._scalar(
            "decide_topic", idempotency_key, _json(payload), _json(decision), self._token()
        )

    def record_script(self, idempotency_key: str, payload: JsonObject, decision: JsonObject) -> int:
        """Creates the script once and, while drafted, logs its safety decision, approves or
        rejects it and marks its topic scripted, together."""
        return self._scalar(
            "record_script", idempotency_key, _json(payload), _json(decision), self._token()
        )

    def plan_scenes(
        self,
        script_id: int,
        scenes: Sequence[JsonObject],
        job_type: str,
        max_attempts: int,
        partition_key: str,
    ) -> int:
        """The script's scenes ({"key", "payload", "cached", "job"} each): cached ones ready,
        the rest queued with their jobs, and the script planned, together. Jobs enqueued."""
        return self._scalar(
            "plan_scenes",
            script_id,
            _json(list(scenes)),
            job_type,
            max_attempts,
            partition_key,
            self._token(),
        )

    def complete_scene_job(
        self,
        job: Job,
        uri: str,
        content_sha256: str,
        cache_hit: bool,
        ttl_seconds: int,
        detail: JsonObject | None = None,
    ) -> CacheEntry:
        """Cache entry, scene ready and job succeeded, together, under the job's lease.
        detail: what made the clip (engine, relevance, source), kept with the entry."""
        rows = self.call(
            "complete_scene_job",
            *job.lease,
            uri,
            content_sha256,
            cache_hit,
            ttl_seconds,
            _json(detail or {}),
        )
        return CacheEntry(rows[0][0], rows[0][1], job.lease_expires_at, dict(detail or {}))

    def reject_scene_job(self, job: Job, reasons: Sequence[str]) -> None:
        """No engine of the scene's chain made a picture that passed the relevance gate: the
        job and the scene fail for good with the reasons, under the job's lease."""
        self.call("reject_scene_job", *job.lease, _json(list(reasons)))

    def defer_scene_job(self, job: Job, until: datetime, reason: str) -> datetime:
        """The scene waits until `until` (a rate limit, an outage, a paid call in flight, the
        day's budget): the job back to the queue, its attempt given back. Its run_after."""
        return self._scalar("defer_scene_job", *job.lease, until, reason[:2000])

    def finish_visuals(self, script_id: int) -> str:
        """visuals_ready, failed (a scene's job died), rejected (a scene no engine could picture
        past the relevance gate) or still planned; the script's state."""
        return self._scalar("finish_visuals", script_id, self._token())

    def record_voice(self, script_id: int, idempotency_key: str, payload: JsonObject) -> int:
        return self._scalar(
            "record_voice", script_id, idempotency_key, _json(payload), self._token()
        )

    def record_render(
        self, script_id: int, idempotency_key: str, payload: JsonObject, check_name: str
    ) -> str:
        """The render, its review and verdict, and the script rendered or failed, together."""
        return self._scalar(
            "record_render", script_id, idempotency_key, _json(payload), check_name, self._token()
        )

    def record_reviewed_render(
        self,
        script_id: int,
        idempotency_key: str,
        payload: JsonObject,
        reviews: Sequence[JsonObject],
    ) -> str:
        """The render, each review ({"check_name", "problems", "acceptance"}) bound to
        payload sha256 and request_sha256, and the script rendered or failed, together."""
        return self._scalar(
            "record_reviewed_render",
            script_id,
            idempotency_key,
            _json(payload),
            _json(list(reviews)),
            self._token(),
        )

    def requeue_scenes(
        self,
        script_id: int,
        scenes: Sequence[JsonObject],
        reason: str,
        job_type: str,
        max_attempts: int,
        partition_key: str,
    ) -> int:
        """Ready scenes whose clip vanished or rotted ({"scene_id", "job"} each) go back to the
        queue with a fresh job and the script back to planned, together. Jobs enqueued."""
        return self._scalar(
            "requeue_scenes",
            script_id,
            _json(list(scenes)),
            reason,
            job_type,
            max_attempts,
            partition_key,
            self._token(),
        )

    def requeue_voice(self, script_id: int, voice_track_id: int, reason: str) -> str:
        """The script's voice track, whose file is damaged, fails and the script goes back to
        visuals_ready (or stays voice_queued), together. The script's state."""
        return self._scalar("requeue_voice", script_id, voice_track_id, reason, self._token())

    def requeue_render(self, script_id: int, render_id: int, reason: str) -> str:
        """The script's render, whose file is damaged, fails and the script goes back to voiced,
        together; refused (MD003) once a publication names the render. The script's state."""
        return self._scalar("requeue_render", script_id, render_id, reason, self._token())

    def fail_script(self, script_id: int, from_state: str, reason: str) -> bool:
        """Fails a script, its pending publications and their quota; False if a video may be
        out or in flight (reconcile first)."""
        return self._scalar("fail_script", script_id, from_state, reason, self._token())
