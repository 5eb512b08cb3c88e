"""scene_plan: each approved script split into 5-10 scenes; clips come from cache or the queue."""

from dataclasses import asdict

import dagster as dg

from mdame_assets.defs.scripts.assets import script_from_payload, scripts
from mdame_assets.partitions import content_partitions
from mdame_core.state import WorkUnit
from mdame_domain.idempotency import idempotency_key
from mdame_domain.media_store import MediaStore
from mdame_domain.scenes import plan_scenes, search_queries
from mdame_domain.visuals_chain import ChainError
from mdame_pipeline.lifecycle import script_states
from mdame_pipeline.scene_cache import (
    SCENE_JOB_MAX_ATTEMPTS,
    SCENE_JOB_TYPE,
    cached_clip,
    scene_chain,
    scene_job,
)
from mdame_pipeline.scene_pictures import SceneEngines, scene_chain_for
from mdame_resources.media import MediaStoreResource
from mdame_resources.providers.generated_visuals import GeneratedVisuals
from mdame_resources.providers.relevance import GeminiRelevanceJudge
from mdame_resources.providers.stock import StockFootage
from mdame_resources.providers.visuals import VisualsResource
from mdame_resources.state import StateStoreResource
from mdame_runtime.step import Step, pipeline_step


def _plan_script(
    step: Step, script: WorkUnit, store: MediaStore, engines: SceneEngines
) -> tuple[int, int]:
    """Plans the script's scenes in one phase; returns (cache hits, jobs enqueued)."""
    try:
        chain, chain_key = scene_chain_for(step.dimension, engines)
    except ChainError as exc:
        raise dg.Failure(f"{step.partition.dimension}: {exc}", allow_retries=False) from exc
    plans = plan_scenes(
        script_from_payload(script.payload),
        step.dimension.visual_style,
        step.partition.dimension,
        # The chain's engines, their models and the gate are in the key (procedural alone:
        # unchanged), so another chain's clip is not a hit.
        visuals_key=chain_key,
    )
    scenes = []
    for plan in plans:
        cached = cached_clip(step.state, store, plan.scene_hash)
        spec = scene_chain(
            chain,
            step.partition.dimension,
            plan.narration,
            search_queries(plan.narration, step.dimension.visual_style),
        )
        scenes.append(
            {
                "key": idempotency_key(script.idempotency_key, "scene", plan.index),
                "payload": {
                    "script_id": script.id,
                    "scene_index": plan.index,
                    "scene_hash": plan.scene_hash,
                    "plan": asdict(plan),
                    "chain": spec,
                },
                "cached": {
                    "uri": cached.uri,
                    "sha256": cached.content_sha256,
                    "detail": cached.detail,
                }
                if cached
                else None,
                "job": scene_job(
                    plan.scene_hash,
                    plan.visual_prompt,
                    step.dimension.palette,
                    step.dimension.visuals.engine,
                    spec,
                ),
            }
        )
    queued = step.state.plan_scenes(
        script.id, scenes, SCENE_JOB_TYPE, SCENE_JOB_MAX_ATTEMPTS, str(step.partition.key)
    )
    return len(plans) - queued, queued


@dg.asset(
    partitions_def=content_partitions, group_name="content", deps=[scripts], kinds={"postgres"}
)
def scene_plan(
    context: dg.AssetExecutionContext,
    state: StateStoreResource,
    media: MediaStoreResource,
    visuals: VisualsResource,
    generated_visuals: GeneratedVisuals,
    stock_footage: StockFootage,
    relevance_judge: GeminiRelevanceJudge,
) -> dg.MaterializeResult:
    """Scenes with on-screen text, a visual prompt, a style and a scene_hash; GPU jobs queued."""
    engines = SceneEngines(visuals, generated_visuals, stock_footage, relevance_judge)
    with pipeline_step(context, state.get_client(), "scene_plan") as step:
        hits = queued = 0
        for script in step.units(
            "script",
            state="approved",
        ):
            h, q = _plan_script(step, script, media.store(), engines)
            hits, queued = hits + h, queued + q
        counts = scene_counts(step)
    return dg.MaterializeResult(
        metadata={"cache_hits": hits, "jobs_enqueued": queued, "scenes_per_script": counts}
    )


def scene_counts(step: Step) -> dict[str, int]:
    planned = script_states(step.state, "planned")
    return {
        str(script.id): len(step.state.list_work_units("scene", script_id=script.id))
        for script in step.units("script")
        if script.state in planned
    }
