"""Quality gate: every voiced script has an audible voice track in the media store, with the
bytes that were timed and captioned (a file replaced since is caught here)."""

import dagster as dg

from mdame_assets.defs.voice.assets import voice_tracks
from mdame_domain.media_store import MediaProblem
from mdame_domain.probe import mean_volume_db
from mdame_pipeline.lifecycle import script_states
from mdame_resources.media import MediaStoreResource
from mdame_resources.state import StateStoreResource
from mdame_runtime.step import read_step

MIN_MEAN_VOLUME_DB = -40.0


@dg.asset_check(
    asset=voice_tracks,
    blocking=True,
    description="Every voiced script's voice track is in the media store with the bytes that "
    f"were timed and captioned, longer than 0 s and louder than {MIN_MEAN_VOLUME_DB:g} dB mean "
    "volume. Blocking: renders and publications wait and the publishing run fails (a "
    "run_failure alert). When it fails, the problems name each script: a file that vanished "
    "or changed is voiced again by the next publishing run, which the publishing sensor "
    "requests; a quiet one is not voiced again: check the voice provider (`mdame doctor`).",
)
def voice_present(
    context: dg.AssetCheckExecutionContext, state: StateStoreResource, media: MediaStoreResource
) -> dg.AssetCheckResult:
    step = read_step(context, state.get_client(), "voice_present")
    problems, volumes = [], {}
    voiced = script_states(step.state, "voiced")
    for script in step.units("script"):
        if script.state not in voiced:
            continue
        track = step.state.get_work_unit("voice_track", int(script.result["voice_track_id"]))
        if track is None:
            problems.append(f"script {script.id}: no voice file")
            continue
        try:  # a local path to the bytes that were timed and captioned, whichever the backend
            path = media.store().verified_path(track.payload["uri"], track.payload["sha256"])
        except MediaProblem as exc:
            problems.append(f"script {script.id}: voice {exc}")
            continue
        volumes[str(script.id)] = volume = mean_volume_db(str(path))
        if volume <= MIN_MEAN_VOLUME_DB or track.payload["duration_s"] <= 0:
            problems.append(f"script {script.id}: voice too quiet ({volume:.1f} dB)")
    return dg.AssetCheckResult(
        passed=not problems, metadata={"problems": problems, "mean_volume_db": volumes}
    )
