"""What every stage does around its work: the pipeline lock, the run record and JSON logs.

A stage runs as `with pipeline_step(context, state, "scripts") as step:`. It holds the
dimension's pipeline lock (a duplicate cron tick waits here, then finds the work done), records
the run under its execution_id (the Dagster run id) and logs started / succeeded / failed lines.
"""

from __future__ import annotations

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
from mdame_core.state import StateStore, WorkUnit
from mdame_domain.dimensions import DimensionConfig, dimension_from_json

# Read per use so a harness can shorten them (a SIGKILLed run's lock must expire before the
# next run takes over); production keeps the defaults.
LOCK_TTL_ENV, LOCK_WAIT_ENV = "MDAME_LOCK_TTL_S", "MDAME_LOCK_WAIT_S"


def lock_ttl_s() -> int:
    return max(1, round(seconds_setting(LOCK_TTL_ENV, 120)))


class LockUnavailable(dg.Failure):
    pass


@dataclass
class Step:
    partition: PartitionRef
    execution_id: str
    stage: str
    state: StateStore
    dimension: DimensionConfig
    dimension_id: int
    lock_token: int

    def units(self, kind: str, **filters: Any) -> list[WorkUnit]:
        """This partition's trends, topics or scripts (by day and dimension), oldest first."""
        return self.state.list_work_units(
            kind, dimension_id=self.dimension_id, partition_date=self.partition.day, **filters
        )

    def log(self, status: str, **fields: Any) -> None:
        log_event(self.execution_id, self.partition.dimension, self.stage, status, **fields)


def dimension_lock_name(dimension_slug: str) -> str:
    return f"pipeline:{dimension_slug}"


def acquire_dimension_lock(
    state: StateStore, dimension_slug: str, holder: str, wait_s: float | None = None
) -> int:
    """The dimension's pipeline lock (a fencing token), waiting up to MDAME_LOCK_WAIT_S for a
    live holder; a duplicate cron tick waits here, then finds the work already done."""
    name = dimension_lock_name(dimension_slug)
    wait_s = wait_s if wait_s is not None else seconds_setting(LOCK_WAIT_ENV, 600)
    deadline = time.monotonic() + wait_s
    while (token := state.acquire_pipeline_lock(name, holder, lock_ttl_s())) is None:
        if time.monotonic() >= deadline:
            raise LockUnavailable(
                f"pipeline lock {name!r} still held by another run after {wait_s}s"
            )
        time.sleep(0.5)
    return token


class _Heartbeat(threading.Thread):
    """Keeps the lock alive while a long step (a render) runs; stops on release."""

    def __init__(self, state: StateStore, name: str, holder: str, token: int) -> None:
        super().__init__(daemon=True, name=f"heartbeat:{name}")
        self.args = (name, holder, token)
        self.state = state
        self.stopped = threading.Event()
        self.lost: Exception | None = None

    def run(self) -> None:
        while not self.stopped.wait(lock_ttl_s() / 4):
            try:
                self.state.heartbeat_pipeline_lock(*self.args)
            except Exception as exc:  # noqa: BLE001 - recorded, the step fails on exit
                self.lost = exc
                return


@contextmanager
def pipeline_step(
    context: dg.AssetExecutionContext,
    state: StateStore,
    stage: str,
    lock_wait_s: float | None = None,
) -> Iterator[Step]:
    partition = PartitionRef.of(context)
    execution_id = context.run.run_id
    dimension_row = state.get_dimension(partition.dimension)
    if dimension_row is None:
        raise dg.Failure(
            f"dimension {partition.dimension!r} is not in the registry; add dimensions/"
            f"{partition.dimension}.yaml and let the registry sensor sync it"
        )
    lock_name = dimension_lock_name(partition.dimension)
    holder = f"{execution_id}:{stage}"
    token = acquire_dimension_lock(state, partition.dimension, holder, lock_wait_s)
    step = Step(
        partition,
        execution_id,
        stage,
        state,
        dimension_from_json(dimension_row.config),
        dimension_row.id,
        token,
    )
    heartbeat = _Heartbeat(state, lock_name, holder, token)
    heartbeat.start()
    state.start_pipeline_run(execution_id, partition.dimension, str(partition.key), token)
    step.log("started", lock_token=token)
    started = time.monotonic()
    try:
        yield step
        if heartbeat.lost is not None:
            raise dg.Failure(f"lost the pipeline lock during {stage}: {heartbeat.lost}")
        step.log("succeeded", seconds=round(time.monotonic() - started, 3))
    except BaseException as exc:
        step.log("failed", error=str(exc)[:500], seconds=round(time.monotonic() - started, 3))
        raise
    finally:
        heartbeat.stopped.set()
        heartbeat.join(timeout=5)
        state.release_pipeline_lock(lock_name, holder, token)


def read_step(
    context: dg.AssetCheckExecutionContext | dg.AssetExecutionContext, state: StateStore, stage: str
) -> Step:
    """A Step for read-only work (asset checks): no lock, no run record."""
    partition = PartitionRef.of(context)
    row = state.get_dimension(partition.dimension)
    if row is None:
        raise dg.Failure(f"dimension {partition.dimension!r} is not in the registry")
    return Step(
        partition,
        context.op_execution_context.run_id,
        stage,
        state,
        dimension_from_json(row.config),
        row.id,
        0,
    )
