"""renders: one video encode per script: scene clips, voice over a ducked music bed (two-pass
loudnorm: an audio-only measurement, then the encode), burned-in captions and hook; the
thumbnail; and the contact sheet (a frame of every scene, labelled), shown in the
materialization."""

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import dagster as dg

from mdame_assets.defs.media_healing import heal_damaged_renders
from mdame_assets.defs.voice.assets import voice_tracks
from mdame_assets.gpu_defs.clips.healing import heal_damaged_clips
from mdame_assets.partitions import content_partitions
from mdame_core import settings
from mdame_core.state import StateStore, WorkUnit
from mdame_domain.audio_mix import MAX_TRUE_PEAK_DBTP, TARGET_LUFS, MusicTrack, music_bed
from mdame_domain.captions import build_captions
from mdame_domain.contact_sheet import (
    SHEET_RECIPE_VERSION,
    SheetScene,
    inline_markdown,
    render_contact_sheet,
    sheet_scenes,
)
from mdame_domain.encoders import video_encoder
from mdame_domain.media_profile import CAPTION_FRAME, media_profile
from mdame_domain.media_store import StoredMedia, parse_media_uri
from mdame_domain.probe import PictureStats, analyze_media
from mdame_domain.render import (
    RenderInput,
    output_seconds,
    render_inputs_digest,
    render_media,
)
from mdame_domain.render_quality import rules_for, technical_problems
from mdame_domain.scene_cuts import (
    CUTS_VERSION,
    CutReading,
    cut_windows,
    measure_cuts,
    read_cuts,
    thumbnails_by_frame,
)
from mdame_domain.scene_spans import SceneTiming, scene_spans
from mdame_domain.thumbnail import THUMBNAIL_AT_S, THUMBNAIL_RECIPE_VERSION, render_thumbnail
from mdame_domain.voice import WordTiming
from mdame_pipeline.work import series_key
from mdame_resources.media import MediaStoreResource, name_stored
from mdame_resources.providers.safety import SafetyClassifierResource
from mdame_resources.state import StateStoreResource
from mdame_runtime.executors import RENDER_STEP_TAGS
from mdame_runtime.step import Step, pipeline_step, scripts_entering

REVIEW_CHECK = "technical"
CONTENT_REVIEW = "content"
# Bump when what the content review reads or asks changes.
CONTENT_POLICY_VERSION = "render-content/1"
# How long the hook stays on screen: while it is said, within these bounds (seconds).
HOOK_MIN_ENV = "MDAME_HOOK_MIN_S"
HOOK_MAX_ENV = "MDAME_HOOK_MAX_S"


def scene_timing(state: StateStore, script: WorkUnit) -> SceneTiming:
    """Each scene's span of the script's voice track: from its first spoken word to the next
    scene's (mdame_domain/scene_spans.py)."""
    voice = state.get_work_unit("voice_track", int(script.result["voice_track_id"]))
    if voice is None:
        raise dg.Failure(f"script {script.id} names voice track {script.result['voice_track_id']}")
    scenes = sorted(
        state.list_work_units("scene", script_id=script.id),
        key=lambda s: s.payload["scene_index"],
    )
    return scene_spans(
        [s.payload["plan"]["narration"] for s in scenes],
        [WordTiming(**w) for w in voice.payload["words"]],
        float(voice.payload["duration_s"]),
        weights=[s.payload["plan"]["duration_weight"] for s in scenes],
    )


