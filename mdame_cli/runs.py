"""Running one partition through the whole graph, in this process, as the sensors would:
content_job, then the GPU location's scene_clips_job, then publishing_job. `mdame demo` and
the crash harness use it; each job's run is recorded in the given Dagster instance."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import dagster as dg

from mdame_assets import gpu, orchestrator
from mdame_assets.jobs import CONTENT_GROUP, PUBLISHING_GROUP, VISUALS_GROUP, partition_tags
from mdame_cli.interrupts import raise_if_stopping
from mdame_core.state import StateStore
from mdame_domain import timing
from mdame_resources.state import StateStoreResource
from mdame_runtime.liveness import process_tags
from mdame_runtime.run_outcomes import record_run_outcome


@dataclass
class Outcome:
    partition_key: str
    ok: bool
    seconds: float
    stage_seconds: dict[str, float]
    error: str = ""
    # Where the partition's time went: seconds per category of mdame_domain.timing.
    spent: dict[str, float] = field(default_factory=dict)


# Step-level detail stays in the Dagster UI and the JSON log; the terminal gets warnings only.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
PIPELINE_GROUPS = {CONTENT_GROUP, VISUALS_GROUP, PUBLISHING_GROUP}
# Each job with its location's loader (`defs()` builds the definitions from the settings of the
# moment it is called).
JOBS = (
    (orchestrator.defs, "content_job"),
    (gpu.defs, "scene_clips_job"),
    (orchestrator.defs, "publishing_job"),
)


def _stage_seconds(result: dg.ExecuteInProcessResult) -> dict[str, float]:
    return {
        event.step_key: round(event.step_success_data.duration_ms / 1000, 2)
        for event in result.all_events
        if event.is_step_success and event.step_key
    }


def _first_error(result: dg.ExecuteInProcessResult) -> str:
    for event in result.all_events:
        if event.is_step_failure:
            error = event.step_failure_data.error
            while error is not None and error.cause is not None:
                error = error.cause  # the user code's exception, not Dagster's wrapper
            return (error.message if error else "step failed").strip().splitlines()[0][:300]
    return "run failed"


def whole_graph(*, without: tuple[str, ...] = ()) -> list:
    """Every asset and asset check of both code locations (minus the named assets), for
    materializing a partition in one in-process run, as tests and tools do."""
    items: list = []
    for defs in (orchestrator.defs(), gpu.defs()):
        items += [
            a
            for a in defs.assets or ()
            if isinstance(a, dg.AssetsDefinition)
            and a.key.to_user_string() not in without
            # The operations assets (analytics, weekly reports) are not a partition's stages.
            and set(a.group_names_by_key.values()) <= PIPELINE_GROUPS
        ]
        items += list(defs.asset_checks or ())
    return items


def run_partition(
    instance: dg.DagsterInstance, key: str, state: StateStore | None = None
) -> Outcome:
    """Each job's run is tagged with this process (the liveness sweep fails it if the process
    dies) and, with no daemon and so no run status sensor here, finishes its own
    pipeline_runs row. A stop signal ends the run (failed) and raises `Interrupted` here."""
    # The same client the steps' StateStoreResource() uses (settings' URL, cached per process).
    state = state or StateStoreResource().get_client()
    runs = [(load().resolve_job_def(job_name), None) for load, job_name in JOBS]
    before = timing.totals()
    outcome = run_in_order(instance, key, runs, state, "run_partition")
    outcome.spent = timing.since(before)
    return outcome


def run_in_order(
    instance: dg.DagsterInstance,
    key: str,
    runs: Sequence[tuple[dg.JobDefinition, list[dg.AssetKey] | None]],
    state: StateStore,
    source: str,
) -> Outcome:
    """One partition through `runs` (a job, and the assets to select of it or None for all), in
    order, each run tagged and its outcome recorded; stops at the first that fails."""
    started, stages = time.monotonic(), {}
    for job, assets in runs:
        raise_if_stopping()
        result = job.execute_in_process(
            partition_key=key,
            asset_selection=assets,
            instance=instance,
            tags={**partition_tags(key), **process_tags()},
            raise_on_error=False,
            run_config=QUIET,
        )
        run = instance.get_run_by_id(result.run_id)
        if run is not None:
            record_run_outcome(state, run.run_id, run.status, source, job=run.job_name)
        raise_if_stopping()
        stages.update(_stage_seconds(result))
        if not result.success:
            return Outcome(key, False, time.monotonic() - started, stages, _first_error(result))
    return Outcome(key, True, time.monotonic() - started, stages)
