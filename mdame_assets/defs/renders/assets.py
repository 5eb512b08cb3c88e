"""renders: one ffmpeg invocation per script: scene clips, voice and burned-in captions."""

from pathlib import Path
from typing import Any

import dagster as dg

from mdame_assets.defs.clips.healing import heal_damaged_clips
from mdame_assets.defs.voice.assets import voice_tracks
from mdame_assets.lifecycle import scripts_entering
from mdame_assets.media_healing import heal_damaged_renders
from mdame_assets.partitions import content_partitions
from mdame_assets.runtime import Step, pipeline_step
from mdame_assets.work import series_key
from mdame_core.state import StateStore, WorkUnit
from mdame_domain.captions import Cue, ass_subtitles, caption_cues
from mdame_domain.probe import MediaAnalysis, analyze_media
from mdame_domain.render import (
    RenderInput,
    render_inputs_digest,
    render_video,
    scene_durations,
)
from mdame_domain.render_quality import (
    SCENES,
    QualityRules,
    media_problems,
    rules_for,
    scene_problems,
)
from mdame_domain.voice import WordTiming
from mdame_resources.media import MediaStoreResource
from mdame_resources.providers.safety import SafetyClassifierResource
from mdame_resources.state import StateStoreResource

REVIEW_CHECK = "technical"
CONTENT_REVIEW = "content"
# Bump when what the content review reads or asks changes.
CONTENT_POLICY_VERSION = "render-content/1"


def _render_inputs(
    step: Step, script: WorkUnit, media: MediaStoreResource, work: Path
) -> tuple[RenderInput, str]:
    """What ffmpeg needs, and the digest of those inputs' contents."""
    store = media.store()
    voice = step.state.get_work_unit("voice_track", int(script.result["voice_track_id"]))
    if voice is None:
        raise dg.Failure(f"script {script.id} names voice track {script.result['voice_track_id']}")
    scenes = sorted(
        step.state.list_work_units("scene", script_id=script.id),
        key=lambda s: s.payload["scene_index"],
    )
    words = [WordTiming(**w) for w in voice.payload["words"]]
    durations = scene_durations(
        [s.payload["plan"]["duration_weight"] for s in scenes], voice.payload["duration_s"]
    )
    starts = [sum(durations[:i]) for i in range(len(durations))]
    titles = [
        Cue(start, start + length, scene.payload["plan"]["on_screen_text"])
        for scene, start, length in zip(scenes, starts, durations, strict=True)
    ]
    subtitles_text = ass_subtitles(caption_cues(words), titles=titles)
    subtitles = work / "captions.ass"
    subtitles.write_text(subtitles_text, encoding="utf-8")
    inputs = RenderInput(
        clip_paths=[str(store.verified_path(s.result["uri"], s.result["sha256"])) for s in scenes],
        scene_durations_s=durations,
        voice_wav=str(store.verified_path(voice.payload["uri"], voice.payload["sha256"])),
        subtitles_ass=str(subtitles),
        out_path=str(work / "video.mp4"),
    )
    digest = render_inputs_digest(
        [s.result["sha256"] for s in scenes],
        inputs.scene_durations_s,
        voice.payload["sha256"],
        subtitles_text,
        inputs.width,
        inputs.height,
        inputs.fps,
    )
    return inputs, digest


def _rendered_file(
    step: Step, script: WorkUnit, media: MediaStoreResource, key: str
) -> tuple[Any, str, list[float]]:
    """The stored MP4 for this script (reused when the same inputs were rendered before), the
    digest of its inputs and the scene durations it was rendered with."""
    work = media.scratch_dir(f"render-{key[:16]}")
    inputs, digest = _render_inputs(step, script, media, work)
    store = media.store()
    stored = store.find_derived("render", digest)
    if stored is None:
        stored = store.put_file(render_video(inputs), ".mp4")
        store.remember_derived("render", digest, stored)
    return stored, digest, list(inputs.scene_durations_s)


def planned_scene_durations(state: StateStore, script: WorkUnit) -> list[float]:
    """The scene plan's durations for a script: its scenes' weights over the voice's length."""
    voice = state.get_work_unit("voice_track", int(script.result["voice_track_id"]))
    if voice is None:
        raise dg.Failure(f"script {script.id} names voice track {script.result['voice_track_id']}")
    scenes = sorted(
        state.list_work_units("scene", script_id=script.id),
        key=lambda s: s.payload["scene_index"],
    )
    return scene_durations(
        [s.payload["plan"]["duration_weight"] for s in scenes], voice.payload["duration_s"]
    )


