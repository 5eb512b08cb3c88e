"""Orchestrator: resumes a partition once its clips are ready, or once a halted script's voice
backoff has expired (mdame_assets.defs.hops decides). The sensor and its job are built as the
location loads: the sensor's interval and the job's retry policy are settings."""

import dagster as dg

from mdame_assets.defs.hops import awaiting_publishing, hop_sensor, hop_sensor_result
from mdame_assets.jobs import PUBLISHING_JOB, publishing_job
from mdame_resources.state import StateStoreResource


def publishing_work(
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
    return hop_sensor_result(context, PUBLISHING_JOB, "publish", work)


def make_publishing_sensor() -> dg.SensorDefinition:
    return hop_sensor(
        "publishing_sensor",
        PUBLISHING_JOB,
        "Requests publishing_job (voice, render, publication) for each partition with scripts "
        "whose clips are ready and are not yet published, or whose halted voice's backoff ran "
        "out; a run that failed or moved nothing is retried after the retry window's backoff.",
    )(publishing_work)


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(jobs=[publishing_job()], sensors=[make_publishing_sensor()])
