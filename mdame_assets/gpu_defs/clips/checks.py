"""Quality gates on scene clips: every scene of a script past planning has its stored clip,
with the bytes it was made with (a clip that vanished or rotted since is caught here), and a
picture the relevance gate passed (scene_relevance, mdame_domain.scene_relevance).

Both ran in the GPU code location, so the publishing job's voice step checks again: a damaged
clip is healed there, and a script with a scene the gate did not pass is failed, so no later
run publishes it."""

from dataclasses import replace

import dagster as dg

from mdame_assets.gpu_defs.clips.assets import scene_clips
from mdame_core.state import StateStore, WorkUnit
from mdame_domain.dimensions import DimensionConfig
from mdame_domain.media_store import MediaStore
from mdame_domain.relevance import DEFAULT_THRESHOLD
from mdame_domain.scene_relevance import (
    SceneRelevance,
    relevance_counts,
    relevance_table,
    scene_relevance,
)
from mdame_domain.visuals_chain import PROCEDURAL, ChainError, effective_chain
from mdame_pipeline.lifecycle import script_states
from mdame_resources.media import MediaStoreResource
from mdame_resources.providers.visuals import VisualsResource
from mdame_resources.state import StateStoreResource
from mdame_runtime.step import Step, read_step

RELEVANCE_CHECK = "scene_relevance"


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


@dg.asset_check(
    asset=scene_clips,
    blocking=True,
    description="Every scene of the partition's scripts past planning is ready, its clip in the "
    "media store with the bytes it was made with. Blocking: the scene_clips run fails (a "
    "run_failure alert). When it fails, nothing is needed for a clip that vanished or "
    "changed: the publishing job's voice or render step sends its scene back to the GPU queue "
    "and this location makes it again; a scene not ready under such a script is a bug or a "
    "hand-edited row: report it with the problems.",
)
def clips_present(
    context: dg.AssetCheckExecutionContext, state: StateStoreResource, media: MediaStoreResource
) -> dg.AssetCheckResult:
    problems = clip_problems(read_step(context, state.get_client(), "clips_present"), media)
    return dg.AssetCheckResult(passed=not problems, metadata={"problems": problems})


def procedural_runs(dimension: DimensionConfig, visuals: VisualsResource) -> bool:
    """Whether this deployment makes the dimension's scenes procedurally: its effective chain
    (the engines of the YAML chain that `visuals.offers`) is the procedural stand-in."""
    try:
        return PROCEDURAL in effective_chain(dimension.visuals.chain, visuals.offers)
    except ChainError:
        return False


def holdable_states(state: StateStore) -> tuple[str, ...]:
    """The states of a script past planning that can still be held back: not yet publishing."""
    return script_states(state, "visuals_ready", "rendered")


def script_relevance(
    step: Step, script: WorkUnit, visuals: VisualsResource
) -> list[SceneRelevance]:
    """The rows of a script's ready scenes, in scene order (a scene not ready is clips_present's
    to name)."""
    threshold = step.dimension.visuals.relevance.threshold
    here = procedural_runs(step.dimension, visuals)
    scenes = step.state.list_work_units("scene", script_id=script.id)
    return [
        scene_relevance(
            script.id, int(scene.payload.get("scene_index", -1)), scene.result, threshold, here
        )
        for scene in sorted(scenes, key=lambda s: int(s.payload.get("scene_index", -1)))
        if scene.state == "ready"
    ]


def fail_unjudged_scripts(step: Step, visuals: VisualsResource, *states: str) -> list[int]:
    """The publishing side's re-check (scene_relevance ran in the GPU code location): each
    script in `states` with a scene the gate did not pass is failed, with the reasons, so it is
    never voiced, rendered or published. Needs the fenced step; returns the scripts failed."""
    failed: dict[int, str] = {}
    for script in step.scripts_in(*states):
        bad = [row for row in script_relevance(step, script, visuals) if not row.passed]
        if not bad:
            continue
        reason = f"{RELEVANCE_CHECK}: " + "; ".join(
            f"scene {row.scene_index}: {row.problem}" for row in bad
        )
        if step.state.fail_script(script.id, script.state, reason[:2000]):
            step.log("scene_relevance_failed", script_id=script.id, reason=reason[:500])
            failed[script.id] = reason
    if failed:
        first = min(failed)
        step.alert("check_blocked", f"script {first} failed {failed[first]}"[:500])
    return sorted(failed)


@dg.asset_check(
    asset=scene_clips,
    name=RELEVANCE_CHECK,
    blocking=True,
    description=(
        "Each scene of the partition's scripts past planning shows a picture the relevance "
        "gate passed: a clip of a judged engine (diffusers, generated, stock) needs a "
        "judgement scoring at or above the dimension's relevance.threshold (default "
        f"{DEFAULT_THRESHOLD}; the threshold it was judged against when that is higher); a "
        "procedural clip passes only where this deployment makes the dimension's scenes "
        "procedurally (offline). The table shows every scene's engine, score, threshold, "
        "source and candidates turned down. Blocking: voice, render and publication wait, and "
        "the publishing job's voice step fails each script with such a scene, so it is never "
        "published. When it fails, read the row's verdict: a score under a threshold raised "
        "since needs nothing (the next scripts are made at the new bar); an unjudged or "
        "procedural clip in production was made elsewhere (another MDAME_PROVIDERS set on "
        "this database) or by a bug: give the deployment its own database, or report it."
    ),
)
def scene_relevance_check(
    context: dg.AssetCheckExecutionContext, state: StateStoreResource, visuals: VisualsResource
) -> dg.AssetCheckResult:
    step = read_step(context, state.get_client(), RELEVANCE_CHECK)
    held = holdable_states(step.state)
    rows: list[SceneRelevance] = []
    problems: list[str] = []
    for script in step.scripts_in(*script_states(step.state, "visuals_ready")):
        for row in script_relevance(step, script, visuals):
            if not row.passed and script.state not in held:
                # Out already (or on its way): shown, but there is nothing left to hold.
                row = replace(row, problem=f"published before it was held: {row.problem}")
            elif not row.passed:
                problems.append(f"script {script.id} scene {row.scene_index}: {row.problem}")
            rows.append(row)
    if problems:  # blocking: the partition's voice, render and publication wait
        step.alert("check_blocked", f"{RELEVANCE_CHECK} failed: {problems[0]}"[:500])
    return dg.AssetCheckResult(
        passed=not problems,
        metadata={
            "scenes": dg.MetadataValue.md(relevance_table(rows)),
            **relevance_counts(rows),
            "threshold": step.dimension.visuals.relevance.threshold,
            "procedural_runs_here": procedural_runs(step.dimension, visuals),
            "problems": problems,
        },
    )
