"""adaptive_engine: the weekly Adaptive Engine (issue 12, slice "adaptive").

Runs per dimension and week after the Strategic Auditor, reads that week's metrics from its
report (mdame.reports, migration 0016 of slice "auditor") and writes the bounded changes as a new
versioned parameter set (apply_param_set, 0017); the next day's runs read it (Step.params).

Its explanation goes into the asset's Markdown metadata, into the week's report (appended once)
and to the dimension's chat through the notifier.

WIRING FOR THE LEAD: the Auditor's asset is not on its branch yet. AUDITOR_ASSET and
weekly_dimension_partitions must become the Auditor's asset key and partitions definition, and
`adaptive_engine` must be added to mdame_assets/orchestrator.py with a Sunday schedule (after
the Auditor, e.g. both in one weekly job), since it is not in any Definitions yet.
"""

from datetime import date

import dagster as dg

from mdame_assets.defs.adaptive.logic import explain_in_report, run_engine
from mdame_assets.partitions import DIMENSION_PARTITION, dimension_partitions
from mdame_domain.dimensions import dimension_from_json
from mdame_resources.notify import NotifierResource
from mdame_resources.state import StateStoreResource

AUDITOR_ASSET = dg.AssetKey("strategic_auditor")
# Weeks start on Monday (as mdame.reports.week_start); the Sunday run closes the week.
weekly_partitions = dg.WeeklyPartitionsDefinition(
    start_date="2026-11-02", day_offset=1, timezone="UTC", end_offset=1
)
weekly_dimension_partitions = dg.MultiPartitionsDefinition(
    {"week": weekly_partitions, DIMENSION_PARTITION: dimension_partitions}
)


@dg.asset(
    partitions_def=weekly_dimension_partitions,
    group_name="operations",
    deps=[AUDITOR_ASSET],
    kinds={"postgres"},
)
def adaptive_engine(
    context: dg.AssetExecutionContext, state: StateStoreResource, notifier: NotifierResource
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
    report = client.get_report(slug, week_start)
    if report is None:
        raise dg.Failure(f"no Auditor report for {slug!r}, week of {week_start}: run it first")
    outcome = run_engine(
        client, dimension_from_json(row.config), week_start, report.metrics, client.db_now().date()
    )
    explain_in_report(client, outcome)
    if outcome.created:  # once per change: a re-run does not message the chat again
        notifier.send_message(slug, outcome.markdown)
    return dg.MaterializeResult(
        metadata={
            "explanation": dg.MetadataValue.md(outcome.markdown),
            "changes": len(outcome.changes),
            "version": outcome.version,
            "created": outcome.created,
            "effective_from": str(outcome.effective_from or ""),
        }
    )
