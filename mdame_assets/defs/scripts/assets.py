"""scripts: one script per approved topic, with a hook audit and a safety pass."""

from dataclasses import asdict, replace
from typing import Any

import dagster as dg

from mdame_assets.defs.topics.assets import choose_topics, topics
from mdame_assets.partitions import content_partitions
from mdame_core.state import WorkUnit
from mdame_domain.idempotency import idempotency_key
from mdame_domain.published_text import publishable_script
from mdame_domain.safety import SafetyDecision
from mdame_domain.writer import Script, TopicBrief
from mdame_pipeline.work import advance
from mdame_resources.providers.budget import BudgetExhausted
from mdame_resources.providers.safety import SafetyClassifierResource
from mdame_resources.providers.writer import (
    REJECTED_BY_MODEL_OUTPUT,
    ScriptWriterResource,
    WriteOutcome,
)
from mdame_resources.state import StateStoreResource
from mdame_runtime.step import Step, pipeline_step

# The audit rule of a script refused because it was mostly links, handles or contact details.
CONTACT_DETAILS_RULE = "contact_details"


def script_from_payload(payload: dict[str, Any]) -> Script:
    data = dict(payload["script"])
    data["hook_candidates"] = tuple(tuple(c) for c in data["hook_candidates"])
    data["body_sentences"] = tuple(data["body_sentences"])
    return Script(**data)


def _write(step: Step, writer: ScriptWriterResource, topic: WorkUnit) -> WriteOutcome:
    brief = TopicBrief(
        title=topic.payload["title"],
        snippets=tuple(topic.payload["snippets"]),
        keywords=tuple(topic.payload["keywords"]) or step.dimension.keywords,
        dimension_title=step.dimension.title,
        language=step.dimension.language,
    )
    return writer.write_topic(brief, step.params.hook_threshold, step.paid_context())


def _script_for(
    step: Step, topic: WorkUnit, writer: ScriptWriterResource, safety: SafetyClassifierResource
) -> tuple[str, int]:
    """Writes the topic's script and records it with its safety decision, in one phase; returns
    the outcome for the metadata and the micro-dollars spent on it. Nothing is written for a
    topic until every paid call of it is done."""
    outcome = _write(step, writer, topic)
    if outcome.script is None:
        detail = {
            "rejected_by": outcome.rejected_by,
            "attempts": outcome.attempts,
            "reasons": list(outcome.rejected_reasons),
            "spend_micros": outcome.spend_micros,
        }
        advance(step.state, topic, "rejected", detail)
        return f"{outcome.rejected_by}_rejected", outcome.spend_micros
    # Links, handles and contacts are taken out before anything is recorded, so no stage
    # after this one (title, description, voice, on-screen text) can publish them.
    published = publishable_script(outcome.script)
    script = published.script
    if not published.publishable:
        # Refused in plain code: no classifier is paid to look at it.
        decision = SafetyDecision(
            "block", CONTACT_DETAILS_RULE, (*published.refused, *published.removed)
        )
    else:
        decision = safety.decide(
            script.text,
            step.dimension.safety_profile,
            step.dimension.blocked_terms,
            step.paid_context(),
        )
        decision = replace(decision, reasons=(*decision.reasons, *published.removed))
    if published.removed:
        step.log(
            "contact_details_removed",
            topic_id=topic.id,
            verdict=decision.verdict,
            reasons=list(published.refused + published.removed),
        )
    script_id = step.state.record_script(
        idempotency_key(topic.idempotency_key, "script"),
        {
            "dimension_id": step.dimension_id,
            "partition_date": step.partition.day.isoformat(),
            "topic_id": topic.id,
            "attempt": outcome.attempts,
            "provider": writer.provider_name,
            "spend_micros": outcome.spend_micros,
            "script": asdict(script),
        },
        {
            "verdict": decision.verdict,
            "rule": decision.rule,
            "reasons": list(decision.reasons),
            "classifier": decision.classifier,
        },
    )
    unit = step.state.get_work_unit("script", script_id)
    return (unit.state if unit is not None else "missing"), outcome.spend_micros


@dg.asset(
    partitions_def=content_partitions, group_name="content", deps=[topics], kinds={"postgres"}
)
def scripts(
    context: dg.AssetExecutionContext,
    state: StateStoreResource,
    writer: ScriptWriterResource,
    safety: SafetyClassifierResource,
) -> dg.MaterializeResult:
    """Scripts of 80-150 words whose best of three hooks clears the dimension's threshold."""
    with pipeline_step(context, state.get_client(), "scripts") as step:
        outcomes, spend, exhausted = [], 0, ""
        pending = step.units("topic", state="approved")
        while pending and not exhausted:
            for topic in pending:
                try:
                    outcome, spent = _script_for(step, topic, writer, safety)
                except BudgetExhausted as exc:
                    # The dimension's paid work stops for the day; the topic stays approved
                    # with nothing half-written, and the database holds a budget_exhausted
                    # event.
                    exhausted = str(exc)
                    step.log("budget_exhausted", error=exhausted)
                    break
                outcomes.append(outcome)
                spend += spent
            if exhausted or f"{REJECTED_BY_MODEL_OUTPUT}_rejected" not in outcomes[-len(pending) :]:
                break
            # A topic whose answers kept failing their checks left its video slot: the next
            # trend gets it, as the topics stage would give it on a re-run.
            choose_topics(step, safety)
            pending = step.units("topic", state="approved")
        approved = step.units("script")
    scores = [s.payload["script"]["hook_score"] for s in approved]
    return dg.MaterializeResult(
        metadata={
            "written_now": len(outcomes),
            "outcomes": outcomes,
            "spend_micros": spend,
            "budget_exhausted": exhausted,
            "scripts": len(approved),
            "hook_scores": scores,
            "best_hook": max(approved, key=lambda s: s.payload["script"]["hook_score"]).payload[
                "script"
            ]["hook"]
            if approved
            else "",
        }
    )
