"""Clips that vanished or rotted after their script moved past planning heal: the damaged
scenes get a fresh queued job each and the script goes back to 'planned' in one phase, and the
hop sensor runs scene_clips for the partition again (a scene step per healed scene, which
claims the new job). Nothing is voiced or rendered from them."""

from __future__ import annotations

from mdame_assets.gpu_defs.clips.checks import clip_damage
from mdame_pipeline.scene_cache import SCENE_JOB_MAX_ATTEMPTS, SCENE_JOB_TYPE, scene_job
from mdame_resources.media import MediaStoreResource
from mdame_runtime.step import Step


def heal_damaged_clips(step: Step, media: MediaStoreResource, *states: str) -> list[int]:
    """Requeues the damaged scenes of this partition's scripts in `states`; the script ids."""
    store, healed = media.store(), []
    for script in step.scripts_in(*states):
        damaged = [
            (scene, damage)
            for scene in step.state.list_work_units("scene", script_id=script.id)
            if scene.state == "ready" and (damage := clip_damage(scene, store)) is not None
        ]
        if not damaged:
            continue
        step.state.requeue_scenes(
            script.id,
            [
                {
                    "scene_id": scene.id,
                    "job": scene_job(
                        scene.payload["scene_hash"],
                        scene.payload["plan"]["visual_prompt"],
                        step.dimension.palette,
                        step.dimension.visuals.engine,
                        scene.payload.get("chain"),  # the chain its hash was made with
                    ),
                }
                for scene, _ in damaged
            ],
            "; ".join(damage for _, damage in damaged),
            SCENE_JOB_TYPE,
            SCENE_JOB_MAX_ATTEMPTS,
            str(step.partition.key),
        )
        step.log("clips_requeued", script_id=script.id, scenes=[s.id for s, _ in damaged])
        healed.append(script.id)
    return healed
