"""Making one scene's clip, as the scene's own Dagster step does: claim the scene's job under a
generation lease, consult the scene cache, generate on a miss.

The step runs wherever the executor puts it (this process, a child process, a Celery worker
on a GPU host, a k8s pod); it gets only the scene's id and reads the rest from PostgreSQL. The
jobs row is the scene's attempt ledger and lease: a crashed worker's lease expires and the next
claim takes the job over (attempt + 1, up to max_attempts); while a clip is being made its lease
is renewed, so a slow but live worker keeps it and only a dead one loses it. A claim is refused
while another live worker holds the job or another job of the same scene_hash: the step
waits and claims again, and then finds that worker's clip in the cache.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from mdame_core import settings
from mdame_core.state import Job, LeaseLost, NotFound, SceneClaim, StateError, StateStore
from mdame_domain.dimensions import dimension_from_json
from mdame_domain.media_store import MediaStore
from mdame_domain.timing import spent
from mdame_domain.visuals_chain import JUDGED
from mdame_domain.waits import NotYet
from mdame_pipeline.locks import LockBusy, held_named_lock, lock_ttl_s, visuals_lock_name
from mdame_pipeline.scene_cache import CACHE_TTL_S, cached_clip
from mdame_pipeline.scene_pictures import NoPicture, SceneEngines, SceneRequest, make_picture
from mdame_resources.media import name_stored
from mdame_resources.providers.budget import BudgetExhausted, CallContext
from mdame_resources.providers.gemini import PaidCallRefused, PaidCallTransient
from mdame_resources.providers.stock import StockRefused, StockUnavailable
from mdame_resources.providers.visuals import VisualsResource

LEASE_ENV = "MDAME_JOB_LEASE_S"  # default 300 s; a harness shortens it to test expiry
# A name for this worker in its id (a Celery worker's "gpu-0", a pod's name): the scene's result
# records the id, so an operator (and a test) can see where each clip was made.
WORKER_NAME_ENV = "MDAME_WORKER_NAME"
# After a transient provider failure (a 5xx, a dropped connection, a timeout) a scene waits this
# long before its job is claimed again; a test shortens it.
SCENE_RETRY_ENV = "MDAME_SCENE_RETRY_S"
# A job or scene_hash held by a live worker elsewhere is polled at least this often: its clip
# is often done long before its lease would run out.
SCENE_BUSY_POLL_S = 15.0


def worker_id() -> str:
    """`<host>:<pid>`, or `<host>:<name>:<pid>` with MDAME_WORKER_NAME: the pid stays last and
    the host first, as the liveness sweep reads them."""
    host, pid = socket.gethostname(), os.getpid()
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", settings.raw(WORKER_NAME_ENV))[:64]
    return f"{host}:{name}:{pid}" if name else f"{host}:{pid}"


def lease_s() -> int:
    return max(1, round(settings.get(LEASE_ENV)))


class _LeaseKeeper(threading.Thread):
    """Renews a claimed job's lease every third of it while the job is being made."""

    def __init__(self, state: StateStore, job: Job, me: str, lease: int) -> None:
        super().__init__(daemon=True, name=f"lease:{job.id}")
        self.state, self.job, self.me, self.lease = state, job, me, lease
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.lease / 3):
            try:
                self.state.heartbeat_job(self.job, self.lease)
            except LeaseLost:
                return  # taken over: complete_scene_job will say so
            except Exception:  # noqa: BLE001 - database briefly unreachable: try the next beat
                continue

    def __enter__(self) -> _LeaseKeeper:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.join(timeout=5)


@dataclass(frozen=True)
class SceneOutcome:
    """What one scene step did. outcome: generated, cache_hit, done (ready before this step:
    another step or run made it), failed (its job is dead or failed: no attempt left), waiting
    (its job waits until `until`: a rate limit, an outage, a paid call in flight, the day's
    budget) or rejected (no engine of its chain made a picture that passed the gate)."""

    scene_id: int
    outcome: str
    worker: str
    attempt: int
    until: str | None = None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


class SceneBusy(Exception):
    """Another live worker holds the scene's job, or another job of its scene_hash: claim again
    in `wait_s` seconds (its clip will then be in the cache, or its lease over)."""

    def __init__(self, scene_id: int, claim: SceneClaim) -> None:
        self.claim = claim
        self.wait_s = _wait_for(claim)
        super().__init__(
            f"scene {scene_id}: {claim.outcome} (job {claim.job_id}, holder {claim.holder}); "
            f"claiming again in {self.wait_s:.1f}s"
        )


class SceneAttemptFailed(Exception):
    """Generation failed and the job went back to the queue with attempts left: run the step
    again (each claim is one more attempt, up to the job's max_attempts)."""


