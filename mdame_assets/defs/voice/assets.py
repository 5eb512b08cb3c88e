"""voice_tracks: the narration of every script whose visuals are ready; HALT when voice fails."""

from dataclasses import asdict
from typing import Any, NoReturn

import dagster as dg

from mdame_assets.defs.hops import retry_window
from mdame_assets.defs.media_healing import heal_damaged_voice
from mdame_assets.gpu_defs.clips.checks import (
    clip_problems,
    fail_unjudged_scripts,
    holdable_states,
)
from mdame_assets.gpu_defs.clips.healing import heal_damaged_clips
from mdame_assets.partitions import content_partitions
from mdame_core import settings
from mdame_core.state import RetryNotDue, WorkUnit
from mdame_domain.timing import spent
from mdame_domain.waits import NotYet
from mdame_pipeline.work import series_key
from mdame_resources.media import MediaStoreResource, name_stored
from mdame_resources.providers.visuals import VisualsResource
from mdame_resources.providers.voice import VoiceResource, VoiceSynthesisError
from mdame_resources.state import StateStoreResource
from mdame_runtime.step import Step, pipeline_step, scripts_entering

scene_clips_key = dg.AssetKey("scene_clips")
TO_VOICE = ("visuals_ready", "voice_queued")
# A HALT for a passing cause is retried by a later run of the partition after 15 min, 30, then
# every hour, for as long as the partition's day is inside the retry window (the hop sensors'
# MDAME_RETRY_WINDOW_DAYS). The backoff lives in PostgreSQL (mdame.voice_halts).
VOICE_BACKOFF_ENV = "MDAME_VOICE_BACKOFF_S"
VOICE_BACKOFF_MAX_ENV = "MDAME_VOICE_BACKOFF_MAX_S"


def retry_halted_voice(step: Step) -> list[int]:
    """The partition's halted scripts whose backoff has expired go back to voice_queued, so
    this run voices them again (voice only: their clips and script are kept); one whose retry
    window has closed is failed with that reason. Returns the ids sent back. The database
    refuses (RetryNotDue) a retry before its time, whatever our clock says."""
    retried = []
    for halt in step.state.voice_retries_due(step.dimension_id, step.partition.day):
        try:
            now = step.state.retry_halted_voice(halt.script_id)
        except RetryNotDue:
            continue
        if now == "failed":
            step.log("voice_window_closed", script_id=halt.script_id, halts=halt.halts)
            continue
        step.log("voice_retry", script_id=halt.script_id, halts=halt.halts)
        retried.append(halt.script_id)
    return retried


def _halt(step: Step, script: WorkUnit, exc: VoiceSynthesisError) -> NoReturn:
    """Records the HALT (its reason, class, backoff and alert event commit together), tells the
    operator, and fails the step. A permanent cause fails the script at once, naming the fix;
    a passing one is retried inside the partition's retry window."""
    reason = str(exc)[:500]
    closes = retry_window().closes_at(step.partition.day)
    next_retry = step.state.halt_voice(
        script.id,
        reason,
        permanent=exc.permanent,
        backoff_s=settings.get(VOICE_BACKOFF_ENV),
        backoff_max_s=settings.get(VOICE_BACKOFF_MAX_ENV),
        retry_until=closes,
    )
    if next_retry is not None:
        retry = f"voice retried after {next_retry.isoformat()}"
    elif exc.permanent:
        retry = f"failed for good; fix: {exc.fix or 'see the cause'}"
    else:
        retry = f"not retried: the retry window closed at {closes:%Y-%m-%d %H:%M} UTC"
    step.log(
        "voice_halted",
        script_id=script.id,
        reason=reason,
        permanent=exc.permanent,
        next_retry=str(next_retry),
    )
    step.alert("halt", f"voice synthesis failed for script {script.id} ({retry}): {reason}")
    raise dg.Failure(
        f"HALT: voice synthesis failed for script {script.id} ({retry}): {exc}",
        allow_retries=False,
    ) from exc


