"""Quality gate: every caption and hook box a render recorded lies inside the platform's
safe area (clear of the bottom UI, the right-hand button rail and the top header), and no two
boxes on screen at once overlap. The boxes are the layout the render burned in (see
mdame_domain.captions.build_captions)."""

import dagster as dg

from mdame_assets.defs.renders.assets import renders
from mdame_domain.captions import (
    SHORTS_SAFE_ZONE,
    caption_layout_problems,
    caption_layout_stats,
)
from mdame_resources.state import StateStoreResource
from mdame_runtime.step import read_step


@dg.asset_check(
    asset=renders,
    blocking=True,
    description="Every caption and hook box a render recorded lies inside the Shorts safe "
    f"area (clear of the top {SHORTS_SAFE_ZONE.top:.0%}, the bottom {SHORTS_SAFE_ZONE.bottom:.0%} "
    f"and the right-hand {SHORTS_SAFE_ZONE.right:.0%}: mdame_domain/captions/geometry.py), and "
    "no two boxes on screen at once overlap. Blocking: the partition's publications wait, with "
    "a check_blocked alert. When it fails, the problems name each render, box and the side it "
    "crosses: the layout shrinks or splits text to fit or refuses to render, so this is a bug "
    "or a render made before its boxes were recorded: report it with the problems.",
)
def caption_layout(
    context: dg.AssetCheckExecutionContext, state: StateStoreResource
) -> dg.AssetCheckResult:
    step = read_step(context, state.get_client(), "caption_layout")
    problems: list[str] = []
    boxes_checked, renders_checked = 0, 0
    bottoms, rights, margins = [], [], []
    for script in step.units("script"):
        render_id = script.result.get("render_id")
        if render_id is None:
            continue
        render = step.state.get_work_unit("render", render_id)
        if render is None:
            continue  # render_probe names a missing render
        renders_checked += 1
        boxes = render.payload.get("caption_boxes")
        if not isinstance(boxes, list) or not boxes:
            problems.append(f"render {render.id}: no caption boxes recorded")
            continue
        # Boxes are in the frame the captions were laid out on (renders before that was
        # recorded were laid out on their own frame).
        frame = render.payload.get("caption_frame") or [
            render.payload["width"],
            render.payload["height"],
        ]
        width, height = int(frame[0]), int(frame[1])
        problems += [
            f"render {render.id}: {p}"
            for p in caption_layout_problems(boxes, width, height, SHORTS_SAFE_ZONE)
        ]
        stats = caption_layout_stats(boxes, width, height, SHORTS_SAFE_ZONE)
        if stats["boxes"]:
            boxes_checked += int(stats["boxes"])
            bottoms.append(stats["max_bottom_fraction"])
            rights.append(stats["max_right_fraction"])
            margins.append(stats["min_margin_px"])
    if problems:  # blocking: the partition's publication waits
        step.alert("check_blocked", f"caption_layout failed: {problems[0]}")
    return dg.AssetCheckResult(
        passed=not problems,
        metadata={
            "problems": problems,
            "renders_checked": renders_checked,
            "boxes_checked": boxes_checked,
            # The safe area ends at 1 - SHORTS_SAFE_ZONE.bottom (0.75) and .right (0.88).
            "max_box_bottom_fraction": max(bottoms, default=0.0),
            "max_box_right_fraction": max(rights, default=0.0),
            "min_margin_px": min(margins, default=0),
        },
    )
