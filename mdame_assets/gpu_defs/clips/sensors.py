"""GPU location: a run of scene_clips for every partition whose scripts await their clips."""

import dagster as dg

from mdame_assets.defs.hops import AWAITING_CLIPS, HOP_SENSOR_INTERVAL_S, hop_sensor_result
from mdame_assets.jobs import scene_clips_job
from mdame_resources.state import StateStoreResource
from mdame_runtime.executors import GPU_POOL, ensure_pool_limit


@dg.sensor(
    job=scene_clips_job,
    minimum_interval_seconds=HOP_SENSOR_INTERVAL_S,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Requests scene_clips_job for each partition with planned scripts awaiting "
    "their clips; a run that failed or moved nothing is retried after the retry window's "
    f"backoff. Looks every {HOP_SENSOR_INTERVAL_S} s (MDAME_HOP_SENSOR_INTERVAL_S).",
)
def scene_jobs_sensor(
    context: dg.SensorEvaluationContext, state: StateStoreResource
) -> dg.SensorResult:
    ensure_pool_limit(context.instance, GPU_POOL)
    work = state.get_client().partitions_with_scripts_in(AWAITING_CLIPS)
    return hop_sensor_result(context, scene_clips_job.name, "clips", work)
