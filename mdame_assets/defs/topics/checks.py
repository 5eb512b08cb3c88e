"""Quality gate: every approved topic has an 'allow' decision in the safety audit log."""

import dagster as dg

from mdame_assets.defs.topics.assets import topics
from mdame_resources.state import StateStoreResource
from mdame_runtime.step import read_step


@dg.asset_check(
    asset=topics,
    blocking=True,
    description="Every topic that passed the safety step (approved, scripted, or turned down "
    "later by its hook) still has its trend, whose latest verdict in mdame.safety_audit_logs "
    "is 'allow'; any other verdict fails it. Blocking: scripts and all after wait "
    "and the content run fails (a run_failure alert). When it fails, the problems name each "
    "topic and its verdict: the topics stage never advances such a topic, so a rerun fails "
    "the same way; it is a bug or a hand-edited row: report it with the problems.",
)
def topics_safety(
    context: dg.AssetCheckExecutionContext, state: StateStoreResource
) -> dg.AssetCheckResult:
    step = read_step(context, state.get_client(), "topics_safety")
    problems = []
    for topic in step.units("topic"):
        trend = step.state.get_work_unit("trend", topic.payload["trend_id"])
        if trend is None:
            problems.append(f"topic {topic.id}: its trend {topic.payload['trend_id']} is gone")
            continue
        verdict = step.state.last_safety_verdict("topic", trend.idempotency_key)
        passed_safety = (
            topic.state in ("approved", "scripted") or topic.result.get("rejected_by") == "hook"
        )
        if passed_safety and verdict != "allow":
            problems.append(f"topic {topic.id} advanced with safety verdict {verdict!r}")
    return dg.AssetCheckResult(passed=not problems, metadata={"problems": problems})
