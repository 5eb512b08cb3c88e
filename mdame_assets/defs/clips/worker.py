"""The scene-clip pull worker: claim a job, consult the scene cache, generate on a miss.

The same loop runs inside the GPU code location's scene_clips asset and as a standalone
process on a CUDA host (`mdame worker`). A crashed worker's lease expires and the job is
claimed again; the cache makes the second attempt cheap when the first got far enough.
While a job is being made its lease is renewed, so a slow but live worker keeps its job and
only a dead one loses it.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mdame_core.settings import seconds_setting
from mdame_core.state import Job, LeaseLost, StateConflict, StateError, StateStore
from mdame_domain.media_store import LocalMediaStore
from mdame_resources.providers.visuals import VisualsResource

SCENE_JOB_TYPE = "scene_clip"
LEASE_ENV = "MDAME_JOB_LEASE_S"  # default 300 s; a harness shortens it to test expiry
CACHE_TTL_S = 30 * 24 * 3600


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def lease_s() -> int:
    return max(1, round(seconds_setting(LEASE_ENV, 300)))


class _LeaseKeeper(threading.Thread):
    """Renews a claimed job's lease every third of it while the job is being made."""

    def __init__(self, state: StateStore, job: Job, me: str, lease: int) -> None:
        super().__init__(daemon=True, name=f"lease:{job.id}")
        self.state, self.job, self.me, self.lease = state, job, me, lease
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.lease / 3):
            try:
                self.state.heartbeat_job(self.job.id, self.me, self.job.attempt, self.lease)
            except LeaseLost:
                return  # reaped and taken over: complete_job will say so
            except Exception:  # noqa: BLE001 - database briefly unreachable: try the next beat
                continue

    def __enter__(self) -> _LeaseKeeper:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.join(timeout=5)


@dataclass
class WorkerStats:
    generated: int = 0
    cache_hits: int = 0
    failed: int = 0

    def as_metadata(self) -> dict[str, int]:
        return {"generated": self.generated, "cache_hits": self.cache_hits, "failed": self.failed}


def process_job(
    state: StateStore,
    job: Job,
    me: str,
    visuals: VisualsResource,
    media: LocalMediaStore,
    scratch: Path,
) -> bool:
    """Makes (or finds) the clip for one job; returns True on a cache hit."""
    with _LeaseKeeper(state, job, me, lease_s()):
        return _process(state, job, me, visuals, media, scratch)


def _process(
    state: StateStore,
    job: Job,
    me: str,
    visuals: VisualsResource,
    media: LocalMediaStore,
    scratch: Path,
) -> bool:
    payload = job.payload
    scene_hash = payload["scene_hash"]
    cached = state.lookup_scene_cache(scene_hash)
    hit = cached is not None
    if cached is None:
        out = scratch / f"{scene_hash}.mp4"
        visuals.generate(
            scene_hash, payload["prompt"], payload["palette"], float(payload["duration_s"]), out
        )
        stored = media.put_file(out, ".mp4")
        out.unlink(missing_ok=True)
        state.put_scene_cache(scene_hash, stored.uri, stored.sha256, CACHE_TTL_S)
        cached = state.lookup_scene_cache(scene_hash)
        assert cached is not None
    mark_scene_ready(state, payload["scene_id"], cached.uri, cached.content_sha256, hit)
    state.complete_job(job.id, me, job.attempt, {"uri": cached.uri, "cache_hit": hit})
    return hit


def mark_scene_ready(state: StateStore, scene_id: int, uri: str, sha256: str, hit: bool) -> None:
    scene = state.get_work_unit("scene", scene_id)
    if scene is None or scene.state not in ("planned", "queued"):
        return
    try:
        state.transition(
            "scene", scene.id, scene.state, "ready", {"uri": uri, "sha256": sha256, "cached": hit}
        )
    except StateConflict:
        # Another worker (a reaped lease's old holder) got there first: the row decides.
        again = state.get_work_unit("scene", scene_id)
        if again is None or again.state != "ready":
            raise


def run_worker(
    state: StateStore,
    visuals: VisualsResource,
    media: LocalMediaStore,
    scratch: Path,
    done: Callable[[], bool],
    idle_wait_s: float = 1.0,
    max_idle_s: float | None = None,
    partition_key: str | None = None,
) -> WorkerStats:
    """Claims scene jobs until `done()` or, with max_idle_s, until idle that long; only the
    jobs of `partition_key` when given (a partition's run), else any partition's."""
    me, stats, idle_since = worker_id(), WorkerStats(), time.monotonic()
    while not done():
        job = state.claim_job(SCENE_JOB_TYPE, me, lease_s(), partition_key)
        if job is None:
            state.reap_expired_jobs()
            if max_idle_s is not None and time.monotonic() - idle_since > max_idle_s:
                break
            time.sleep(idle_wait_s)
            continue
        idle_since = time.monotonic()
        try:
            if process_job(state, job, me, visuals, media, scratch):
                stats.cache_hits += 1
            else:
                stats.generated += 1
        except StateError:
            raise  # a lost lease or a broken invariant: not this job's fault, stop loudly
        except Exception as exc:  # noqa: BLE001 - the job records it; retried up to max_attempts
            stats.failed += 1
            state.fail_job(job.id, me, job.attempt, f"{type(exc).__name__}: {exc}"[:2000], True)
    return stats
