"""Renders whose file vanished or rotted before anything was published from them heal: the
render fails and the script goes back to voiced in one phase (requeue_render), and the hop
sensor runs the publishing job again, which renders it anew. Once a publication names the
render's bytes it is never remade (a new render need not be byte-identical): the damage is
logged and left to the blocking render_probe check, which names it and holds publishing back."""

from __future__ import annotations

from mdame_assets.runtime import Step
from mdame_core.state import StateConflict
from mdame_resources.media import MediaStoreResource


def heal_damaged_renders(step: Step, media: MediaStoreResource, *states: str) -> list[int]:
    """Requeues the render of this partition's scripts in `states` whose file is damaged; the
    script ids."""
    store, healed = media.store(), []
    for script in step.scripts_in(*states):
        render = step.state.get_work_unit("render", int(script.result["render_id"]))
        if render is None:
            raise RuntimeError(f"script {script.id} names a render that does not exist")
        problem = store.problem(render.payload["uri"], render.payload["sha256"])
        if problem is None:
            continue
        try:
            step.state.requeue_render(script.id, render.id, f"render {render.id}: {problem}")
        except StateConflict as exc:  # a publication names it
            step.log("render_damaged", script_id=script.id, render_id=render.id, refused=str(exc))
            continue
        step.log("render_requeued", script_id=script.id, render_id=render.id, problem=problem)
        healed.append(script.id)
    return healed
