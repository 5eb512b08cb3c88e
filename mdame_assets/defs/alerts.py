"""Orchestrator: alerts that no single step raises.

- `run_failure_alert_sensor` tells the operator about a failed run of either code location
  (content_job, publishing_job, scene_clips_job), once per dimension and UTC day.
- `alert_sweep_sensor` delivers alerts whose delivery failed (a Telegram outage, a crash
  between recording and sending): mdame_resources.alerts.deliver_pending_alerts.

Both are separate from the run status sensors, so a notifier that is not configured never
stops run outcomes from being recorded.
"""

from __future__ import annotations

import dagster as dg

from mdame_assets.defs.run_sensors import MONITORED_JOBS
from mdame_assets.jobs import DIMENSION_TAG
from mdame_resources.alerts import deliver_pending_alerts, raise_alert
from mdame_resources.notify import NotifierResource
from mdame_resources.state import StateStoreResource


def run_failure_reason(context: dg.RunFailureSensorContext) -> str:
    run = context.dagster_run
    message = (context.failure_event.message or "").strip().splitlines()
    partition = run.tags.get("dagster/partition", "")
    where = f" for partition {partition}" if partition else ""
    first = f": {message[0][:300]}" if message else ""
    return f"{run.job_name} run {run.run_id}{where} failed{first}"


@dg.run_failure_sensor(
    monitored_jobs=MONITORED_JOBS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=15,
    description="Tells the operator (a run_failure alert, once per dimension and UTC day) of a "
    "failed content_job, publishing_job or scene_clips_job run, naming the run, its partition "
    "and the failure's first line.",
)
def run_failure_alert_sensor(
    context: dg.RunFailureSensorContext, state: StateStoreResource, notifier: NotifierResource
) -> dg.SkipReason:
    run = context.dagster_run
    dimension = run.tags.get(DIMENSION_TAG) or None
    outcome = raise_alert(
        state.get_client(), notifier, dimension, "run_failure", run_failure_reason(context)
    )
    return dg.SkipReason(f"run {run.run_id} failed: alert {outcome}")


@dg.sensor(
    minimum_interval_seconds=120,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Every 2 minutes: sends the alerts still undelivered (a Telegram outage, a crash "
    "between recording and sending), each under a claim so no two senders send one. A count "
    "of undelivered that stays up means the notifier refuses: see the warning it logs.",
)
def alert_sweep_sensor(
    context: dg.SensorEvaluationContext, state: StateStoreResource, notifier: NotifierResource
) -> dg.SkipReason:
    delivered, failed = deliver_pending_alerts(state.get_client(), notifier)
    if failed:
        context.log.warning(f"alert sweep: {failed} alert(s) still undelivered")
    return dg.SkipReason(f"alert sweep: {delivered} delivered, {failed} still undelivered")


ALERT_SENSORS = [run_failure_alert_sensor, alert_sweep_sensor]
