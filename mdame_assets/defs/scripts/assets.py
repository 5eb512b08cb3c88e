"""scripts: one script per approved topic, with a hook audit and a safety pass."""

from dataclasses import asdict
from typing import Any

import dagster as dg

from mdame_assets.defs.topics.assets import topics
from mdame_assets.partitions import content_partitions
from mdame_assets.runtime import Step, pipeline_step
from mdame_assets.work import advance
from mdame_core.state import WorkUnit
from mdame_domain.idempotency import idempotency_key
from mdame_domain.writer import MAX_ATTEMPTS, Script, TopicBrief
from mdame_resources.providers.safety import SafetyClassifierResource
from mdame_resources.providers.writer import ScriptWriterResource
from mdame_resources.state import StateStoreResource


def script_from_payload(payload: dict[str, Any]) -> Script:
    data = dict(payload["script"])
    data["hook_candidates"] = tuple(tuple(c) for c in data["hook_candidates"])
    data["body_sentences"] = tuple(data["body_sentences"])
    return Script(**data)


def _write(step: Step, writer: ScriptWriterResource, topic: WorkUnit) -> tuple[Script | None, int]:
    brief = TopicBrief(
        title=topic.payload["title"],
        snippets=tuple(topic.payload["snippets"]),
        keywords=tuple(topic.payload["keywords"]) or step.dimension.keywords,
        dimension_title=step.dimension.title,
        language=step.dimension.language,
    )
    for attempt in range(MAX_ATTEMPTS):
        script = writer.write(brief, attempt, step.dimension.hook_threshold)
        if script is not None:
            return script, attempt
    return None, MAX_ATTEMPTS


def _script_for(
    step: Step, topic: WorkUnit, writer: ScriptWriterResource, safety: SafetyClassifierResource
) -> str:
    """Writes the topic's script and records it with its safety decision, in one phase; returns
    the outcome for the metadata."""
    script, attempt = _write(step, writer, topic)
    if script is None:
        advance(step.state, topic, "rejected", {"rejected_by": "hook", "attempts": attempt})
        return "hook_rejected"
    decision = safety.decide(
        script.text, step.dimension.safety_profile, step.dimension.blocked_terms
    )
    script_id = step.state.record_script(
        idempotency_key(topic.idempotency_key, "script"),
        {
            "dimension_id": step.dimension_id,
            "partition_date": step.partition.day.isoformat(),
            "topic_id": topic.id,
            "attempt": attempt,
            "provider": writer.provider_name,
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
    return unit.state if unit is not None else "missing"


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
        outcomes = [
            _script_for(step, topic, writer, safety)
            for topic in step.units(
                "topic",
                state="approved",
            )
        ]
        approved = step.units("script")
    scores = [s.payload["script"]["hook_score"] for s in approved]
    return dg.MaterializeResult(
        metadata={
            "written_now": len(outcomes),
            "outcomes": outcomes,
            "scripts": len(approved),
            "hook_scores": scores,
            "best_hook": max(approved, key=lambda s: s.payload["script"]["hook_score"]).payload[
                "script"
            ]["hook"]
            if approved
            else "",
        }
    )
