"""`mdame backfill`: a range of days for one dimension, run partition by partition, here.

Why not `dagster asset materialize --partition-range`: Dagster accepts a range from the CLI only
when every selected asset has `BackfillPolicy.single_run()`, i.e. one run over the whole range.
Our steps work one partition at a time (each holds its own dimension's fenced lock and reads
`context.partition_key`), so a single-run range does not fit them. This command runs one
partition after the other instead, oldest first, each as the jobs the schedule and hop sensors
launch (or, with a selection, as `dagster asset materialize --partition` would), recorded in
the Dagster instance so the runs show up in the UI. It needs no daemon. For a backfill that the
daemon runs (queued, one run per dimension at a time), launch it from the UI (`make ui`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import date, timedelta

import dagster as dg
from dagster._core.errors import DagsterExecutionInterruptedError

from mdame_assets import gpu, orchestrator
from mdame_assets.jobs import CONTENT_GROUP
from mdame_cli.interrupts import (
    Interrupted,
    stop_exit_code,
    stop_on_signals,
    stop_signal_name,
)
from mdame_cli.runs import Outcome, run_in_order, run_partition
from mdame_core.state import StateStore
from mdame_pipeline.dimension_registry import sync_registry
from mdame_runtime.partition_keys import DIMENSION_PARTITION, partition_key

MAX_DAYS = 366  # a typo in a year should not queue a decade of runs


class BackfillError(ValueError):
    """The request is wrong (dates, dimension, selection); the message says which."""


def days_between(first: date, last: date) -> list[date]:
    if last < first:
        raise BackfillError(f"--to {last} is before --from {first}")
    count = (last - first).days + 1
    if count > MAX_DAYS:
        raise BackfillError(f"{count} days asked; at most {MAX_DAYS} at once")
    return [first + timedelta(days=n) for n in range(count)]


@dataclass(frozen=True)
class Phase:
    """One in-process run per partition: a code location's definitions and the asset keys."""

    defs: dg.Definitions
    keys: tuple[dg.AssetKey, ...]


def _materializable(defs: dg.Definitions) -> set[dg.AssetKey]:
    graph = defs.resolve_asset_graph()
    return {k for k in graph.get_all_asset_keys() if graph.get(k).is_materializable}


def plan_phases(selection: str) -> list[Phase]:
    """The selected assets in the order the pipeline hands over: the content stages, the GPU
    location's scene clips, then the publishing stages. The selection is resolved on the
    orchestrator's graph, which holds the whole lineage (scene_clips as a spec)."""
    here_defs, gpu_defs = orchestrator.defs(), gpu.defs()
    graph = here_defs.resolve_asset_graph()
    try:
        selected = dg.AssetSelection.from_string(selection).resolve(graph)
    except Exception as exc:  # Dagster's parser errors have no common public base
        raise BackfillError(f"--select {selection!r}: {str(exc).splitlines()[0]}") from None
    here = selected & _materializable(here_defs)
    content = {k for k in here if graph.get(k).group_name == CONTENT_GROUP}
    phases = [
        Phase(here_defs, tuple(sorted(content))),
        Phase(gpu_defs, tuple(sorted(selected & _materializable(gpu_defs)))),
        Phase(here_defs, tuple(sorted(here - content))),
    ]
    phases = [p for p in phases if p.keys]
    if not phases:
        raise BackfillError(f"--select {selection!r} selects no asset of either code location")
    return phases


def run_selection(
    instance: dg.DagsterInstance, key: str, phases: list[Phase], state: StateStore
) -> Outcome:
    """One partition of the selected assets (with their checks), as the jobs' runs are tagged
    and recorded; stops at the first phase that fails."""
    runs = [(p.defs.resolve_implicit_global_asset_job_def(), list(p.keys)) for p in phases]
    return run_in_order(instance, key, runs, state, "backfill")


def backfill(dimension: str, first: date, last: date, selection: str = "") -> int:
    """Exit status 0 when every partition succeeded; SIGTERM and Ctrl-C stop it (128+N)."""
    with stop_on_signals():
        try:
            with dg.DagsterInstance.get() as instance:  # as demo.main: entered and disposed
                return _backfill(instance, dimension, first, last, selection)
        except (Interrupted, DagsterExecutionInterruptedError):
            print(f"[backfill] stopped by {stop_signal_name()}", file=sys.stderr)
            return stop_exit_code()


def _backfill(
    instance: dg.DagsterInstance, dimension: str, first: date, last: date, selection: str
) -> int:
    days = days_between(first, last)
    phases = plan_phases(selection) if selection else []
    state = StateStore()
    try:
        # The registry sensor runs only with the daemon: sync here so the dimension is a
        # partition (and its YAML current) even when no `make ui` ran since it was added.
        with StateStore(role="admin") as admin:  # registering dimensions is the operator's
            report = sync_registry(admin)
        if dimension not in report.active:
            raise BackfillError(
                f"dimension {dimension!r} is not active (active: {', '.join(report.active)})"
            )
        known = set(instance.get_dynamic_partitions(DIMENSION_PARTITION))
        if dimension not in known:
            instance.add_dynamic_partitions(DIMENSION_PARTITION, [dimension])
        what = selection or "the whole graph"
        outcomes = []
        for day in days:
            key = str(partition_key(day, dimension))
            print(f"[backfill] {key}: {what}", file=sys.stderr)
            if phases:
                outcome = run_selection(instance, key, phases, state)
            else:
                outcome = run_partition(instance, key, state)
            outcomes.append(outcome)
            status = "ok" if outcome.ok else f"FAILED: {outcome.error}"
            print(f"{key}  {status}  {outcome.seconds:.1f}s")
    finally:
        state.close()
    failed = [o.partition_key for o in outcomes if not o.ok]
    print(f"{len(outcomes) - len(failed)}/{len(outcomes)} partitions succeeded")
    return 1 if failed else 0
