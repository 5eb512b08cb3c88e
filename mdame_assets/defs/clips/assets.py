"""scene_clips (GPU code location): every queued scene of the partition gets its clip."""

import time

import dagster as dg

from mdame_assets.defs.clips.worker import run_worker
from mdame_assets.defs.scenes.checks import scene_plan_problems
from mdame_assets.partitions import content_partitions
from mdame_assets.runtime import Step, pipeline_step
from mdame_resources.media import MediaStoreResource
from mdame_resources.providers.visuals import VisualsResource
from mdame_resources.state import StateStoreResource

WAIT_FOR_OTHER_WORKERS_S = 900


def _jobs_still_live(step: Step) -> bool:
    """Whether a scene job of the partition's planned scripts is still queued or running (a
    standalone worker may hold one; an expired lease is reaped and claimed here)."""
    keys = [
        scene.result.get("job_key", scene.idempotency_key)  # a healed scene's current job
        for script in step.scripts_in("planned")
        for scene in step.state.list_work_units("scene", script_id=script.id)
    ]
    return any(s in ("queued", "running") for s in step.state.job_states(keys).values())


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
            raise dg.Failure(
                "scene plan failed its checks: " + "; ".join(problems), allow_retries=False
            )
        started = time.monotonic()
        stats = run_worker(
            step.state,
            visuals,
            media.store(),
            media.scratch_dir("clips"),
            done=lambda: (
                not _jobs_still_live(step) or time.monotonic() - started > WAIT_FOR_OTHER_WORKERS_S
            ),
            partition_key=str(step.partition.key),
        )
        outcomes = {str(s.id): step.state.finish_visuals(s.id) for s in step.scripts_in("planned")}
        failed = sorted(k for k, v in outcomes.items() if v == "failed")
        if failed:
            raise dg.Failure(
                f"scene clips failed for scripts {failed}: a scene's job died", allow_retries=False
            )
        waiting = sorted(k for k, v in outcomes.items() if v == "planned")
        if waiting:
            raise dg.Failure(f"scene clips incomplete: scripts {waiting} wait on live jobs")
    return dg.MaterializeResult(
        metadata={
            **stats.as_metadata(),
            "scripts_ready": sum(v == "visuals_ready" for v in outcomes.values()),
            "seconds": round(time.monotonic() - started, 2),
        }
    )
