"""The dimension's pipeline lock as a fence: taken without waiting, its lease renewed by a
heartbeat thread, every write under it carrying the holder's secret (the database refuses a
write once the lock moved on, and one whose secret is not the holder's). Pipeline steps and the
operator's recovery pass hold it the same way."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from mdame_core import settings
from mdame_core.state import Fence, LeaseLost, StateStore

# Read per use so a harness can shorten it (a SIGKILLed run's lock must expire before the next
# run takes over); production keeps the default.
LOCK_TTL_ENV = "MDAME_LOCK_TTL_S"
# After a failed renewal, try again this often until the lease would run out.
RENEW_RETRY_S = 0.5


def lock_ttl_s() -> int:
    return max(1, round(settings.get(LOCK_TTL_ENV)))


class LockBusy(Exception):
    """Another live holder has the lock: transient, retried by the RetryPolicy. `until`: when
    its lease ends, when known."""

    def __init__(self, message: str, until: datetime | None = None) -> None:
        super().__init__(message)
        self.until = until


def dimension_lock_name(dimension_slug: str) -> str:
    """The same name as the database's mdame.dimension_lock_name, which the fence checks."""
    return f"pipeline:{dimension_slug}"


def visuals_lock_name(dimension_slug: str, scene_hash: str) -> str:
    """A scene's visuals lock, held by the scene step that pays for its pictures and
    judgements; the database's paid-call fence (mdame._paid_fence) accepts it for the
    dimension's paid calls."""
    return f"{dimension_lock_name(dimension_slug)}/visuals:{scene_hash}"


def acquire_fence(state: StateStore, dimension_slug: str, holder: str) -> Fence:
    """The dimension's pipeline lock as a Fence, or LockBusy while a live holder has it."""
    return acquire_named_fence(state, dimension_lock_name(dimension_slug), holder)


def acquire_named_fence(state: StateStore, name: str, holder: str) -> Fence:
    """The lock `name` as a Fence, or LockBusy while a live holder has it."""
    ttl = lock_ttl_s()
    started = time.monotonic()
    grant = state.acquire_pipeline_lock(name, holder, ttl)
    if grant is None:
        lock = state.get_lock(name)
        raise LockBusy(
            f"pipeline lock {name!r} is held by {lock.holder if lock else '?'} "
            f"until {lock.expires_at if lock else '?'}; the run queue allows one run per "
            "dimension, so this is a duplicate launch or a dead run's lease: retried later",
            lock.expires_at if lock else None,
        )
    fence = Fence(name, holder, grant, ttl)
    fence.renewed(started)
    return fence


class _Heartbeat(threading.Thread):
    """Renews the lease every quarter TTL. A refused renewal (taken over) loses the fence at
    once; a failed one (database unreachable) is retried until the lease would have run out."""

    def __init__(self, state: StateStore, fence: Fence) -> None:
        super().__init__(daemon=True, name=f"heartbeat:{fence.lock_name}")
        self.state, self.fence = state, fence
        self.stopped = threading.Event()

    def run(self) -> None:
        fence, wait = self.fence, self.fence.ttl_s / 4
        while not self.stopped.wait(wait):
            sent = time.monotonic()
            try:
                self.state.heartbeat_pipeline_lock(fence.lock_name, fence.holder, fence.secret)
            except LeaseLost as exc:
                fence.lose(f"renewal refused: {exc}")
                return
            except Exception as exc:  # noqa: BLE001 - unreachable for now: retry within the lease
                if fence.lost is not None:
                    fence.lose(f"could not renew: {type(exc).__name__}")
                    return
                wait = min(RENEW_RETRY_S, fence.ttl_s / 4)
                continue
            fence.renewed(sent)
            wait = fence.ttl_s / 4

    def __enter__(self) -> _Heartbeat:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.join(timeout=5)


@contextmanager
def held_lock(state: StateStore, dimension_slug: str, holder: str) -> Iterator[StateStore]:
    """The dimension's lock for the block, renewed by a heartbeat: yields the fenced store."""
    with held_named_lock(state, dimension_lock_name(dimension_slug), holder) as fenced:
        yield fenced


@contextmanager
def held_named_lock(state: StateStore, name: str, holder: str) -> Iterator[StateStore]:
    """The lock `name` for the block, renewed by a heartbeat: yields the fenced store."""
    fence = acquire_named_fence(state, name, holder)
    try:
        with _Heartbeat(state, fence):
            yield state.fenced(fence)
    finally:
        # A lost lock needs no release: another holder has it, or it expired.
        if fence.lost is None:
            with contextlib.suppress(LeaseLost):
                state.release_pipeline_lock(fence.lock_name, fence.holder, fence.secret)
