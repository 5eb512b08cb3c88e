"""What every stage does around its work: the pipeline lock as a fence, the run record, JSON logs.

A stage runs as `with pipeline_step(context, state, "scripts") as step:`. It takes the
dimension's pipeline lock once, without waiting: the run queue already allows one run per
dimension at a time (dagster.yaml), so a busy lock means a duplicate launch or a dead run's
lease, and the step fails with LockBusy for the job's RetryPolicy to try again later.

The lock is the fence (mdame_pipeline.locks): `step.state` is a fenced view of the state
store, so every write carries the lock's token and the database refuses it once the lock moved
on. A heartbeat thread renews the lease; when a renewal is refused, or cannot get through before
the lease runs out, the fence is lost and the step makes no further call or side effect
(`step.checkpoint()` before each one).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import dagster as dg

from mdame_core.logs import log_event
from mdame_core.state import StateStore, WorkUnit
from mdame_domain.adaptive import TunedParams
from mdame_domain.dimensions import DimensionConfig, dimension_from_json
from mdame_domain.media_store import MediaProblem
from mdame_pipeline.locks import held_lock
from mdame_pipeline.work import advance
from mdame_resources.providers.budget import CallContext
from mdame_runtime.partition_keys import PartitionRef


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


def scripts_entering(step: Step, ready: str, in_progress: str) -> Iterator[WorkUnit]:
    """This partition's scripts for a stage: those at `ready` move to `in_progress`, and those
    already `in_progress` (a run that crashed mid-stage) are yielded again to be redone."""
    for script in step.units("script"):
        if script.state == ready:
            script = advance(step.state, script, in_progress)
        if script.state == in_progress:
            yield script


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


_holding: weakref.WeakSet[dg.DagsterInstance] = weakref.WeakSet()
_holding_lock = threading.Lock()


def hold_storage_connections(instance: dg.DagsterInstance) -> None:
    """Keep this process's connections to Dagster's storage open, once per instance.
    dagster_postgres opens a connection per storage call (SQLAlchemy's NullPool): about 600 for
    one partition's three runs, each a new PostgreSQL backend and its authentication. The
    webserver holds one per storage instead (`optimize_for_webserver`, which `dagster-webserver`
    calls); so do the run workers, Celery workers and step pods that run our steps, and
    `mdame demo`. No statement timeout is added; SQLite storage ignores it."""
    with _holding_lock:
        if instance in _holding:
            return
        _holding.add(instance)
    instance.optimize_for_webserver(statement_timeout=0, pool_recycle=3600, max_overflow=4)


@contextmanager
def pipeline_step(
    context: dg.AssetExecutionContext | dg.OpExecutionContext, state: StateStore, stage: str
) -> Iterator[Step]:
    """A stage's step under the dimension's lock: an asset's, or an op's of a graph-backed
    asset (scene_clips) in a partitioned run; both know the run and its partition."""
    hold_storage_connections(context.instance)
    partition = PartitionRef.of(context)
    execution_id = context.run.run_id
    dimension, dimension_id, params = _dimension(state, partition)
    with held_lock(state, partition.dimension, f"{execution_id}:{stage}") as fenced:
        step = Step(partition, execution_id, stage, fenced, dimension, dimension_id, params)
        fence = fenced.fence
        assert fence is not None
        fenced.start_pipeline_run(
            execution_id, partition.dimension, str(partition.key), fence.secret
        )
        step.log("started", lock_token=fence.token)
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
    hold_storage_connections(context.instance)
    partition = PartitionRef.of(context)
    dimension, dimension_id, params = _dimension(state, partition)
    run_id = context.op_execution_context.run_id
    return Step(partition, run_id, stage, state, dimension, dimension_id, params)
