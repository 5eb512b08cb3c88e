"""Orchestrator: resumes a partition once its clips are ready, or once a halted script's voice
backoff has expired (mdame_assets.defs.hops decides)."""

import dagster as dg

from mdame_assets.defs.hops import HOP_SENSOR_INTERVAL_S, awaiting_publishing, hop_sensor_result
from mdame_assets.jobs import publishing_job
from mdame_resources.state import StateStoreResource


@dg.sensor(
    job=publishing_job,
    minimum_interval_seconds=HOP_SENSOR_INTERVAL_S,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Requests publishing_job (voice, render, publication) for each partition with "
    "scripts whose clips are ready and are not yet published, or whose halted voice's backoff "
    "ran out; a run that failed or moved nothing is retried after the retry window's backoff. "
    f"Looks every {HOP_SENSOR_INTERVAL_S} s (MDAME_HOP_SENSOR_INTERVAL_S).",
)
def publishing_sensor(
    context: dg.SensorEvaluationContext, state: StateStoreResource
) -> dg.SensorResult:
    client = state.get_client()
    work = client.partitions_with_scripts_in(awaiting_publishing(client))
    # A halted script whose voice backoff has expired: a run of the partition retries voice.
    waiting = {(w.partition_date, w.dimension_slug) for w in work}
    work += [
        due
        for due in client.partitions_with_voice_retry_due()
        if (due.partition_date, due.dimension_slug) not in waiting
    ]
    return hop_sensor_result(context, publishing_job.name, "publish", work)
