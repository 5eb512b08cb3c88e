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

from mdame_assets.defs.clips.cache import CACHE_TTL_S, SCENE_JOB_TYPE, cached_clip
from mdame_core.settings import seconds_setting
from mdame_core.state import Job, LeaseLost, StateError, StateStore
from mdame_domain.media_store import LocalMediaStore
from mdame_resources.providers.visuals import VisualsResource

LEASE_ENV = "MDAME_JOB_LEASE_S"  # default 300 s; a harness shortens it to test expiry


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
    cached = cached_clip(state, media, scene_hash)
    if cached is None:
        out = scratch / f"{scene_hash}.mp4"
        visuals.generate(
            scene_hash,
            payload["prompt"],
            payload["palette"],
            float(payload["duration_s"]),
            out,
            engine=payload.get("engine"),
        )
        stored = media.put_file(out, ".mp4")
        out.unlink(missing_ok=True)
        uri, sha256 = stored.uri, stored.sha256
    else:
        uri, sha256 = cached.uri, cached.content_sha256
    # Cache entry, scene ready and job done commit together, under the job's lease.
    state.complete_scene_job(job, uri, sha256, cached is not None, CACHE_TTL_S)
    return cached is not None


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
    """Claims scene jobs (of one partition, or of any when None) until `done()` or, with
    max_idle_s, until idle that long."""
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
