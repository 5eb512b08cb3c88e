"""Quality gate on the scene plan: every planned script has 5-10 scenes, each with a hash."""

import dagster as dg

from mdame_assets.defs.scenes.assets import scene_plan
from mdame_pipeline.lifecycle import script_states
from mdame_resources.state import StateStoreResource
from mdame_runtime.step import Step, read_step

MIN_SCENES, MAX_SCENES = 5, 10


def scene_plan_problems(step: Step) -> list[str]:
    problems, planned = [], script_states(step.state, "planned")
    for script in step.units("script"):
        if script.state not in planned:
            continue
        scenes = step.state.list_work_units("scene", script_id=script.id)
        if not MIN_SCENES <= len(scenes) <= MAX_SCENES:
            problems.append(f"script {script.id} has {len(scenes)} scenes")
        problems += [
            f"scene {s.id} has no scene_hash" for s in scenes if not s.payload.get("scene_hash")
        ]
    return problems


@dg.asset_check(
    asset=scene_plan,
    blocking=True,
    description=f"Every planned script has {MIN_SCENES}-{MAX_SCENES} scenes, each with a "
    "scene_hash (the GPU location checks the same before it makes a clip). Blocking: scene "
    "clips and all after wait and the content run fails (a run_failure alert). When it fails, "
    "the problems name each script and scene: the planner makes neither, so a rerun fails "
    "the same way; it is a bug or a hand-edited row: report it with the problems.",
)
def scene_count(
    context: dg.AssetCheckExecutionContext, state: StateStoreResource
) -> dg.AssetCheckResult:
    step = read_step(context, state.get_client(), "scene_count")
    problems = scene_plan_problems(step)
    return dg.AssetCheckResult(passed=not problems, metadata={"problems": problems})
