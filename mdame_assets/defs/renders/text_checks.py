"""Quality gate: at most two text blocks on screen at any moment (the hook while it is said,
the word-timed captions), measured on the rendered frames.

Each approved render's file (its approved bytes) is decoded at sampled frames and the text
blocks they show are found (mdame_domain.captions.onscreen: glyphs of the dimension's caption
colour in a black outline, holding still while the picture moves). Blocking: it fails when a
frame shows more than two blocks, when text is drawn where the render recorded no caption box,
when the recorded layout itself puts more than two boxes on screen at once, or when no frame
shows the recorded text at all (the captions were never burned in, or the measurement cannot
vouch for the render).
"""

from typing import Any

import dagster as dg

from mdame_assets.defs.renders.assets import renders
from mdame_domain.captions import (
    MAX_TEXT_BLOCKS,
    fill_colour,
    read_text_on_screen,
    recorded_block_problems,
    text_on_screen_problems,
    text_on_screen_stats,
)
from mdame_domain.media_store import MediaProblem
from mdame_domain.mediatools import MediaToolError
from mdame_resources.media import MediaStoreResource
from mdame_resources.state import StateStoreResource
from mdame_runtime.executors import RENDER_STEP_TAGS
from mdame_runtime.step import read_step

CHECK = "text_on_screen"
RENDER_FPS = 24  # renders made before the payload recorded their analysis


@dg.asset_check(
    asset=renders,
    blocking=True,
    description=f"At most {MAX_TEXT_BLOCKS} text blocks on screen at once (the hook, then the "
    "captions), none outside the recorded caption boxes, and the recorded text seen at least "
    "once: measured on the rendered frames. Blocking: the partition's publications wait, with "
    "a check_blocked alert. When it fails, per_render shows the blocks found in each sampled "
    "frame: text outside the boxes is most often a scene picture with lettering in the caption "
    "colour ringed in black (see the render's contact sheet); report any other case.",
    op_tags=RENDER_STEP_TAGS,
)
def text_on_screen(
    context: dg.AssetCheckExecutionContext, state: StateStoreResource, media: MediaStoreResource
) -> dg.AssetCheckResult:
    step = read_step(context, state.get_client(), CHECK)
    store = media.store()
    problems: list[str] = []
    per_render: dict[str, dict[str, Any]] = {}
    for script in step.units("script"):
        render_id = script.result.get("render_id")
        render = step.state.get_work_unit("render", render_id) if render_id else None
        if render is None or render.state != "approved":
            continue  # render_probe names a missing render; others are never published
        payload = render.payload
        boxes = payload.get("caption_boxes") or []
        found = recorded_block_problems(boxes)
        try:
            path = store.verified_path(payload["uri"], payload["sha256"])
            frame = payload.get("caption_frame") or [payload["width"], payload["height"]]
            probe = payload.get("probe") or {}
            readings = read_text_on_screen(
                str(path),
                boxes,
                payload.get("scene_durations_s") or [],
                float(payload["duration_s"]),
                int(payload["width"]),
                int(payload["height"]),
                round(float(probe.get("fps") or RENDER_FPS)),
                (int(frame[0]), int(frame[1])),
                fill=fill_colour(step.dimension.captions.primary),
            )
        except (MediaProblem, MediaToolError) as exc:
            found.append(f"its frames could not be read: {exc}")
            per_render[str(render.id)] = {"passed": False}
        else:
            found += text_on_screen_problems(readings)
            per_render[str(render.id)] = {
                **text_on_screen_stats(readings),
                "passed": not found,
                "blocks_per_frame": {f"{r.at_s:.2f}s": r.count for r in readings},
            }
        problems += [f"render {render.id}: {p}" for p in found]
    if problems:  # blocking: the partition's publication waits
        step.alert("check_blocked", f"{CHECK} failed: {problems[0]}")
    numbers = [r for r in per_render.values() if "max_blocks_seen" in r]
    return dg.AssetCheckResult(
        passed=not problems,
        metadata={
            "problems": problems,
            "renders_checked": len(per_render),
            "max_blocks_seen": max((r["max_blocks_seen"] for r in numbers), default=0),
            "blocks_outside_boxes": sum(r["blocks_outside_boxes"] for r in numbers),
            "frames_read": sum(r["frames_read"] for r in numbers),
            "per_render": dg.MetadataValue.json(per_render),
        },
    )