def _wait_for(claim: SceneClaim) -> float:
    if claim.outcome in ("held", "scene_busy"):
        # A live holder usually finishes long before its lease (300 s) runs out: poll instead.
        return max(0.5, min(claim.wait_s + 0.5, SCENE_BUSY_POLL_S))
    return max(0.5, claim.wait_s + 0.5)  # not_due: the job's own retry delay


class SceneRefused(Exception):
    """A provider refused the scene's work for good (a bad key, an unknown model, a refused
    request): the job failed with the provider's words, which this carries."""


def scene_retry_s() -> float:
    """How long a scene waits after a transient provider failure (MDAME_SCENE_RETRY_S)."""
    return float(settings.get(SCENE_RETRY_ENV))


def make_scene_clip(
    state: StateStore,
    scene_id: int,
    visuals: VisualsResource,
    media: MediaStore,
    scratch: Path,
    engines: SceneEngines | None = None,
) -> SceneOutcome:
    """One scene's clip, made or found; SceneBusy or SceneAttemptFailed when the step should
    run again later, StateError (a lost lease) when another worker took the job over.
    `engines`: the chain's providers, for jobs that name a chain (scene_pictures)."""
    scene = state.get_work_unit("scene", scene_id)
    if scene is None:
        raise NotFound("claim_scene_job", f"scene {scene_id} does not exist", "MD006")
    if scene.state == "ready":
        return SceneOutcome(scene_id, "done", str(scene.result.get("worker", "")), 0)
    key = str(scene.result.get("job_key", scene.idempotency_key))  # a healed scene's new job
    me = worker_id()
    claim = state.claim_scene_job(key, me, lease_s())
    if claim.outcome == "succeeded":
        return SceneOutcome(scene_id, "done", str(claim.result.get("worker", "")), claim.attempt)
    if claim.outcome in ("failed", "dead"):
        return SceneOutcome(scene_id, "failed", str(claim.holder or ""), claim.attempt)
    if claim.job is None:
        if claim.outcome == "not_due" and claim.wait_s > lock_ttl_s():
            # Deferred for longer than a lock's lease (a rate limit's reset, an outage, the
            # day's budget): this run leaves it, and the hop sensor asks again then. A shorter
            # wait is polled in the run, as a busy scene is.
            until = datetime.now(UTC) + timedelta(seconds=claim.wait_s)
            return SceneOutcome(scene_id, "waiting", "", claim.attempt, until.isoformat())
        raise SceneBusy(scene_id, claim)
    job = claim.job
    try:
        with _LeaseKeeper(state, job, me, lease_s()):
            if "chain" in job.payload:
                return _chain_outcome(state, scene_id, job, me, visuals, media, scratch, engines)
            hit = _process(state, job, visuals, media, scratch)
    except (StateError, SceneRefused):
        # A lost lease or a broken invariant: not this attempt's fault, the step retries; a
        # refusal already failed the job for good, with the provider's words.
        raise
    except Exception as exc:
        # The job records it; another attempt while any are left (the jobs row counts them).
        after = state.fail_job(job, f"{type(exc).__name__}: {exc}"[:2000], True)
        if after == "queued":
            raise SceneAttemptFailed(
                f"scene {scene_id}: attempt {job.attempt}/{job.max_attempts} failed: {exc}"
            ) from exc
        return SceneOutcome(scene_id, "failed", me, job.attempt)
    except BaseException:
        # Stopped (SIGTERM, Ctrl-C): give the job back now rather than after its lease.
        with contextlib.suppress(Exception):
            state.fail_job(job, "stopped while making the clip", True)
        raise
    return SceneOutcome(scene_id, "cache_hit" if hit else "generated", me, job.attempt)


def _chain_outcome(
    state: StateStore,
    scene_id: int,
    job: Job,
    me: str,
    visuals: VisualsResource,
    media: MediaStore,
    scratch: Path,
    engines: SceneEngines | None,
) -> SceneOutcome:
    """A chain job: waits and rejections are outcomes, a refusal fails the job for good, any
    other exception is the attempt's failure (the caller's handling)."""
    if engines is None:
        raise RuntimeError(f"scene {scene_id}: its job names a visuals chain, and no engines")
    try:
        hit = _process_chain(state, job, me, engines, media, scratch)
    except NotYet as wait:
        return _deferred(state, scene_id, job, wait.until, str(wait))
    except BudgetExhausted as exc:
        tomorrow = datetime.now(UTC).date() + timedelta(days=1)
        midnight = datetime.combine(tomorrow, datetime.min.time(), UTC)
        return _deferred(state, scene_id, job, midnight, str(exc))
    except LockBusy as busy:
        # A killed holder's visuals lock: its paid call may still be answered until the lock's
        # lease ends, so the scene waits until then.
        return _deferred(state, scene_id, job, busy.until, str(busy))
    except (PaidCallTransient, StockUnavailable) as exc:
        until = datetime.now(UTC) + timedelta(seconds=scene_retry_s())
        return _deferred(state, scene_id, job, until, f"{type(exc).__name__}: {exc}")
    except NoPicture as none:
        state.reject_scene_job(job, none.reasons)
        return SceneOutcome(scene_id, "rejected", me, job.attempt)
    except (PaidCallRefused, StockRefused) as exc:
        state.fail_job(job, f"{type(exc).__name__}: {exc}"[:2000], False)
        raise SceneRefused(f"scene {scene_id}: {exc}") from exc
    return SceneOutcome(scene_id, "cache_hit" if hit else "generated", me, job.attempt)


