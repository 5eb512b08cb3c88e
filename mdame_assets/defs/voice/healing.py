"""Voice tracks whose file vanished or rotted after their script was voiced heal: the track
fails and the script goes back to visuals_ready in one phase (requeue_voice), and the hop sensor
runs the publishing job again, which voices it anew. Nothing is rendered from a damaged track."""

from __future__ import annotations

from mdame_assets.runtime import Step
from mdame_resources.media import MediaStoreResource


def heal_damaged_voice(step: Step, media: MediaStoreResource, *states: str) -> list[int]:
    """Requeues the voice of this partition's scripts in `states` whose track is damaged; the
    script ids."""
    store, healed = media.store(), []
    for script in step.scripts_in(*states):
        track = step.state.get_work_unit("voice_track", int(script.result["voice_track_id"]))
        if track is None:
            raise RuntimeError(f"script {script.id} names a voice track that does not exist")
        problem = store.problem(track.payload["uri"], track.payload["sha256"])
        if problem is None:
            continue
        step.state.requeue_voice(script.id, track.id, f"voice track {track.id}: {problem}")
        step.log("voice_requeued", script_id=script.id, voice_track_id=track.id, problem=problem)
        healed.append(script.id)
    return healed
