"""scene_clips (GPU code location): every queued scene of the partition gets its clip."""

import time

import dagster as dg

from mdame_assets.defs.clips.worker import mark_scene_ready, run_worker
from mdame_assets.defs.scenes.checks import scene_plan_problems
from mdame_assets.partitions import content_partitions
from mdame_assets.runtime import Step, pipeline_step
from mdame_resources.media import MediaStoreResource
from mdame_resources.providers.visuals import VisualsResource
from mdame_resources.state import StateStoreResource

WAIT_FOR_OTHER_WORKERS_S = 900


def _pending_scenes(step: Step) -> list:
    return [
        scene
        for script in step.state.list_work_units(
            "script",
            dimension_id=step.dimension_id,
            partition_date=step.partition.day,
            state="planned",
        )
        for scene in step.state.list_work_units("scene", script_id=script.id)
        if scene.state != "ready"
    ]


def _settle_from_cache(step: Step) -> None:
    """A worker that crashed after filling the cache left its scene queued: finish it here."""
    for scene in _pending_scenes(step):
        cached = step.state.lookup_scene_cache(scene.payload["scene_hash"])
        if cached is not None:
            mark_scene_ready(step.state, scene.id, cached.uri, cached.content_sha256, True)


scene_plan_key = dg.AssetKey("scene_plan")


@dg.asset(
    partitions_def=content_partitions,
    group_name="visuals",
    deps=[scene_plan_key],
    pool="gpu",
    kinds={"ffmpeg"},
)
def scene_clips(
    context: dg.AssetExecutionContext,
    state: StateStoreResource,
    visuals: VisualsResource,
    media: MediaStoreResource,
) -> dg.MaterializeResult:
    """Pulls scene jobs from the PostgreSQL queue until this partition's scenes are all ready."""
    with pipeline_step(context, state.get_client(), "scene_clips") as step:
        # The scene_plan checks ran in the other code location: check again before GPU work.
        problems = scene_plan_problems(step)
        if problems:
            raise dg.Failure("scene plan failed its checks: " + "; ".join(problems))
        started = time.monotonic()
        _settle_from_cache(step)
        stats = run_worker(
            step.state,
            visuals,
            media.store(),
            media.scratch_dir("clips"),
            done=lambda: (
                not _pending_scenes(step) or time.monotonic() - started > WAIT_FOR_OTHER_WORKERS_S
            ),
        )
        _settle_from_cache(step)
        pending = _pending_scenes(step)
        if pending:
            raise dg.Failure(f"{len(pending)} scenes still not ready (jobs failing or dead)")
        ready = 0
        for script in step.state.list_work_units(
            "script",
            dimension_id=step.dimension_id,
            partition_date=step.partition.day,
            state="planned",
        ):
            step.state.transition("script", script.id, "planned", "visuals_ready", {})
            ready += 1
    return dg.MaterializeResult(
        metadata={
            **stats.as_metadata(),
            "scripts_ready": ready,
            "seconds": round(time.monotonic() - started, 2),
        }
    )
