"""scene_plan: each approved script split into 5-10 scenes; clips come from cache or the queue."""

from dataclasses import asdict

import dagster as dg

from mdame_assets.defs.scripts.assets import script_from_payload, scripts
from mdame_assets.lifecycle import script_states
from mdame_assets.partitions import content_partitions
from mdame_assets.runtime import Step, pipeline_step
from mdame_assets.work import advance, create
from mdame_core.state import WorkUnit
from mdame_domain.idempotency import idempotency_key
from mdame_domain.scenes import plan_scenes
from mdame_resources.state import StateStoreResource

SCENE_JOB_TYPE = "scene_clip"
CLIP_SECONDS = 6.0  # every clip is generated this long; the render loops or trims it per scene
SCENE_JOB_MAX_ATTEMPTS = 3


def _plan_script(step: Step, script: WorkUnit) -> tuple[int, int]:
    """Creates the script's scenes; returns (cache hits, jobs enqueued)."""
    plans = plan_scenes(
        script_from_payload(script.payload), step.dimension.visual_style, step.partition.dimension
    )
    hits = queued = 0
    for plan in plans:
        scene = create(
            step.state,
            "scene",
            idempotency_key(script.idempotency_key, "scene", plan.index),
            {
                "script_id": script.id,
                "scene_index": plan.index,
                "scene_hash": plan.scene_hash,
                "plan": asdict(plan),
            },
        )
        if scene.state != "planned":
            continue
        cached = step.state.lookup_scene_cache(plan.scene_hash)
        if cached is not None:
            advance(
                step.state,
                scene,
                "ready",
                {"uri": cached.uri, "sha256": cached.content_sha256, "cached": True},
            )
            hits += 1
            continue
        step.state.enqueue_job(
            SCENE_JOB_TYPE,
            scene.idempotency_key,
            {
                "scene_id": scene.id,
                "scene_hash": plan.scene_hash,
                "prompt": plan.visual_prompt,
                "palette": list(step.dimension.palette),
                "duration_s": CLIP_SECONDS,
            },
            SCENE_JOB_MAX_ATTEMPTS,
            partition_key=str(step.partition.key),
        )
        advance(step.state, scene, "queued")
        queued += 1
    advance(step.state, script, "planned", {"scenes": len(plans)})
    return hits, queued


@dg.asset(
    partitions_def=content_partitions, group_name="content", deps=[scripts], kinds={"postgres"}
)
def scene_plan(
    context: dg.AssetExecutionContext, state: StateStoreResource
) -> dg.MaterializeResult:
    """Scenes with on-screen text, a visual prompt, a style and a scene_hash; GPU jobs queued."""
    with pipeline_step(context, state.get_client(), "scene_plan") as step:
        hits = queued = 0
        for script in step.units(
            "script",
            state="approved",
        ):
            h, q = _plan_script(step, script)
            hits, queued = hits + h, queued + q
        counts = scene_counts(step)
    return dg.MaterializeResult(
        metadata={"cache_hits": hits, "jobs_enqueued": queued, "scenes_per_script": counts}
    )


def scene_counts(step: Step) -> dict[str, int]:
    return {
        str(script.id): len(step.state.list_work_units("scene", script_id=script.id))
        for script in step.units("script")
        if script.state in script_states("planned")
    }
