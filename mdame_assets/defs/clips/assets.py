"""scene_clips (GPU code location): every queued scene of the partition gets its clip."""

import time

import dagster as dg

from mdame_assets.defs.clips.worker import mark_scene_ready, run_worker
from mdame_assets.defs.scenes.checks import scene_plan_problems
from mdame_assets.partitions import content_partitions
from mdame_assets.runtime import Step, pipeline_step
from mdame_assets.work import advance
from mdame_resources.media import MediaStoreResource
from mdame_resources.providers.visuals import VisualsResource
from mdame_resources.state import StateStoreResource

WAIT_FOR_OTHER_WORKERS_S = 900


def _pending_scenes(step: Step) -> list:
    return [
        scene
        for script in step.units(
            "script",
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


def _jobs_still_live(step: Step) -> bool:
    """Whether any scene job of the partition is still queued or running.

    Every scene counts, ready ones too: a run that crashed after filling the cache left its
    scene settled from the cache but its (reaped) job queued, and the job must still be done
    (a cache hit) so nothing stays queued forever.
    """
    keys = [
        scene.idempotency_key
        for script in step.units("script", state="planned")
        for scene in step.state.list_work_units("scene", script_id=script.id)
    ]
    return any(s in ("queued", "running") for s in step.state.job_states(keys).values())


def _finish_scripts(step: Step) -> tuple[list[int], list[int]]:
    """Scripts whose scenes are all ready move on; a scene whose job died fails its script."""
    ready, failed = [], []
    for script in step.units(
        "script",
        state="planned",
    ):
        scenes = step.state.list_work_units("scene", script_id=script.id)
        jobs = step.state.job_states([s.idempotency_key for s in scenes])
        dead = [
            s
            for s in scenes
            if s.state != "ready" and jobs.get(s.idempotency_key) in ("dead", "failed")
        ]
        if dead:
            for scene in dead:
                advance(step.state, scene, "failed", {"reason": "job dead after max attempts"})
            advance(step.state, script, "failed", {"failed_scenes": [s.id for s in dead]})
            failed.append(script.id)
        elif all(s.state == "ready" for s in scenes):
            advance(step.state, script, "visuals_ready")
            ready.append(script.id)
    return ready, failed


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
                not _jobs_still_live(step) or time.monotonic() - started > WAIT_FOR_OTHER_WORKERS_S
            ),
            partition_key=str(step.partition.key),  # only this partition's jobs, and stats
        )
        _settle_from_cache(step)
        ready, failed = _finish_scripts(step)
        if failed or _pending_scenes(step):
            raise dg.Failure(
                f"scene clips incomplete: scripts failed {failed}, "
                f"{len(_pending_scenes(step))} scenes still waiting on live jobs"
            )
    return dg.MaterializeResult(
        metadata={
            **stats.as_metadata(),
            "scripts_ready": len(ready),
            "seconds": round(time.monotonic() - started, 2),
        }
    )
