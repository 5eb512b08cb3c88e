"""Orchestrator: run outcomes and liveness, for the runs of both code locations.

- Run status sensors write each ended run's outcome to its `mdame.pipeline_runs` row (every
  stage starts that row with the Dagster run id as execution id), for content_job and
  publishing_job here and scene_clips_job in the gpu location.
- The liveness sensor fails runs whose process died, frees their pool slots and locks, and
  finishes rows a missed sensor tick left 'running' (mdame_runtime.liveness.sweep); the gpu
  location has its own for the run workers its code server starts.
"""

from __future__ import annotations

import dagster as dg

from mdame_assets.liveness_sensor import make_liveness_sensor
from mdame_resources.state import StateStoreResource
from mdame_runtime.run_outcomes import record_run_outcome

ORCHESTRATOR, GPU = "orchestrator", "gpu"
MONITORED_JOBS = [
    dg.JobSelector(location_name=ORCHESTRATOR, job_name="content_job"),
    dg.JobSelector(location_name=ORCHESTRATOR, job_name="publishing_job"),
    dg.JobSelector(location_name=GPU, job_name="scene_clips_job"),
]
JOBS = ", ".join(job.job_name for job in MONITORED_JOBS)


def _record(context: dg.RunStatusSensorContext, state: StateStoreResource) -> dg.SkipReason:
    run = context.dagster_run
    done = record_run_outcome(
        state.get_client(), run.run_id, run.status, "run status sensor", job=run.job_name
    )
    return dg.SkipReason(
        f"run {run.run_id} ({run.job_name}) {run.status.value}: "
        + ("recorded" if done else "nothing to record")
    )


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    monitored_jobs=MONITORED_JOBS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=15,
    description=f"Records the outcome of each succeeded run of {JOBS} in its "
    "mdame.pipeline_runs row (never over a recorded failure or cancellation).",
)
def run_succeeded_sensor(context: dg.RunStatusSensorContext, state: StateStoreResource):
    return _record(context, state)


@dg.run_failure_sensor(
    monitored_jobs=MONITORED_JOBS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=15,
    description=f"Records the outcome of each failed run of {JOBS} in its "
    "mdame.pipeline_runs row (replacing a success recorded early).",
)
def run_failed_sensor(context: dg.RunFailureSensorContext, state: StateStoreResource):
    return _record(context, state)


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.CANCELED,
    monitored_jobs=MONITORED_JOBS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=15,
    description=f"Records the outcome of each canceled run of {JOBS} in its "
    "mdame.pipeline_runs row (replacing a success recorded early).",
)
def run_canceled_sensor(context: dg.RunStatusSensorContext, state: StateStoreResource):
    return _record(context, state)


liveness_sensor = make_liveness_sensor("liveness_sensor")


RUN_SENSORS = [run_succeeded_sensor, run_failed_sensor, run_canceled_sensor, liveness_sensor]
