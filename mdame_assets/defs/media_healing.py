"""Made media whose file vanished or rotted after its script moved on heals: the damaged unit
fails and the script goes back to the stage that makes it, in one phase, and that stage (in
this run or the next the hop sensor requests) makes it again under the next key of its series.

- a voice track, before its render was made (requeue_voice: back to visuals_ready);
- a render, before anything was published from it (requeue_render: back to voiced). Once a
  publication names the render's bytes it is never remade (a new render need not be
  byte-identical): the damage is logged and left to the blocking render_probe check, which
  names it and holds publishing back.

A render made before its reviews were bound to the request and the quality rules (no
`request_sha256` in its payload) heals the same way: a database that outlived an upgrade
would otherwise hold it approved, refused at upload for its missing content review, forever.
So does one that burned scene titles in over its captions (a `title` caption box): the
text_on_screen check would hold it back forever; and one that split the voice's length over its
scenes by weight (no `scene_spans`), whose cuts the scene_timing check finds off the words.

Clips heal through the GPU queue instead (gpu_defs/clips/healing.py).
"""

from __future__ import annotations

from mdame_core.state import StateConflict
from mdame_resources.media import MediaStoreResource
from mdame_runtime.step import Step


def _heal(step: Step, media: MediaStoreResource, kind: str, states: tuple[str, ...]) -> list[int]:
    """The scripts in `states` whose current `kind` unit was damaged and is now requeued."""
    store, healed = media.store(), []
    for script in step.scripts_in(*states):
        unit_id = int(script.result[f"{kind}_id"])
        unit = step.state.get_work_unit(kind, unit_id)
        if unit is None:
            raise RuntimeError(f"script {script.id} names a {kind} {unit_id} that does not exist")
        problem = store.problem(unit.payload["uri"], unit.payload["sha256"])
        if problem is None and kind == "render" and "request_sha256" not in unit.payload:
            problem = "made before the render quality gates and bound reviews"
        if problem is None and kind == "render" and _burns_in_titles(unit.payload):
            problem = "made with scene titles burned in over the captions"
        if problem is None and kind == "render" and "scene_spans" not in unit.payload:
            problem = "made with the scenes cut by weight, not on their words"
        if problem is None:
            continue
        reason = f"{kind} {unit.id}: {problem}"
        try:
            if kind == "voice_track":
                step.state.requeue_voice(script.id, unit.id, reason)
            else:
                step.state.requeue_render(script.id, unit.id, reason)
        except StateConflict as exc:  # a publication names the render
            step.log(f"{kind}_damaged", script_id=script.id, unit_id=unit.id, refused=str(exc))
            continue
        step.log(f"{kind}_requeued", script_id=script.id, unit_id=unit.id, problem=problem)
        healed.append(script.id)
    return healed


def _burns_in_titles(payload: dict) -> bool:
    boxes = payload.get("caption_boxes")
    return isinstance(boxes, list) and any(
        isinstance(box, dict) and box.get("kind") == "title" for box in boxes
    )


def heal_damaged_voice(step: Step, media: MediaStoreResource) -> list[int]:
    return _heal(step, media, "voice_track", ("voiced", "render_queued"))


def heal_damaged_renders(step: Step, media: MediaStoreResource) -> list[int]:
    return _heal(step, media, "render", ("rendered", "publishing"))
