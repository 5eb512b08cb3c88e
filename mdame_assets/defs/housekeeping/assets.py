"""housekeeping: the daily retention pass over the whole home (not per dimension).

1. sweeps scratch files that dead processes left (mdame_domain/scratch.py);
2. collects stored media by the retention policy, decided in the database (logic.py);
3. measures disk use by kind (mdame_domain/retention.disk_usage_by_kind) for the run's
   metadata, and raises the `disk_low` alert when free space under the home runs low.
"""

from typing import Any

import dagster as dg

from mdame_assets.defs.housekeeping.logic import collect_media, policy_from_registry
from mdame_core.logs import log_event
from mdame_core.settings import mdame_home
from mdame_domain.media_store import LocalMediaStore
from mdame_domain.retention import disk_low, disk_threshold, disk_usage_by_kind
from mdame_domain.scratch import sweep_scratch
from mdame_resources.media import MediaStoreResource, scratch_root
from mdame_resources.state import StateStoreResource

HOUSEKEEPING_GROUP = "housekeeping"
DISK_LOW_CAUSE = "disk_low"


def alert_disk_low(state: Any, text: str, execution_id: str) -> None:
    """Raises the `disk_low` alert (global: no dimension).

    LEAD: wire the alerts slice here once branch `ops-alerts` has its entry point, e.g.
    `raise_alert(state, notifier, dimension=None, cause=DISK_LOW_CAUSE, text=text)` (deduped
    per cause and day by its RPC, migration 0015). Until then the alert is a structured log
    line with status `alert`, which the run's metadata also carries."""
    log_event(execution_id, "", "housekeeping", "alert", cause=DISK_LOW_CAUSE, text=text)


@dg.asset(group_name=HOUSEKEEPING_GROUP, kinds={"postgres"})
def housekeeping(
    context: dg.AssetExecutionContext, state: StateStoreResource, media: MediaStoreResource
) -> dg.MaterializeResult:
    """Deletes what the retention policy lets go and nothing a row still needs; measures the
    disk and alerts when it runs low."""
    run_id, home = context.run.run_id, mdame_home()
    client = state.get_client()

    def log(status: str, **fields: Any) -> None:
        log_event(run_id, "", "housekeeping", status, **fields)

    swept, swept_bytes = sweep_scratch(scratch_root())
    policy = policy_from_registry(client)
    store = media.store()
    report = collect_media(client, store, policy, f"housekeeping:{run_id}", log=log)
    media_root = store.root if isinstance(store, LocalMediaStore) else None
    usage = disk_usage_by_kind(home, media_root)
    low = disk_low(home, disk_threshold())
    if low is not None:
        alert_disk_low(client, f"MD-AME disk space low under {home}: {low}", run_id)
    log(
        "succeeded",
        collected=len(report.collected),
        freed_bytes=report.freed_bytes,
        scratch_removed=len(swept),
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
            "disk_bytes": usage,
            "disk_low": low or "",
        }
    )


housekeeping_job = dg.define_asset_job(
    "housekeeping_job",
    selection=dg.AssetSelection.assets(housekeeping),
    description="Daily retention: media by policy, scratch leftovers, disk use and low disk.",
)

# 03:30 UTC: between the daily content runs (10:00 UTC), when nothing is usually rendering.
housekeeping_schedule = dg.ScheduleDefinition(
    job=housekeeping_job,
    cron_schedule="30 3 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)
