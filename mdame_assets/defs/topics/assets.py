"""topics: the best trends that pass the dimension's safety profile, one per video to make."""

from typing import Any

import dagster as dg

from mdame_assets.defs.trends.assets import trends
from mdame_assets.partitions import content_partitions
from mdame_core.state import WorkUnit
from mdame_domain.adaptive import topic_category
from mdame_domain.idempotency import idempotency_key
from mdame_domain.topics import repeat_of
from mdame_resources.providers.budget import BudgetExhausted
from mdame_resources.providers.safety import SafetyClassifierResource
from mdame_resources.state import StateStoreResource
from mdame_runtime.step import Step, pipeline_step

# Topics decided per video slot before giving up: the feed's best items are tried in order.
CANDIDATES_PER_VIDEO = 5
# The audit rule of a topic rejected because the dimension covered the story on a nearby day.
REPEAT_RULE = "repeat"


def _decision(step: Step, safety: SafetyClassifierResource, trend: WorkUnit) -> dict[str, Any]:
    decision = safety.decide(
        f"{trend.payload['title']}. {trend.payload['summary']}",
        step.dimension.safety_profile,
        step.dimension.blocked_terms,
        step.paid_context(),
    )
    return {
        "verdict": decision.verdict,
        "rule": decision.rule,
        "reasons": list(decision.reasons),
        "classifier": decision.classifier,
    }


def _repeat(trend: WorkUnit, covered: list[str]) -> dict[str, Any] | None:
    old = repeat_of(trend.payload["title"], covered)
    if old is None:
        return None
    reasons = [f"repeats {old!r}"]
    return {"verdict": "block", "rule": REPEAT_RULE, "reasons": reasons, "classifier": "topics"}


def _topic_for(
    step: Step, safety: SafetyClassifierResource, trend: WorkUnit, covered: list[str]
) -> WorkUnit:
    """The trend's topic, decided once: classified, logged and approved or rejected together.
    A story covered on a nearby day is rejected as a repeat, with that rule in the audit log."""
    key = idempotency_key(trend.idempotency_key, "topic")
    topic = step.state.get_work_unit("topic", key)
    if topic is None or topic.state == "candidate":
        payload = {
            "dimension_id": step.dimension_id,
            "partition_date": step.partition.day.isoformat(),
            "trend_id": trend.id,
            "title": trend.payload["title"],
            "snippets": [trend.payload["summary"]] if trend.payload["summary"] else [],
            "keywords": trend.payload["keywords"],
        }
        decision = _repeat(trend, covered) or _decision(step, safety, trend)
        step.state.decide_topic(key, payload, decision)
        topic = step.state.get_work_unit("topic", key)
        assert topic is not None  # decide_topic just created or found it
    return topic


def choose_topics(step: Step, safety: SafetyClassifierResource) -> dict[str, Any]:
    """Decides topics from the best trends until every video slot has one; returns the
    figures for the metadata. A slot is used by a topic that is approved or scripted, or whose
    hooks were rejected (re-runs then pick exactly the same topics); a topic rejected by
    safety, as a repeat, or because the model's answers kept failing their checks leaves its
    slot to the next trend. The scripts stage calls this again after such a rejection."""
    # Category weights (tuned weekly by the Adaptive Engine, else 1.0) scale each trend's score.
    weights = step.params
    ranked = sorted(
        step.units("trend"),
        key=lambda t: (
            -t.payload["score"] * weights.weight(topic_category(t.payload["keywords"])),
            t.id,
        ),
    )
    wanted = step.params.videos_per_day
    covered = step.state.covered_topic_titles(
        step.dimension_id, step.partition.day, step.dimension.topic_lookback_days
    )
    approved, rejected, repeats, decided, exhausted = 0, [], [], 0, ""
    for trend in ranked:
        if approved >= wanted or decided >= wanted * CANDIDATES_PER_VIDEO:
            break
        try:
            topic = _topic_for(step, safety, trend, covered)
        except BudgetExhausted as exc:
            # Paid classification stops for the day; the trend stays undecided.
            exhausted = str(exc)
            step.log("budget_exhausted", error=exhausted)
            break
        if topic.result.get("safety_rule") == REPEAT_RULE:  # its slot goes to the next one
            repeats.append(topic.payload["title"])
            continue
        decided += 1
        if topic.state in ("approved", "scripted") or topic.result.get("rejected_by") == "hook":
            approved += 1
        else:
            rejected.append(topic.payload["title"])
    return {
        "approved": approved,
        "rejected": len(rejected),
        "rejected_titles": rejected,
        "skipped_repeats": repeats,
        "budget_exhausted": exhausted,
        "videos_per_day": wanted,
        "params_version": step.params.version,
    }


@dg.asset(
    partitions_def=content_partitions, group_name="content", deps=[trends], kinds={"postgres"}
)
def topics(
    context: dg.AssetExecutionContext, state: StateStoreResource, safety: SafetyClassifierResource
) -> dg.MaterializeResult:
    """Approved topics for the day; rejected ones keep an audit row with the rule that fired."""
    with pipeline_step(context, state.get_client(), "topics") as step:
        chosen = choose_topics(step, safety)
    return dg.MaterializeResult(metadata=chosen)
