"""adaptive_engine: the weekly Adaptive Engine.

Runs per dimension and week after the Strategic Auditor, reads that week's metrics from its
report (mdame.reports) and writes the bounded changes as a new
versioned parameter set (apply_param_set, under the dimension's pipeline lock, within the limits
the dimension was registered with); the next day's runs read it (Step.params).

Its explanation goes into the asset's Markdown metadata, into the week's report (appended once)
and to the dimension's chat through the notifier.

It runs in the Auditor's weekly_operations_job (Sundays), which takes the Auditor and
everything downstream of it.
"""

import dagster as dg

from mdame_assets.defs.auditor.assets import strategic_audit
from mdame_assets.partitions import week_of, weekly_dimension_partitions
from mdame_domain.dimensions import dimension_from_json
from mdame_pipeline.adaptive import explain_in_report, run_engine
from mdame_pipeline.locks import held_lock
from mdame_resources.notify import NotifierResource
from mdame_resources.state import StateStoreResource


@dg.asset(
    partitions_def=weekly_dimension_partitions,
    group_name="operations",
    deps=[strategic_audit],
    kinds={"postgres"},
)
def adaptive_engine(
    context: dg.AssetExecutionContext, state: StateStoreResource, notifier: NotifierResource
) -> dg.MaterializeResult:
    """Bounded weekly changes of the dimension's parameters, each explained."""
    week_start, slug = week_of(context)
    client = state.get_client()
    row = client.get_dimension(slug)
    if row is None:
        raise dg.Failure(f"dimension {slug!r} is not in the registry", allow_retries=False)
    report = client.get_report(slug, week_start)
    if report is None:
        raise dg.Failure(f"no Auditor report for {slug!r}, week of {week_start}: run it first")
    # The set and the report's explanation are written under the dimension's lock, like every
    # stage's work: a step whose lock moved on writes nothing.
    with held_lock(client, slug, f"{context.run.run_id}:adaptive_engine") as fenced:
        outcome = run_engine(
            fenced,
            dimension_from_json(row.config),
            week_start,
            report.metrics,
            client.db_now().date(),
        )
        explain_in_report(fenced, outcome)
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
