"""trends: the dimension's feeds, parsed, scored, de-duplicated and gated by volume."""

from typing import Any

import dagster as dg

from mdame_assets.partitions import content_partitions
from mdame_domain.idempotency import idempotency_key
from mdame_domain.trends import (
    FeedError,
    VolumeGateError,
    dedupe_trends,
    score_trends,
    split_storable,
    volume_gate,
)
from mdame_pipeline.recovery import recover
from mdame_resources.providers.trends import SourceResult, TrendSourceResource
from mdame_resources.state import StateStoreResource
from mdame_runtime.step import Step, pipeline_step

# The minimum a day needs is the dimension's trend_volume_gate (tuned weekly).
MIN_TRENDS = 3  # its default: mdame_domain.adaptive.DEFAULT_TREND_VOLUME_GATE
MAX_TRENDS = 20


def recovery_pass(step: Step) -> dict[str, Any]:
    """The pass at the start of a run, under the run step's pipeline lock; it also settles the
    paid calls dead holders left that no run will ask for again."""
    report = recover(step.state, step.dimension_id)
    counts = report.counts()
    counts["paid_calls_settled"] = step.state.settle_orphaned_paid_calls(step.partition.dimension)
    step.log("recovery", **counts)
    return counts


def _read_sources(
    context: dg.AssetExecutionContext, step: Step, trend_source: TrendSourceResource
) -> tuple[list[SourceResult], list[tuple[str, str]]]:
    """Every source of the dimension: a failing one is logged, recorded (an event names source
    and reason) and skipped; when all of them fail the stage fails, naming each.

    The conditional-GET cache goes through step.state: a source's row is shared by every
    dimension that lists it, and written under this dimension's lock (record_feed_fetch is
    fenced by it), so a holder whose lock moved on writes nothing."""
    results: list[SourceResult] = []
    failed: list[tuple[str, str]] = []
    cache = step.state.for_dimension(step.partition.dimension)
    for source in step.dimension.trend_sources():
        key = trend_source.source_key(source)
        step.checkpoint()  # an external call follows
        try:
            results.append(trend_source.fetch(source, cache=cache))
        except FeedError as exc:
            failed.append((key, exc.problem))
            context.log.warning(f"trend source skipped: {exc}")
            step.log("feed_source_skipped", source=key, reason=exc.problem)
            step.state.record_feed_failure(key, exc.problem, step.execution_id)
            continue
        for note in results[-1].notes:
            context.log.warning(f"trend source {key!r}: {note}")
    if not results:
        named = "; ".join(f"{key}: {reason}" for key, reason in failed)
        raise dg.Failure(
            f"dimension {step.partition.dimension!r}: every trend source failed ({named})"
        )
    return results, failed


@dg.asset(partitions_def=content_partitions, group_name="content", kinds={"postgres"})
def trends(
    context: dg.AssetExecutionContext,
    state: StateStoreResource,
    trend_source: TrendSourceResource,
) -> dg.MaterializeResult:
    """Scored trend items for one dimension and day; the first stage of every run."""
    with pipeline_step(context, state.get_client(), "trends") as step:
        # Recovery before new work: stalled jobs and scripts from crashed runs go first.
        recovered = recovery_pass(step)
        results, failed = _read_sources(context, step, trend_source)
        items = [item for result in results for item in result.items]
        # One bad item must not fail the stage (the sources split them out already).
        items, unstorable = split_storable(items)
        skipped = [s for result in results for s in result.skipped] + unstorable
        for item in skipped:
            context.log.warning(f"skipped {item}")
            step.log("feed_item_skipped", source=item.source, guid=item.guid, reason=item.reason)
        scored = dedupe_trends(score_trends(items, step.dimension.keywords, step.partition.as_of))
        try:
            # The minimum is tuned weekly; YAML trend_volume_gate, default 3.
            gate = min(step.params.trend_volume_gate, MAX_TRENDS)
            kept = volume_gate(scored, gate, MAX_TRENDS)
        except VolumeGateError as exc:
            raise dg.Failure(f"dimension {step.partition.dimension!r}: {exc}") from exc
        ids = step.state.record_trends(
            step.partition.dimension,
            [
                {
                    "key": idempotency_key(
                        step.partition.dimension, step.partition.day, "trend", t.item.guid
                    ),
                    "payload": {
                        "dimension_id": step.dimension_id,
                        "partition_date": step.partition.day.isoformat(),
                        "title": t.item.title,
                        "summary": t.item.summary,
                        "url": t.item.url,
                        "source": t.item.source,
                        "published_at": t.item.published_at.isoformat()
                        if t.item.published_at
                        else None,
                        "score": round(t.score, 6),
                        "keywords": list(t.matched_keywords),
                    },
                }
                for t in kept
            ],
        )
    return dg.MaterializeResult(
        metadata={
            "feed_items": len(items) + len(skipped),
            "skipped_items": len(skipped),
            "after_dedupe": len(scored),
            "kept": len(ids),
            "top_score": kept[0].score if kept else 0.0,
            "top_title": kept[0].item.title if kept else "",
            "recovered": recovered,
            "trend_volume_gate": gate,
            "params_version": step.params.version,
            "sources": dg.MetadataValue.json([r.summary() for r in results]),
            "skipped_sources": dg.MetadataValue.json(
                [{"source": key, "reason": reason} for key, reason in failed]
            ),
        }
    )
