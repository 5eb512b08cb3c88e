"""Quality gate on scene clips: every scene of a script past planning has its stored clip,
with the bytes it was made with (a clip that vanished or rotted since is caught here)."""

import dagster as dg

from mdame_assets.gpu_defs.clips.assets import scene_clips
from mdame_assets.runtime import Step, read_step
from mdame_core.state import WorkUnit
from mdame_domain.media_store import MediaStore
from mdame_pipeline.lifecycle import script_states
from mdame_resources.media import MediaStoreResource
from mdame_resources.state import StateStoreResource


def clip_damage(scene: WorkUnit, store: MediaStore) -> str | None:
    """Why a ready scene's clip cannot be used (its object vanished or changed), or None."""
    uri = scene.result.get("uri")
    if not uri:
        return f"scene {scene.id} is ready without a clip"
    problem = store.problem(uri, str(scene.result.get("sha256")))
    return None if problem is None else f"scene {scene.id}: clip {problem}"


def clip_problems(
    step: Step, media: MediaStoreResource, states: tuple[str, ...] | None = None
) -> list[str]:
    """Every problem of the clips of this partition's scripts in `states` (by default every
    state past visuals_ready)."""
    store, problems = media.store(), []
    for script in step.scripts_in(*(states or script_states(step.state, "visuals_ready"))):
        for scene in step.state.list_work_units("scene", script_id=script.id):
            if scene.state != "ready":
                problems.append(f"scene {scene.id} of script {script.id} is {scene.state}")
            elif (damage := clip_damage(scene, store)) is not None:
                problems.append(damage)
    return problems


@dg.asset_check(asset=scene_clips, blocking=True)
def clips_present(
    context: dg.AssetCheckExecutionContext, state: StateStoreResource, media: MediaStoreResource
) -> dg.AssetCheckResult:
    problems = clip_problems(read_step(context, state.get_client(), "clips_present"), media)
    return dg.AssetCheckResult(passed=not problems, metadata={"problems": problems})