def _deferred(
    state: StateStore, scene_id: int, job: Job, until: datetime | None, reason: str
) -> SceneOutcome:
    when = until or datetime.now(UTC) + timedelta(seconds=scene_retry_s())
    after = state.defer_scene_job(job, when, reason)
    return SceneOutcome(scene_id, "waiting", job.worker_id, job.attempt, after.isoformat())


def _process_chain(
    state: StateStore,
    job: Job,
    me: str,
    engines: SceneEngines,
    media: MediaStore,
    scratch: Path,
) -> bool:
    """The picture of a chain job, under the scene's visuals lock (its paid calls' fence);
    True on a cache hit."""
    request = SceneRequest.of(job.payload)
    cached = cached_clip(state, media, request.scene_hash, job)
    if cached is not None:
        state.complete_scene_job(
            job, cached.uri, cached.content_sha256, True, CACHE_TTL_S, cached.detail
        )
        return True
    slug = str(job.payload["chain"]["dimension"])
    row = state.get_dimension(slug)
    if row is None:
        raise NotFound("scene_clip", f"dimension {slug!r} is not in the registry", "MD006")
    dimension = dimension_from_json(row.config)
    out = scratch / f"{request.scene_hash}.{os.getpid()}.mp4"
    try:
        with _paying(state, slug, request, me) as fenced:
            ctx = CallContext(fenced, dimension, _checkpoint(fenced))
            with spent("scene clips"):
                picture = make_picture(
                    request, out, engines=engines, dimension=dimension, ctx=ctx, store=media
                )
        stored = media.put_file(picture.path, ".mp4", registry=state)
        name_stored(
            state,
            media,
            lambda: state.complete_scene_job(
                job, stored.uri, stored.sha256, False, CACHE_TTL_S, picture.detail
            ),
            [(picture.path, ".mp4")],
        )
    finally:  # a failed or stopped generation leaves no partial clip behind
        out.unlink(missing_ok=True)
    return False


def _paying(
    state: StateStore, slug: str, request: SceneRequest, me: str
) -> AbstractContextManager[StateStore]:
    """The scene's visuals lock, the fence of its paid calls, where its chain has an engine
    that pays (every judged one); a procedural chain pays nothing and takes none."""
    if any(engine in JUDGED for engine in request.engines):
        return held_named_lock(state, visuals_lock_name(slug, request.scene_hash), me)
    return contextlib.nullcontext(state)


def _checkpoint(fenced: StateStore) -> Callable[[], None]:
    """Refuses a paid call once the visuals lock is known lost (nothing without a fence)."""
    fence = fenced.fence
    return fence.check if fence is not None else _nothing


def _nothing() -> None:
    return None


def _process(
    state: StateStore,
    job: Job,
    visuals: VisualsResource,
    media: MediaStore,
    scratch: Path,
) -> bool:
    """Makes (or finds) the clip for one claimed job; returns True on a cache hit."""
    payload = job.payload
    scene_hash = payload["scene_hash"]
    cached = cached_clip(state, media, scene_hash, job)
    if cached is not None:
        # Cache entry, scene ready and job done commit together, under the job's lease.
        state.complete_scene_job(job, cached.uri, cached.content_sha256, True, CACHE_TTL_S)
        return True
    out = scratch / f"{scene_hash}.{os.getpid()}.mp4"
    try:
        with spent("scene clips"):
            visuals.generate(
                scene_hash,
                payload["prompt"],
                payload["palette"],
                float(payload["duration_s"]),
                out,
                engine=payload.get("engine"),
            )
        stored = media.put_file(out, ".mp4", registry=state)
        # The clip stays on disk until recorded: housekeeping may collect the stored copy
        # put_file found, and then it is stored again from here.
        name_stored(
            state,
            media,
            lambda: state.complete_scene_job(job, stored.uri, stored.sha256, False, CACHE_TTL_S),
            [(out, ".mp4")],
        )
    finally:  # a failed or stopped generation leaves no partial clip behind
        out.unlink(missing_ok=True)
    return False
