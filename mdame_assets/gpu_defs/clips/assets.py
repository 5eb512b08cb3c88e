"""scene_clips (GPU code location): one Dagster step per scene, so the UI shows each scene's
logs and retries, and the executor (mdame_runtime/executors.py) decides where each runs.

    scenes_to_clip -> scene_clip[scene_<id>] (one per scene; GPU pool, tags) -> scene_clips_done

- scenes_to_clip holds the dimension's pipeline lock (a fenced Step): it re-checks the scene
  plan (its checks ran in the other code location) and lists the scenes of this partition's
  planned scripts that still need a clip, one dynamic output each.
- scene_clip gets only the scene's id and claims that scene's job under a generation lease
  (mdame_pipeline.clip_worker.make_scene_clip): parallel scene steps, on any host, hold no
  dimension lock; the job lease fences what they write. A refused claim is retried after the
  holder's lease (or a bounded poll), a failed generation while the job has attempts left too.
- scene_clips_done takes the lock again, settles each planned script (finish_visuals) and
  records the asset's materialization.
Only scene ids and small outcome dicts travel between steps; everything else is in PostgreSQL.
A transient failure of any of these steps is retried by scene_clips_job's retry policy
(mdame_assets.jobs.transient_retry, a setting read as the location loads), which applies to every
step without one of its own: the ops carry none.
"""

import time
from collections.abc import Iterator
from typing import Any

import dagster as dg

from mdame_assets.defs.scenes.checks import scene_plan_problems
from mdame_assets.partitions import content_partitions
from mdame_core.logs import log_event
from mdame_pipeline.clip_worker import (
    SceneAttemptFailed,
    SceneBusy,
    SceneRefused,
    make_scene_clip,
)
from mdame_pipeline.scene_pictures import SceneEngines
from mdame_resources.media import MediaStoreResource
from mdame_resources.providers.generated_visuals import GeneratedVisuals
from mdame_resources.providers.relevance import GeminiRelevanceJudge
from mdame_resources.providers.stock import StockFootage
from mdame_resources.providers.visuals import VisualsResource
from mdame_resources.state import StateStoreResource
from mdame_runtime.executors import GPU_POOL, GPU_STEP_TAGS
from mdame_runtime.partition_keys import PartitionRef
from mdame_runtime.step import Step, pipeline_step

scene_plan_key = dg.AssetKey("scene_plan")

STAGE = "scene_clips"
# How often one scene step may be sent round again (waiting for a busy scene, or after a failed
# attempt). The job's max_attempts bounds the generation attempts; this only bounds the waits.
SCENE_STEP_RETRIES = 40
FAILED_ATTEMPT_RETRY_S = 2.0


def scenes_needing_clips(step: Step) -> list[int]:
    """Scenes of this partition's planned scripts that are not ready yet, in order."""
    return [
        scene.id
        for script in step.scripts_in("planned")
        for scene in step.state.list_work_units("scene", script_id=script.id)
        if scene.state != "ready"
    ]


@dg.op(
    ins={"scene_plan": dg.In(dg.Nothing)},
    out={"scenes": dg.DynamicOut(int), "started_at": dg.Out(float)},
)
def scenes_to_clip(
    context: dg.OpExecutionContext, state: StateStoreResource
) -> Iterator[dg.DynamicOutput[int] | dg.Output[float]]:
    """Checks the scene plan again and fans out one scene_clip step per scene to make."""
    started_at = time.time()
    with pipeline_step(context, state.get_client(), STAGE) as step:
        # The scene_plan checks ran in the other code location: check again before GPU work.
        problems = scene_plan_problems(step)
        if problems:
            raise dg.Failure(
                "scene plan failed its checks: " + "; ".join(problems), allow_retries=False
            )
        scene_ids = scenes_needing_clips(step)
        step.log("fan_out", scenes=scene_ids)
    yield dg.Output(started_at, "started_at")
    for scene_id in scene_ids:
        yield dg.DynamicOutput(scene_id, mapping_key=f"scene_{scene_id}", output_name="scenes")