def _render_inputs(
    step: Step, script: WorkUnit, media: MediaStoreResource, work: Path
) -> tuple[RenderInput, str, MusicTrack, list[dict], tuple[list[SheetScene], str]]:
    """What ffmpeg needs (the scenes cut on their words, the frames around each cut kept as
    thumbnails for the scene_timing reading), the digest of those inputs' contents, the music
    bed, the caption boxes, and the contact sheet's tiles with the digest of what it is made
    from."""
    store = media.store()
    voice = step.state.get_work_unit("voice_track", int(script.result["voice_track_id"]))
    if voice is None:
        raise dg.Failure(f"script {script.id} names voice track {script.result['voice_track_id']}")
    scenes = sorted(
        step.state.list_work_units("scene", script_id=script.id),
        key=lambda s: s.payload["scene_index"],
    )
    words = [WordTiming(**w) for w in voice.payload["words"]]
    durations = scene_timing(step.state, script).durations_s
    # No scene titles: the title is the platform's, and the captions are the text to read.
    captions = build_captions(
        words,
        step.dimension.captions,
        hook=script.payload["script"]["hook"],
        hook_min_s=settings.get(HOOK_MIN_ENV),
        hook_max_s=settings.get(HOOK_MAX_ENV),
        width=CAPTION_FRAME[0],
        height=CAPTION_FRAME[1],
    )
    subtitles_text = captions.ass
    subtitles = work / "captions.ass"
    subtitles.write_text(subtitles_text, encoding="utf-8")
    # The bed: the dimension's licensed library, or a pad generated for this script.
    music = step.dimension.music
    bed = music_bed(
        music.library, f"{step.dimension.slug}:{script.id}", voice.payload["duration_s"], work
    )
    profile = media_profile()
    inputs = RenderInput(
        clip_paths=[str(store.verified_path(s.result["uri"], s.result["sha256"])) for s in scenes],
        scene_durations_s=durations,
        voice_wav=str(store.verified_path(voice.payload["uri"], voice.payload["sha256"])),
        subtitles_ass=str(subtitles),
        out_path=str(work / "video.mp4"),
        width=profile.width,
        height=profile.height,
        music_path=bed.path,
        music_volume_db=music.volume_db,
        encoder=video_encoder(),
    )
    windows = cut_windows(_cuts(inputs.scene_durations_s), output_seconds(inputs), inputs.fps)
    inputs = replace(
        inputs,
        thumb_ranges=[(w.first, w.last) for w in windows],
        thumbs_path=str(work / "cuts.rgb"),
    )
    digest = render_inputs_digest(
        [s.result["sha256"] for s in scenes],
        inputs.scene_durations_s,
        voice.payload["sha256"],
        subtitles_text,
        inputs.width,
        inputs.height,
        inputs.fps,
        music_sha256=bed.sha256,
        music_volume_db=inputs.music_volume_db,
        encoder=inputs.encoder,
    )
    tiles = sheet_scenes(
        [int(s.payload["scene_index"]) for s in scenes],
        inputs.scene_durations_s,
        [s.result for s in scenes],
    )
    # The sheet is of the clips, labelled: a scene judged again gets a new one.
    made_of = [
        SHEET_RECIPE_VERSION,
        [s.result["sha256"] for s in scenes],
        [t.to_json() for t in tiles],
    ]
    sheet_digest = hashlib.sha256(json.dumps(made_of).encode()).hexdigest()
    boxes = [box.to_json() for box in captions.boxes]
    return inputs, digest, bed, boxes, (tiles, sheet_digest)


def _cuts(durations_s: Sequence[float]) -> list[float]:
    """Where each scene after the first starts, from the scenes' durations."""
    cuts, elapsed = [], 0.0
    for duration in list(durations_s)[:-1]:
        elapsed += duration
        cuts.append(elapsed)
    return cuts


def _measured_cuts(
    inputs: RenderInput, boxes: list[dict], video_path: str, thumbs: Path | None
) -> list[CutReading]:
    """Where the render cuts to each scene: read from the thumbnails of the frames it encoded,
    or, for a render of the same inputs found stored, from its decoded file."""
    cuts, fps = _cuts(inputs.scene_durations_s), inputs.fps
    if thumbs is not None and thumbs.is_file():
        windows = cut_windows(cuts, output_seconds(inputs), fps)
        shown = thumbnails_by_frame(thumbs.read_bytes(), windows)
        return read_cuts(shown, windows, inputs.clip_paths, fps, boxes, CAPTION_FRAME)
    return measure_cuts(
        video_path, inputs.clip_paths, cuts, output_seconds(inputs), fps, boxes, CAPTION_FRAME
    )


