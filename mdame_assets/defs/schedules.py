"""The daily schedule: 10:00 UTC, today's partition for every active dimension, once; a
partition whose run fails is requested again by the content retry sensor
(mdame_assets.defs.content_retry), not by this schedule."""

import dagster as dg

from mdame_assets.jobs import CONTENT_JOB, partition_tags
from mdame_resources.state import StateStoreResource
from mdame_runtime.partition_keys import partition_key


@dg.schedule(
    job_name=CONTENT_JOB,  # built with the content retry sensor, as the location loads
    cron_schedule="0 10 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="10:00 UTC daily: content_job for today's partition of every active dimension, "
    "once (run_key daily:<partition>). A failed run is requested again by content_retry_sensor, "
    "not by this schedule.",
)
def daily_content_schedule(context: dg.ScheduleEvaluationContext, state: StateStoreResource):
    day = context.scheduled_execution_time.date()
    active = [d.slug for d in state.get_client().list_dimensions() if d.active]
    if not active:
        return dg.SkipReason("no active dimensions")
    return [
        dg.RunRequest(
            run_key=f"daily:{key}",
            partition_key=key,
            tags=partition_tags(key),
        )
        for key in (str(partition_key(day, slug)) for slug in active)
    ]