@dg.op(tags=GPU_STEP_TAGS, pool=GPU_POOL)
def scene_clip(
    context: dg.OpExecutionContext,
    scene_id: int,
    state: StateStoreResource,
    visuals: VisualsResource,
    generated_visuals: GeneratedVisuals,
    stock_footage: StockFootage,
    relevance_judge: GeminiRelevanceJudge,
    media: MediaStoreResource,
) -> dict[str, Any]:
    """One scene's clip: claimed under its generation lease, from the cache or made by the
    first engine of its visuals chain whose candidate passes the relevance gate."""
    partition = PartitionRef.of(context)
    engines = SceneEngines(visuals, generated_visuals, stock_footage, relevance_judge)

    def log(status: str, **fields: Any) -> None:
        log_event(context.run.run_id, partition.dimension, "scene_clip", status, **fields)

    try:
        outcome = make_scene_clip(
            state.get_client(),
            scene_id,
            visuals,
            media.store(),
            media.scratch_dir("clips"),
            engines,
        )
    except SceneRefused as refused:
        log("refused", scene_id=scene_id, error=str(refused)[:500])
        raise dg.Failure(str(refused), allow_retries=False) from refused
    except SceneBusy as busy:
        log("waiting", scene_id=scene_id, holder=busy.claim.holder, reason=busy.claim.outcome)
        context.log.info(str(busy))
        raise dg.RetryRequested(
            max_retries=SCENE_STEP_RETRIES, seconds_to_wait=busy.wait_s
        ) from busy
    except SceneAttemptFailed as failed:
        log("attempt_failed", scene_id=scene_id, error=str(failed)[:500])
        context.log.warning(str(failed))
        raise dg.RetryRequested(
            max_retries=SCENE_STEP_RETRIES, seconds_to_wait=FAILED_ATTEMPT_RETRY_S
        ) from failed
    log(outcome.outcome, scene_id=scene_id, worker=outcome.worker, attempt=outcome.attempt,
        until=outcome.until)  # fmt: skip
    said = f" until {outcome.until}" if outcome.until else f" on {outcome.worker}"
    context.log.info(f"scene {scene_id}: {outcome.outcome}{said}")
    return outcome.as_dict()


@dg.op(out=dg.Out(dg.Nothing))
def scene_clips_done(
    context: dg.OpExecutionContext,
    outcomes: list[dict[str, Any]],
    started_at: float,
    state: StateStoreResource,
) -> None:
    """Settles this partition's planned scripts and records the materialization's metadata."""
    with pipeline_step(context, state.get_client(), STAGE) as step:
        scripts = {str(s.id): step.state.finish_visuals(s.id) for s in step.scripts_in("planned")}
        failed = sorted(k for k, v in scripts.items() if v == "failed")
        if failed:
            raise dg.Failure(
                f"scene clips failed for scripts {failed}: a scene's job died", allow_retries=False
            )
        waiting = sorted(k for k, v in scripts.items() if v == "planned")
        until = [str(o["until"]) for o in outcomes if o["outcome"] == "waiting"]
        if waiting and not until:
            raise dg.Failure(f"scene clips incomplete: scripts {waiting} wait on live jobs")
        if until:
            # Waiting is not failing: the hop sensor runs the partition again after the wait.
            step.log("waiting", scripts=waiting, until=min(until))
    kinds = [o["outcome"] for o in outcomes]
    context.add_output_metadata(
        {
            "generated": kinds.count("generated"),
            "cache_hits": kinds.count("cache_hit"),
            "failed": kinds.count("failed"),
            "scripts_ready": sum(v == "visuals_ready" for v in scripts.values()),
            "scripts_rejected": sum(v == "rejected" for v in scripts.values()),
            "scenes_waiting": kinds.count("waiting"),
            "waiting_until": min(until) if until else "",
            "seconds": round(time.time() - started_at, 2),
            "workers": sorted({str(o["worker"]) for o in outcomes if o.get("worker")}),
        }
    )


@dg.graph_asset(
    partitions_def=content_partitions,
    group_name="visuals",
    ins={"scene_plan": dg.AssetIn(scene_plan_key, dagster_type=dg.Nothing)},
    kinds={"ffmpeg"},
)
def scene_clips(scene_plan: Any) -> Any:
    """Every planned scene of the partition gets its clip, one step per scene."""
    scenes, started_at = scenes_to_clip(scene_plan)
    return scene_clips_done(scenes.map(scene_clip).collect(), started_at)
