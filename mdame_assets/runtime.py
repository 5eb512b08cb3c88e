"""What every stage does around its work: the pipeline lock as a fence, the run record, JSON logs.

A stage runs as `with pipeline_step(context, state, "scripts") as step:`. It takes the
dimension's pipeline lock once, without waiting: the run queue already allows one run per
dimension at a time (dagster.yaml), so a busy lock means a duplicate launch or a dead run's
lease, and the step fails with LockBusy for the job's RetryPolicy to try again later.

The lock is the fence: `step.state` is a fenced view of the state store, so every write carries
the lock's token and the database refuses it once the lock moved on. A heartbeat thread renews
the lease; when a renewal is refused, or cannot get through before the lease runs out, the fence
is lost and the step makes no further call or side effect (`step.checkpoint()` before each one).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import dagster as dg

from mdame_assets.partitions import PartitionRef
from mdame_core.logs import log_event
from mdame_core.settings import seconds_setting
from mdame_core.state import Fence, LeaseLost, StateStore, WorkUnit
from mdame_domain.adaptive import TunedParams
from mdame_domain.dimensions import DimensionConfig, dimension_from_json
from mdame_domain.media_store import MediaProblem
from mdame_resources.providers.budget import CallContext

# Read per use so a harness can shorten it (a SIGKILLed run's lock must expire before the next
# run takes over); production keeps the default.
LOCK_TTL_ENV = "MDAME_LOCK_TTL_S"
# After a failed renewal, try again this often until the lease would run out.
RENEW_RETRY_S = 0.5


def lock_ttl_s() -> int:
    return max(1, round(seconds_setting(LOCK_TTL_ENV, 120)))


class LockBusy(Exception):
    """Another live holder has the dimension's lock: transient, retried by the RetryPolicy."""


@dataclass
class Step:
    partition: PartitionRef
    execution_id: str
    stage: str
    state: StateStore  # fenced while the step holds the lock; plain for read-only steps
    dimension: DimensionConfig
    dimension_id: int
    # The tuned parameters this day reads: the dimension's current
    # parameter set as of the partition's day over its YAML values. Stages read the hook
    # threshold, videos per day, trend volume gate and category weights from here.
    params: TunedParams

    def units(self, kind: str, **filters: Any) -> list[WorkUnit]:
        """This partition's trends, topics or scripts (by day and dimension), oldest first."""
        return self.state.list_work_units(
            kind, dimension_id=self.dimension_id, partition_date=self.partition.day, **filters
        )

    def scripts_in(self, *states: str) -> list[WorkUnit]:
        """This partition's scripts in any of `states`, oldest first."""
        return [s for s in self.units("script") if s.state in states]

    def paid_context(self) -> CallContext:
        """What a paid provider needs from the step: the fenced store (every ledger write
        carries the lock's token), the dimension, and the fence check before each call."""
        return CallContext(self.state, self.dimension, self.checkpoint)

    def checkpoint(self) -> None:
        """Raises FenceLost when the lock is known lost: call before every side effect."""
        if self.state.fence is not None:
            self.state.fence.check()

    def log(self, status: str, **fields: Any) -> None:
        log_event(self.execution_id, self.partition.dimension, self.stage, status, **fields)

    def alert(self, cause: str, reason: str) -> None:
        """Tells the operator: once per dimension, cause and UTC day; never
        raises, so the step goes on exactly as it would have without it."""
        from mdame_resources.alerts import raise_environment_alert

        outcome = raise_environment_alert(self.state, self.partition.dimension, cause, reason)
        self.log("alert", cause=cause, outcome=outcome)


def dimension_lock_name(dimension_slug: str) -> str:
    """The same name as the database's mdame.dimension_lock_name, which the fence checks."""
    return f"pipeline:{dimension_slug}"


def acquire_fence(state: StateStore, dimension_slug: str, holder: str) -> Fence:
    """The dimension's pipeline lock as a Fence, or LockBusy while a live holder has it."""
    name, ttl = dimension_lock_name(dimension_slug), lock_ttl_s()
    started = time.monotonic()
    token = state.acquire_pipeline_lock(name, holder, ttl)
    if token is None:
        lock = state.get_lock(name)
        raise LockBusy(
            f"pipeline lock {name!r} is held by {lock.holder if lock else '?'} "
            f"until {lock.expires_at if lock else '?'}; the run queue allows one run per "
            "dimension, so this is a duplicate launch or a dead run's lease: retried later"
        )
    fence = Fence(name, holder, token, ttl)
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
                self.state.heartbeat_pipeline_lock(fence.lock_name, fence.holder, fence.token)
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
    fence = acquire_fence(state, dimension_slug, holder)
    try:
        with _Heartbeat(state, fence):
            yield state.fenced(fence)
    finally:
        # A lost lock needs no release: another holder has it, or it expired.
        if fence.lost is None:
            with contextlib.suppress(LeaseLost):
                state.release_pipeline_lock(fence.lock_name, fence.holder, fence.token)


def _dimension(
    state: StateStore, partition: PartitionRef
) -> tuple[DimensionConfig, int, TunedParams]:
    row = state.get_dimension(partition.dimension)
    if row is None:
        raise dg.Failure(
            f"dimension {partition.dimension!r} is not in the registry; add dimensions/"
            f"{partition.dimension}.yaml and register it with `mdame dimensions sync`",
            allow_retries=False,
        )
    config = dimension_from_json(row.config)
    current = state.current_param_set(partition.dimension, partition.day)
    if current is None:
        return config, row.id, config.tuned(None)
    return config, row.id, config.tuned(current.params, current.version)


@contextmanager
def pipeline_step(
    context: dg.AssetExecutionContext | dg.OpExecutionContext, state: StateStore, stage: str
) -> Iterator[Step]:
    """A stage's step under the dimension's lock: an asset's, or an op's of a graph-backed
    asset (scene_clips) in a partitioned run; both know the run and its partition."""
    partition = PartitionRef.of(context)
    execution_id = context.run.run_id
    dimension, dimension_id, params = _dimension(state, partition)
    with held_lock(state, partition.dimension, f"{execution_id}:{stage}") as fenced:
        step = Step(partition, execution_id, stage, fenced, dimension, dimension_id, params)
        token = fenced.lock_token
        fenced.start_pipeline_run(execution_id, partition.dimension, str(partition.key), token)
        step.log("started", lock_token=token)
        started = time.monotonic()
        try:
            yield step
            step.checkpoint()  # the work is only done if the lock held to the end
            step.log("succeeded", seconds=round(time.monotonic() - started, 3))
        except MediaProblem as exc:
            # A stored file vanished or changed: retrying cannot bring it back.
            step.log("failed", error=str(exc)[:500], seconds=round(time.monotonic() - started, 3))
            raise dg.Failure(f"{stage}: {exc}", allow_retries=False) from exc
        except BaseException as exc:
            step.log("failed", error=str(exc)[:500], seconds=round(time.monotonic() - started, 3))
            raise


def read_step(
    context: dg.AssetCheckExecutionContext | dg.AssetExecutionContext, state: StateStore, stage: str
) -> Step:
    """A Step for read-only work (asset checks): no lock, no run record."""
    partition = PartitionRef.of(context)
    dimension, dimension_id, params = _dimension(state, partition)
    run_id = context.op_execution_context.run_id
    return Step(partition, run_id, stage, state, dimension, dimension_id, params)
