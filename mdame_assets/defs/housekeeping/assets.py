"""housekeeping: the daily retention pass over the whole home (not per dimension).

1. sweeps scratch files that dead processes left (mdame_domain/scratch.py);
2. collects stored media by the retention policy, decided in the database
   (mdame_pipeline/housekeeping.py);
3. deletes Dagster runs older than $MDAME_RUN_RETENTION_DAYS (default 30) with their events
   and compute logs, but the last run of each partition and job (until it is
   $MDAME_RUN_HISTORY_DAYS old, default 180) and the runs MD-AME's state still references
   (mdame_pipeline/housekeeping.prune_runs);
4. measures disk use by kind (mdame_domain/retention.disk_usage_by_kind) for the run's
   metadata, and raises the `disk_low` alert when free space under the home runs low.
"""

from typing import Any

import dagster as dg

from mdame_core.logs import log_event
from mdame_core.settings import mdame_home
from mdame_core.state import StateStore
from mdame_domain.media_store import LocalMediaStore
from mdame_domain.retention import (
    disk_low,
    disk_threshold,
    disk_usage_by_kind,
    run_history_days,
    run_retention_days,
)
from mdame_domain.scratch import sweep_scratch
from mdame_pipeline.housekeeping import collect_media, policy_from_registry, prune_runs
from mdame_resources.alerts import raise_alert
from mdame_resources.media import MediaStoreResource, scratch_root
from mdame_resources.notify import NotifierResource
from mdame_resources.state import StateStoreResource

HOUSEKEEPING_GROUP = "housekeeping"
DISK_LOW_CAUSE = "disk_low"


def alert_disk_low(
    state: StateStore, notifier: NotifierResource | None, reason: str, execution_id: str
) -> str:
    """Raises the global `disk_low` alert as an operator alert (deduplicated per day by
    mdame.record_alert); returns raise_alert's outcome. Never raises: housekeeping goes on."""
    outcome = raise_alert(state, notifier, None, DISK_LOW_CAUSE, reason)
    log_event(execution_id, "", "housekeeping", "alert", cause=DISK_LOW_CAUSE, outcome=outcome)
    return outcome


@dg.asset(group_name=HOUSEKEEPING_GROUP, kinds={"postgres"})
def housekeeping(
    context: dg.AssetExecutionContext,
    state: StateStoreResource,
    media: MediaStoreResource,
    notifier: NotifierResource,
) -> dg.MaterializeResult:
    """Deletes what the retention policy lets go and nothing a row still needs (media, and
    Dagster runs older than MDAME_RUN_RETENTION_DAYS but the last of each partition and job);
    measures the disk and alerts when it runs low."""
    run_id, home = context.run.run_id, mdame_home()
    client = state.get_client()

    def log(status: str, **fields: Any) -> None:
        log_event(run_id, "", "housekeeping", status, **fields)

    swept, swept_bytes = sweep_scratch(scratch_root())
    policy = policy_from_registry(client)
    store = media.store()
    report = collect_media(client, store, policy, f"housekeeping:{run_id}", log=log)
    runs = prune_runs(
        context.instance, client, run_retention_days(), log=log, history_days=run_history_days()
    )
    media_root = store.root if isinstance(store, LocalMediaStore) else None
    usage = disk_usage_by_kind(home, media_root)
    low = disk_low(home, disk_threshold())
    alerted = alert_disk_low(client, notifier, f"under {home}: {low}", run_id) if low else ""
    log(
        "succeeded",
        collected=len(report.collected),
        freed_bytes=report.freed_bytes,
        scratch_removed=len(swept),
        runs_deleted=len(runs.deleted),
        run_events_deleted=runs.events,
        compute_log_bytes_freed=runs.compute_log_bytes,
        disk_low=low,
    )
    return dg.MaterializeResult(
        metadata={
            "collected": len(report.collected),
            "freed_bytes": report.freed_bytes,
            "freed_by_kind": report.freed_by_kind(),
            "kept_needed": len(report.kept),
            "delete_failed": report.failed,
            "scratch_removed": len(swept),
            "scratch_freed_bytes": swept_bytes,
            "policy": policy.to_json(),
            "runs_deleted": len(runs.deleted),
            "run_events_deleted": runs.events,
            "compute_log_bytes_freed": runs.compute_log_bytes,
            "run_storage_bytes_freed": runs.run_storage_bytes,
            "runs_kept_last": runs.kept_last,
            "runs_deleted_past_history": runs.expired_last,
            "runs_kept_referenced": runs.kept_referenced,
            "run_delete_failed": runs.failed,
            "runs_created_before": runs.cutoff.isoformat(),
            "disk_bytes": usage,
            "disk_low": low or "",
            "disk_low_alert": alerted,
        }
    )


housekeeping_job = dg.define_asset_job(
    "housekeeping_job",
    selection=dg.AssetSelection.assets(housekeeping),
    description=(
        "Daily retention: media by policy, scratch leftovers, Dagster runs past their retention, "
        "disk use and low disk."
    ),
)

# 03:30 UTC: between the daily content runs (10:00 UTC), when nothing is usually rendering.
housekeeping_schedule = dg.ScheduleDefinition(
    job=housekeeping_job,
    cron_schedule="30 3 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="03:30 UTC daily, between the content runs, when nothing is usually rendering: "
    "housekeeping_job, the day's retention pass and disk check.",
)