def technical_problems(
    analysis: MediaAnalysis, rules: QualityRules, planned: list[float], used: list[float] | None
) -> dict[str, list[str]]:
    """Per quality check, the problems of one analysed render (empty lists: it passes)."""
    found = media_problems(analysis, rules)
    found[SCENES] = scene_problems(
        planned, used, analysis.video_duration_s, rules.scene_tolerance_s
    )
    return found


def on_screen_and_spoken_text(state: StateStore, script: WorkUnit) -> str:
    """What the video says and shows: the title (the hook), the spoken script (the captions
    are its words) and every scene's on-screen text."""
    written = script.payload["script"]
    scenes = sorted(
        state.list_work_units("scene", script_id=script.id),
        key=lambda s: s.payload["scene_index"],
    )
    return "\n".join(
        [written["hook"], written["text"], *(s.payload["plan"]["on_screen_text"] for s in scenes)]
    )


def _content_review(
    step: Step, script: WorkUnit, safety: SafetyClassifierResource
) -> dict[str, Any]:
    """The safety of the final spoken and on-screen text, through the pipeline's classifier."""
    decision = safety.decide(
        on_screen_and_spoken_text(step.state, script),
        step.dimension.safety_profile,
        step.dimension.blocked_terms,
        step.paid_context(),
    )
    problems = (
        []
        if decision.verdict == "allow"
        else [f"{CONTENT_REVIEW}: {decision.rule}: {'; '.join(decision.reasons)}"]
    )
    acceptance = {
        "policy": CONTENT_POLICY_VERSION,
        "classifier": decision.classifier,
        "safety_profile": step.dimension.safety_profile,
        "blocked_terms": list(step.dimension.blocked_terms),
    }
    return {"check_name": CONTENT_REVIEW, "problems": problems, "acceptance": acceptance}


def _render_for(
    step: Step, script: WorkUnit, media: MediaStoreResource, safety: SafetyClassifierResource
) -> dict:
    """Renders (or reuses the render of identical inputs), analyses it once, and records the
    render with its technical and content reviews (bound to its SHA-256, the digest of its
    inputs and the rules they were judged by) and the script's outcome in one phase."""
    key = series_key(step.state, script, "render", "render")
    stored, digest, used = _rendered_file(step, script, media, key)
    analysis = analyze_media(str(stored.path))
    rules = rules_for(step.dimension.duration_range_s)
    planned = planned_scene_durations(step.state, script)
    by_check = technical_problems(analysis, rules, planned, used)
    technical = [f"{name}: {p}" for name, found in by_check.items() for p in found]
    content = _content_review(step, script, safety)
    payload = {
        "script_id": script.id,
        "uri": stored.uri,
        "sha256": stored.sha256,
        "request_sha256": digest,
        "width": analysis.width,
        "height": analysis.height,
        "duration_s": round(analysis.duration_s, 3),
        # The one analysis of these bytes: the checks read it while the hash still matches.
        "probe": analysis.to_json(),
        "scene_durations_s": [round(d, 4) for d in used],
        "problems": technical + content["problems"],
    }
    reviews = [
        {
            "check_name": REVIEW_CHECK,
            "problems": technical,
            "acceptance": rules.acceptance_context(),
        },
        content,
    ]
    outcome = step.state.record_reviewed_render(script.id, key, payload, reviews)
    if outcome != "rendered":
        raise dg.Failure(
            f"render of script {script.id} rejected: {payload['problems']}", allow_retries=False
        )
    return {"uri": payload["uri"], "duration_s": payload["duration_s"]}


@dg.asset(
    partitions_def=content_partitions,
    group_name="publishing",
    deps=[voice_tracks],
    kinds={"ffmpeg"},
)
def renders(
    context: dg.AssetExecutionContext,
    state: StateStoreResource,
    media: MediaStoreResource,
    safety: SafetyClassifierResource,
) -> dg.MaterializeResult:
    """1080x1920 H.264/AAC MP4s with captions in the safe zone, reviewed against their hash."""
    with pipeline_step(context, state.get_client(), "renders") as step:
        # A clip that vanished or rotted since voicing goes back to the GPU queue first; a
        # render that did so before anything was published from it is rendered again now.
        healed = heal_damaged_clips(step, media, "voiced", "render_queued")
        rerendered = heal_damaged_renders(step, media)
        done = {
            str(script.id): _render_for(step, script, media, safety)
            for script in scripts_entering(step, "voiced", "render_queued")
        }
        preview = next(iter(done.values()), {}).get("uri", "")
    return dg.MaterializeResult(
        metadata={
            "rendered_now": len(done),
            "clips_requeued": healed,
            "renders_requeued": rerendered,
            "renders": done,
            "preview": dg.MetadataValue.path(str(media.store().path_for(preview)))
            if preview
            else "",
        }
    )
