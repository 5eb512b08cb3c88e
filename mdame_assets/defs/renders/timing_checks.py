"""Quality gate: each scene's clip covers its own words. Blocking: it fails a render where a
scene's clip starts more than MDAME_SCENE_TIMING_TOLERANCE_S (0.25 s) from the start of its
first spoken word, by the voice track's word timings.

Where the render cuts is measured on its frames against the scene clips
(mdame_domain/scene_cuts.py): read as the render encoded them and recorded in its payload with
its SHA-256, so the approved bytes are measured once; a file whose bytes are not the ones
measured (or an older render's) is decoded here. Where the words start is worked out again
from the scenes' narrations and the voice's timed words (mdame_domain/scene_spans.py), not
taken from the render. A render whose cuts the words could not place (another text was spoken)
is reported, not failed: there is no word to hold it to.
"""

from typing import Any

import dagster as dg

from mdame_assets.defs.renders.assets import renders, scene_timing
from mdame_core import settings
from mdame_core.state import WorkUnit
from mdame_domain.media_store import MediaProblem, MediaStore
from mdame_domain.mediatools import MediaToolError
from mdame_domain.scene_cuts import (
    CUTS_VERSION,
    CutReading,
    cut_offset,
    cut_problems,
    measure_cuts,
)
from mdame_resources.media import MediaStoreResource
from mdame_resources.state import StateStoreResource
from mdame_runtime.executors import RENDER_STEP_TAGS
from mdame_runtime.step import Step, read_step

CHECK = "scene_timing"
TOLERANCE_ENV = "MDAME_SCENE_TIMING_TOLERANCE_S"
RENDER_FPS = 24  # renders made before the payload recorded their analysis


def _readings(
    step: Step, store: MediaStore, script: WorkUnit, render: WorkUnit, expected: list[float]
) -> tuple[list[CutReading], bool]:
    """The render's cuts as measured on the approved bytes (True: measured here, now)."""
    payload = render.payload
    path = store.verified_path(payload["uri"], payload["sha256"])
    recorded = payload.get("scene_cuts")
    if (
        isinstance(recorded, dict)
        and recorded.get("version") == CUTS_VERSION
        and recorded.get("sha256") == payload["sha256"]
    ):
        try:
            return [CutReading.from_json(r) for r in recorded["readings"]], False
        except (KeyError, TypeError, ValueError):
            pass  # unreadable: measured again
    scenes = sorted(
        step.state.list_work_units("scene", script_id=script.id),
        key=lambda s: s.payload["scene_index"],
    )
    clips = [str(store.verified_path(s.result["uri"], s.result["sha256"])) for s in scenes]
    probe = payload.get("probe") or {}
    frame = payload.get("caption_frame") or [payload["width"], payload["height"]]
    readings = measure_cuts(
        str(path),
        clips,
        expected,
        float(payload["duration_s"]),
        round(float(probe.get("fps") or RENDER_FPS)),
        payload.get("caption_boxes") or [],
        (int(frame[0]), int(frame[1])),
    )
    return readings, True


@dg.asset_check(
    asset=renders,
    name=CHECK,
    blocking=True,
    description="Each scene's clip starts on its first spoken word (the voice's word timings), "
    f"within {TOLERANCE_ENV} (default {settings.default(TOLERANCE_ENV)} s): measured on the "
    "rendered frames; cuts the words could not place are reported, not failed. Blocking: the "
    "partition's publications wait, with a check_blocked alert. When it fails, per_render "
    "shows each cut's word time and where its clip was found: a miss is a render or "
    "measurement fault, "
    f"so report it; raise {TOLERANCE_ENV} only to accept such offsets.",
    op_tags=RENDER_STEP_TAGS,
)
def scene_timing_check(
    context: dg.AssetCheckExecutionContext, state: StateStoreResource, media: MediaStoreResource
) -> dg.AssetCheckResult:
    step = read_step(context, state.get_client(), CHECK)
    tolerance = settings.get(TOLERANCE_ENV)
    store = media.store()
    problems: list[str] = []
    per_render: dict[str, dict[str, Any]] = {}
    measured_now = 0
    for script in step.units("script"):
        render_id = script.result.get("render_id")
        render = step.state.get_work_unit("render", render_id) if render_id else None
        if render is None or render.state != "approved":
            continue  # render_probe names a missing render; others are never published
        timing = scene_timing(step.state, script)
        words = timing.word_cuts_s
        firsts = [span.first_word for span in timing.spans[1:]]
        entry: dict[str, Any] = {"method": timing.method, "notes": list(timing.notes)}
        try:
            readings, now = _readings(step, store, script, render, timing.cuts_s)
        except (MediaProblem, MediaToolError) as exc:
            found = [f"its cuts could not be measured: {exc}"]
        else:
            measured_now += now
            offsets = [cut_offset(r, w) for r, w in zip(readings, words, strict=False)]
            entry["cuts"] = [
                {"scene": r.scene, "words_s": round(w, 3), "found_s": r.found_s,
                 "off_s": None if o is None else round(o, 3)}
                for r, w, o in zip(readings, words, offsets, strict=False)
            ]  # fmt: skip
            entry["worst_offset_s"] = max((o for o in offsets if o is not None), default=0.0)
            # Cuts the words could not place hold the render to nothing: reported, not failed.
            found = cut_problems(readings, words, tolerance, firsts)
            if timing.method != "words":
                entry["unjudged"] = found
                found = []
        entry["passed"] = not found
        per_render[str(render.id)] = entry
        problems += [f"render {render.id}: {p}" for p in found]
    if problems:  # blocking: the partition's publication waits
        step.alert("check_blocked", f"{CHECK} failed: {problems[0]}")
    worst = [r["worst_offset_s"] for r in per_render.values() if "worst_offset_s" in r]
    return dg.AssetCheckResult(
        check_name=CHECK,
        passed=not problems,
        metadata={
            "problems": problems,
            "renders_checked": len(per_render),
            "renders_measured_now": measured_now,
            "tolerance_s": tolerance,
            "worst_offset_s": dg.MetadataValue.float(float(max(worst, default=0.0))),
            "per_render": dg.MetadataValue.json(per_render),
        },
    )