def _voice_for(
    step: Step, script: WorkUnit, voice: VoiceResource, media: MediaStoreResource
) -> float:
    """Synthesizes the script's voice track and records it with the script voiced, in one
    phase; returns its duration. A script back here after a crash was not voiced (the phase is
    atomic), so it is synthesized again."""
    key = series_key(step.state, script, "voice_track", "voice")
    existing = step.state.get_work_unit("voice_track", key)
    if existing is not None:  # voiced before its clips were healed
        problem = media.store().problem(existing.payload["uri"], existing.payload["sha256"])
        if problem is None:  # the same narration, recorded again
            step.state.record_voice(script.id, key, existing.payload)
            return float(existing.payload["duration_s"])
        step.state.requeue_voice(script.id, existing.id, f"voice track {existing.id}: {problem}")
        key = series_key(step.state, script, "voice_track", "voice")
    wav = media.scratch_dir("voice") / f"{key}.wav"
    step.checkpoint()
    try:
        with spent("voice"):
            track = voice.synthesize(
                script.payload["script"]["text"],
                step.dimension.voice,
                wav,
                step.dimension.tts,
                step.paid_context(),
            )
    except VoiceSynthesisError as exc:
        wav.unlink(missing_ok=True)  # a partial file is scratch, not evidence
        # Quality over availability: nothing degraded is published.
        _halt(step, script, exc)
    if track.fallback_from:  # worth an operator's eye: the primary voice is failing
        step.log(
            "voice_fallback",
            script_id=script.id,
            provider=track.provider,
            reason=track.fallback_from[:500],
        )
    store = media.store()
    try:
        stored = store.put_file(wav, ".wav", registry=step.state)
        payload = {
            "script_id": script.id,
            "uri": stored.uri,
            "sha256": stored.sha256,
            "duration_s": round(track.duration_s, 3),
            "voice": step.dimension.voice,
            "provider": track.provider,
            "fallback_from": track.fallback_from,
            "words": [asdict(w) for w in track.words],
        }
        # The track stays on disk until recorded: housekeeping may collect the stored copy
        # put_file found, and then it is stored again from here.
        name_stored(
            step.state,
            store,
            lambda: step.state.record_voice(script.id, key, payload),
            [(wav, ".wav")],
        )
    finally:
        wav.unlink(missing_ok=True)
    return round(track.duration_s, 3)


@dg.asset(
    partitions_def=content_partitions,
    group_name="publishing",
    deps=[scene_clips_key],
    kinds={"espeak"},
)
def voice_tracks(
    context: dg.AssetExecutionContext,
    state: StateStoreResource,
    voice: VoiceResource,
    media: MediaStoreResource,
    visuals: VisualsResource,
) -> dg.MaterializeResult:
    """Voice tracks with word timings for the captions."""
    with pipeline_step(context, state.get_client(), "voice_tracks") as step:
        # scene_clips ran in the GPU code location: its gates are re-checked on this side. A
        # clip that vanished or rotted since sends its scenes back to the GPU queue (healing); a
        # script showing a picture the relevance gate did not pass is failed, never published;
        # any other problem stops the stage.
        retried = retry_halted_voice(step)
        healed = heal_damaged_clips(step, media, *TO_VOICE)
        # A track that vanished or rotted before its render was made is voiced again now.
        revoiced = heal_damaged_voice(step, media)
        problems = clip_problems(step, media, TO_VOICE)
        if problems:
            raise dg.Failure(
                "scene clips failed their checks: " + "; ".join(problems), allow_retries=False
            )
        unjudged = fail_unjudged_scripts(step, visuals, *holdable_states(step.state))
        durations: dict[str, float] = {}
        waiting: dict[str, str] = {}
        for script in scripts_entering(step, "visuals_ready", "voice_queued"):
            try:
                durations[str(script.id)] = _voice_for(step, script, voice, media)
            except NotYet as wait:
                # Not a failure and no HALT: the script stays voice_queued and the publishing
                # hop requests the partition again once the wait is over.
                step.log("voice_waits", script_id=script.id, reason=str(wait)[:500])
                waiting[str(script.id)] = str(wait)
    metadata: dict[str, Any] = {"waiting": waiting} if waiting else {}
    return dg.MaterializeResult(
        metadata={
            **metadata,
            "voiced_now": len(durations),
            "durations_s": durations,
            "clips_requeued": healed,
            "voice_requeued": revoiced,
            "voice_retried": retried,
            "scripts_failed_relevance": unjudged,
        }
    )
