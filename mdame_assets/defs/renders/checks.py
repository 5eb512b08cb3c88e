"""Quality gate: approved renders are still the approved bytes and still probe as 1080x1920,
15-60 s, with an audio stream."""

import dagster as dg

from mdame_assets.defs.renders.assets import renders
from mdame_assets.runtime import read_step
from mdame_domain.media_store import MediaProblem
from mdame_domain.probe import check_render
from mdame_resources.media import MediaStoreResource
from mdame_resources.state import StateStoreResource


@dg.asset_check(asset=renders, blocking=True)
def render_probe(
    context: dg.AssetCheckExecutionContext, state: StateStoreResource, media: MediaStoreResource
) -> dg.AssetCheckResult:
    step = read_step(context, state.get_client(), "render_probe")
    problems, checked = [], 0
    for script in step.units("script"):
        render_id = script.result.get("render_id")
        if render_id is None:
            continue
        render = step.state.get_work_unit("render", render_id)
        if render is None:
            problems.append(f"script {script.id}: render {render_id} does not exist")
            continue
        checked += 1
        try:  # a local path to the approved bytes, whichever the backend
            path = media.store().verified_path(render.payload["uri"], render.payload["sha256"])
        except MediaProblem as exc:
            problems.append(f"render {render.id}: {exc}")
            continue
        problems += [f"render {render.id}: {p}" for p in check_render(str(path))]
    return dg.AssetCheckResult(
        passed=not problems, metadata={"problems": problems, "renders_checked": checked}
    )