@dataclass(frozen=True)
class RenderedFile:
    """A script's stored render, thumbnail and contact sheet, what they were made from, and
    where the captions are drawn."""

    video: StoredMedia
    thumbnail: StoredMedia
    contact_sheet: StoredMedia
    sheet_tiles: list[SheetScene]
    inputs: RenderInput
    inputs_digest: str
    bed: MusicTrack
    caption_boxes: list[dict]
    # The picture measured as it was encoded; None for a render of the same inputs reused.
    picture: PictureStats | None
    # Where it cuts to each scene after the first, measured on its frames.
    cuts: list[CutReading]


def _rendered_file(
    step: Step, script: WorkUnit, media: MediaStoreResource, key: str
) -> RenderedFile:
    """The stored MP4, thumbnail and contact sheet for this script: reused when the same
    inputs were rendered before."""
    # The captions, the generated bed, ffmpeg's output and the thumbnail are scratch: the
    # stored copies are what later steps read, so the folder goes whatever happens.
    with media.scratch_space(f"render-{key[:16]}") as work:
        inputs, digest, bed, boxes, (tiles, sheet_digest) = _render_inputs(
            step, script, media, work
        )
        store = media.store()
        stored = store.find_derived("render", digest)
        picture, thumbs = None, None
        if stored is None:
            outcome = render_media(inputs)
            stored = store.put_file(outcome.path, ".mp4", registry=step.state)
            store.remember_derived("render", digest, stored)
            picture, thumbs = outcome.picture, Path(str(inputs.thumbs_path))
        cuts = _measured_cuts(inputs, boxes, str(stored.path), thumbs)
        title = script.payload["script"]["hook"]
        thumb_digest = hashlib.sha256(
            json.dumps([THUMBNAIL_RECIPE_VERSION, stored.sha256, title]).encode()
        ).hexdigest()
        thumbnail = store.find_derived("thumbnail", thumb_digest)
        if thumbnail is None:
            # The first scene's own picture, before captions are burned in: the title is then
            # the only text on the thumbnail (the render's frame already shows hook and
            # captions).
            at_s = min(THUMBNAIL_AT_S, inputs.scene_durations_s[0] / 2)
            jpeg = render_thumbnail(inputs.clip_paths[0], title, str(work / "thumbnail.jpg"), at_s)
            thumbnail = store.put_file(jpeg, ".jpg", registry=step.state)
            store.remember_derived("thumbnail", thumb_digest, thumbnail)
        sheet = store.find_derived("contact_sheet", sheet_digest)
        if sheet is None:
            jpeg = render_contact_sheet(inputs.clip_paths, tiles, str(work / "sheet.jpg"), work)
            sheet = store.put_file(jpeg, ".jpg", registry=step.state)
            store.remember_derived("contact_sheet", sheet_digest, sheet)
    return RenderedFile(stored, thumbnail, sheet, tiles, inputs, digest, bed, boxes, picture, cuts)


def planned_scene_durations(state: StateStore, script: WorkUnit) -> list[float]:
    """The scene plan's durations for a script: each scene's span of the voice track."""
    return scene_timing(state, script).durations_s


