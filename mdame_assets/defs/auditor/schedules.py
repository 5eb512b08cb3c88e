"""The weekly report: Sundays at 23:30 UTC, the week ending that day, every active dimension.

The job takes the Strategic Auditor and every weekly asset downstream of it (the Adaptive
Engine), so the tuning runs after, and from, the week's report.
"""

import dagster as dg

from mdame_assets.defs.auditor.assets import strategic_audit
from mdame_assets.jobs import AssetJob, partition_tags, transient_retry
from mdame_domain.audit import Week
from mdame_resources.state import StateStoreResource
from mdame_runtime.partition_keys import week_partition_key

WEEKLY_OPERATIONS_JOB = "weekly_operations_job"


def weekly_operations_job() -> AssetJob:
    """Built as the location loads: its retry policy is a setting."""
    return dg.define_asset_job(
        WEEKLY_OPERATIONS_JOB,
        selection=dg.AssetSelection.assets(strategic_audit).downstream(),
        op_retry_policy=transient_retry(),
        description="The Strategic Auditor's weekly report, then what tunes from it.",
    )


@dg.schedule(
    job_name=WEEKLY_OPERATIONS_JOB,
    cron_schedule="30 23 * * 0",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Sundays 23:30 UTC, after that day's analytics read: weekly_operations_job (the "
    "Strategic Auditor's report, then the Adaptive Engine's tuning) for the week ending that "
    "day, every active dimension.",
)
def weekly_audit_schedule(context: dg.ScheduleEvaluationContext, state: StateStoreResource):
    # Half an hour after Sunday's analytics read: the week's own partition (end_offset=1).
    week = Week.of(context.scheduled_execution_time.date())
    active = [d.slug for d in state.get_client().list_dimensions() if d.active]
    if not active:
        return dg.SkipReason("no active dimensions")
    keys = [str(week_partition_key(week.start, slug)) for slug in active]
    return [
        dg.RunRequest(run_key=f"audit:{key}", partition_key=key, tags=partition_tags(key))
        for key in keys
    ]


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(jobs=[weekly_operations_job()], schedules=[weekly_audit_schedule])
