"""GPU location: a run of scene_clips for every partition whose scripts await their clips.
The sensor and its job are built as the location loads: the sensor's interval and the job's
executor and retry policy are settings."""

import dagster as dg

from mdame_assets.defs.hops import AWAITING_CLIPS, hop_sensor, hop_sensor_result
from mdame_assets.jobs import SCENE_CLIPS_JOB, scene_clips_job
from mdame_resources.state import StateStoreResource
from mdame_runtime.executors import GPU_POOL, ensure_pool_limit


def make_scene_jobs_sensor() -> dg.SensorDefinition:
    @hop_sensor(
        "scene_jobs_sensor",
        SCENE_CLIPS_JOB,
        "Requests scene_clips_job for each partition with planned scripts awaiting their clips; "
        "a run that failed or moved nothing is retried after the retry window's backoff.",
    )
    def scene_jobs_sensor(
        context: dg.SensorEvaluationContext, state: StateStoreResource
    ) -> dg.SensorResult:
        ensure_pool_limit(context.instance, GPU_POOL)
        work = state.get_client().partitions_with_scripts_in(AWAITING_CLIPS)
        return hop_sensor_result(context, SCENE_CLIPS_JOB, "clips", work)

    return scene_jobs_sensor


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(jobs=[scene_clips_job()], sensors=[make_scene_jobs_sensor()])