def on_screen_and_spoken_text(state: StateStore, script: WorkUnit) -> str:
    """What the video says and shows: the title (the hook), the spoken script (the captions
    are its words) and every scene's on-screen phrase (no longer drawn, still reviewed: it is
    the plan's words for the scene)."""
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
    rendered = _rendered_file(step, script, media, key)
    stored, digest, inputs = rendered.video, rendered.inputs_digest, rendered.inputs
    used = list(inputs.scene_durations_s)
    analysis = analyze_media(str(stored.path), rendered.picture)
    rules = rules_for(step.dimension.duration_range_s, media_profile())
    timing = scene_timing(step.state, script)
    planned = timing.durations_s
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
        # Each scene's span of the voice (its words' start, and the cut where the render's
        # floor moved it), how the cuts were placed, and where the frames show them: the
        # scene_timing check reads these while the hash matches.
        "scene_spans": [span.to_json() for span in timing.spans],
        "scene_timing": timing.to_json(),
        "scene_cuts": {
            "version": CUTS_VERSION,
            "sha256": stored.sha256,
            "readings": [reading.to_json() for reading in rendered.cuts],
        },
        "problems": technical + content["problems"],
        # Where each caption and the hook are drawn, for the caption_layout and text_on_screen
        # checks.
        "caption_boxes": rendered.caption_boxes,
        "caption_frame": list(CAPTION_FRAME),
        # The bed and its license, the encoder, the thumbnail.
        "music": {**rendered.bed.payload(), "volume_db": inputs.music_volume_db},
        "encoder": inputs.encoder.name,
        "loudness_target": {
            "integrated_lufs": TARGET_LUFS,
            "max_true_peak_dbtp": MAX_TRUE_PEAK_DBTP,
        },
        "thumbnail_uri": rendered.thumbnail.uri,
        "thumbnail_sha256": rendered.thumbnail.sha256,
        "contact_sheet_uri": rendered.contact_sheet.uri,
        "contact_sheet_sha256": rendered.contact_sheet.sha256,
        "contact_sheet_scenes": [t.to_json() for t in rendered.sheet_tiles],
    }
    reviews = [
        {
            "check_name": REVIEW_CHECK,
            "problems": technical,
            "acceptance": rules.acceptance_context(),
        },
        content,
    ]
    # Housekeeping may have collected a render or thumbnail found already stored (a memo's)
    # while this one was reviewed: stored again from the copies still at hand (else the step's
    # retry renders it again).
    outcome = name_stored(
        step.state,
        media.store(),
        lambda: step.state.record_reviewed_render(script.id, key, payload, reviews),
        [
            (item.path, parse_media_uri(item.uri)[1])
            for item in (stored, rendered.thumbnail, rendered.contact_sheet)
            if item.path.is_file()
        ],
    )
    if outcome != "rendered":
        raise dg.Failure(
            f"render of script {script.id} rejected: {payload['problems']}", allow_retries=False
        )
    return {
        "uri": payload["uri"],
        "duration_s": payload["duration_s"],
        "contact_sheet_uri": payload["contact_sheet_uri"],
    }


def _sheets_metadata(media: MediaStoreResource, done: dict[str, dict]) -> dict[str, Any]:
    """The contact sheets of the renders made now: the first's path, and every sheet inline
    (a data URI each, while under contact_sheet.INLINE_MAX_BYTES; else named by its path)."""
    if not done:
        return {}
    store = media.store()
    lines = []
    for script_id, entry in done.items():
        uri = entry["contact_sheet_uri"]
        jpeg = store.verified_path(uri, parse_media_uri(uri)[0]).read_bytes()
        image = inline_markdown(jpeg, f"script {script_id}")
        lines += [f"**script {script_id}**", "", image or f"`{store.location(uri)}`", ""]
    first = next(iter(done.values()))["contact_sheet_uri"]
    return {
        "contact_sheet": dg.MetadataValue.path(store.location(first)),
        "contact_sheets": dg.MetadataValue.md("\n".join(lines)),
    }


@dg.asset(
    partitions_def=content_partitions,
    group_name="publishing",
    deps=[voice_tracks],
    kinds={"ffmpeg"},
    op_tags=RENDER_STEP_TAGS,
)
def renders(
    context: dg.AssetExecutionContext,
    state: StateStoreResource,
    media: MediaStoreResource,
    safety: SafetyClassifierResource,
) -> dg.MaterializeResult:
    """1080x1920 H.264/AAC MP4s with captions in the safe zone, reviewed against their hash,
    and a contact sheet of each (a frame of every scene) shown here."""
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
            "preview": dg.MetadataValue.path(media.store().location(preview)) if preview else "",
            **_sheets_metadata(media, done),
        }
    )
