"""The daily analytics read: 23:00 UTC, today's partition of every active dimension."""

import dagster as dg

from mdame_assets.defs.analytics.assets import video_stats
from mdame_assets.jobs import AssetJob, partition_tags, transient_retry
from mdame_resources.state import StateStoreResource
from mdame_runtime.partition_keys import partition_key

ANALYTICS_JOB = "analytics_job"


def analytics_job() -> AssetJob:
    """Built as the location loads: its retry policy is a setting."""
    return dg.define_asset_job(
        ANALYTICS_JOB,
        selection=dg.AssetSelection.assets(video_stats),
        op_retry_policy=transient_retry(),
        description="Each published video's views, likes and comments of the day.",
    )


@dg.schedule(
    job_name=ANALYTICS_JOB,
    cron_schedule="0 23 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="23:00 UTC daily: analytics_job (video_stats) for today's partition of every "
    "active dimension, after the day's videos went out and before Sunday's weekly report.",
)
def daily_analytics_schedule(context: dg.ScheduleEvaluationContext, state: StateStoreResource):
    # Late in the day, after the day's videos went out, and before Sunday's weekly report.
    day = context.scheduled_execution_time.date()
    active = [d.slug for d in state.get_client().list_dimensions() if d.active]
    if not active:
        return dg.SkipReason("no active dimensions")
    keys = [str(partition_key(day, slug)) for slug in active]
    return [
        dg.RunRequest(run_key=f"analytics:{key}", partition_key=key, tags=partition_tags(key))
        for key in keys
    ]


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(jobs=[analytics_job()], schedules=[daily_analytics_schedule])
