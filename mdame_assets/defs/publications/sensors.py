"""Orchestrator: resumes a partition once its clips are ready (mdame_assets.defs.hops decides)."""

import dagster as dg

from mdame_assets.defs.hops import AWAITING_PUBLISHING, hop_sensor_result
from mdame_assets.jobs import publishing_job
from mdame_resources.state import StateStoreResource


@dg.sensor(
    job=publishing_job, minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING
)
def publishing_sensor(
    context: dg.SensorEvaluationContext, state: StateStoreResource
) -> dg.SensorResult:
    work = state.get_client().partitions_with_scripts_in(AWAITING_PUBLISHING)
    return hop_sensor_result(context, publishing_job.name, "publish", work)
