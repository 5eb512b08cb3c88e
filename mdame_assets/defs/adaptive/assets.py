"""adaptive_engine: the weekly Adaptive Engine (issue 12, slice "adaptive").

Runs per dimension and week after the Strategic Auditor, reads that week's metrics from its
report (mdame.reports, migration 0016 of slice "auditor") and writes the bounded changes as a new
versioned parameter set (apply_param_set, 0017); the next day's runs read it (Step.params).

WIRING FOR THE LEAD (not done in this slice, the Auditor is built in parallel):
- AUDITOR_ASSET and weekly_dimension_partitions must be the Auditor's asset key and its
  partitions definition (import them from the auditor's module once merged);
- add `adaptive_engine` to mdame_assets/definitions.py and a Sunday schedule (or run it in the
  Auditor's job after it);
- `load_week_metrics` reads mdame.reports directly: swap in the auditor's StateStore read when
  it has one; append `outcome.markdown` to the week's report (an auditor RPC) and send it through
  the notifier (mdame_resources/notify.py, branch ops-alerts: send_message(dimension, text)).
"""

from __future__ import annotations

from datetime import date
from typing import Any

import dagster as dg

from mdame_assets.defs.adaptive.logic import run_engine
from mdame_assets.partitions import DIMENSION_PARTITION, dimension_partitions
from mdame_core.state import StateStore
from mdame_domain.dimensions import dimension_from_json
from mdame_resources.state import StateStoreResource

AUDITOR_ASSET = dg.AssetKey("strategic_auditor")
# Weeks start on Monday (as mdame.reports.week_start); the Sunday run closes the week.
weekly_partitions = dg.WeeklyPartitionsDefinition(
    start_date="2026-11-02", day_offset=1, timezone="UTC", end_offset=1
)
weekly_dimension_partitions = dg.MultiPartitionsDefinition(
    {"week": weekly_partitions, DIMENSION_PARTITION: dimension_partitions}
)


def load_week_metrics(state: StateStore, slug: str, week_start: date) -> dict[str, Any] | None:
    """The Auditor's metrics of the week (None: no report yet)."""
    rows = state._select(  # noqa: SLF001 - until the auditor's StateStore read is merged
        """SELECT r.metrics FROM mdame.reports r JOIN mdame.dimensions d ON d.id = r.dimension_id
            WHERE d.slug = %s AND r.week_start = %s""",
        [slug, week_start],
    )
    return dict(rows[0][0]) if rows else None


@dg.asset(
    partitions_def=weekly_dimension_partitions,
    group_name="operations",
    deps=[AUDITOR_ASSET],
    kinds={"postgres"},
)
def adaptive_engine(
    context: dg.AssetExecutionContext, state: StateStoreResource
) -> dg.MaterializeResult:
    """Bounded weekly changes of the dimension's parameters, each explained."""
    key = context.partition_key
    if not isinstance(key, dg.MultiPartitionKey):
        key = weekly_dimension_partitions.get_partition_key_from_str(str(key))
    keys = key.keys_by_dimension
    slug, week_start = keys[DIMENSION_PARTITION], date.fromisoformat(keys["week"])
    client = state.get_client()
    row = client.get_dimension(slug)
    if row is None:
        raise dg.Failure(f"dimension {slug!r} is not in the registry", allow_retries=False)
    metrics = load_week_metrics(client, slug, week_start)
    if metrics is None:
        raise dg.Failure(f"no Auditor report for {slug!r}, week of {week_start}: run it first")
    outcome = run_engine(
        client, dimension_from_json(row.config), week_start, metrics, client.db_now().date()
    )
    return dg.MaterializeResult(
        metadata={
            "explanation": dg.MetadataValue.md(outcome.markdown),
            "changes": len(outcome.changes),
            "version": outcome.version,
            "created": outcome.created,
            "effective_from": str(outcome.effective_from or ""),
        }
    )
