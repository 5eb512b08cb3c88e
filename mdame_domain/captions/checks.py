"""Checks of a render's recorded caption boxes against the safe area: what is wrong with them
(caption_layout_problems) and chartable numbers (caption_layout_stats)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from mdame_domain.captions.geometry import SHORTS_SAFE_ZONE, SafeZone, safe_box
from mdame_domain.captions.model import CaptionBox


def _box_list(boxes: Sequence[CaptionBox | Mapping[str, Any]]) -> tuple[list, list[str]]:
    parsed: list[tuple[int, CaptionBox]] = []
    problems: list[str] = []
    for index, raw in enumerate(boxes):
        try:
            box = raw if isinstance(raw, CaptionBox) else CaptionBox.from_json(raw)
        except ValueError as exc:
            problems.append(f"caption box {index}: malformed ({exc})")
            continue
        parsed.append((index, box))
    return parsed, problems


def _describe(index: int, box: CaptionBox) -> str:
    text = box.text if len(box.text) <= 40 else box.text[:37] + "..."
    return (
        f"{box.kind} box {index} {text!r} at x={box.x} y={box.y} w={box.w} h={box.h} "
        f"({box.start_s:.2f}-{box.end_s:.2f}s)"
    )


def caption_layout_problems(
    boxes: Sequence[CaptionBox | Mapping[str, Any]],
    width: int,
    height: int,
    safe_zone: SafeZone = SHORTS_SAFE_ZONE,
) -> list[str]:
    """What is wrong with a render's recorded caption boxes: a box (malformed, empty or) not
    inside the safe area, naming the sides it crosses and by how much, or two boxes on screen
    at the same time that overlap."""
    safe = safe_box(width, height, safe_zone)
    parsed, problems = _box_list(boxes)
    for index, box in parsed:
        if box.w <= 0 or box.h <= 0:
            problems.append(f"{_describe(index, box)}: empty")
            continue
        over = {
            "top": safe.top - box.y,
            "bottom": box.bottom - safe.bottom,
            "left": safe.left - box.x,
            "right": box.right - safe.right,
        }
        crossed = [f"{side} by {px} px" for side, px in over.items() if px > 0]
        if crossed:
            problems.append(
                f"{_describe(index, box)} is outside the safe area "
                f"({safe.left},{safe.top})-({safe.right},{safe.bottom}): {', '.join(crossed)}"
            )
    for (i, a), (j, b) in itertools.combinations(parsed, 2):
        together = a.start_s < b.end_s and b.start_s < a.end_s
        if together and a.x < b.right and b.x < a.right and a.y < b.bottom and b.y < a.bottom:
            problems.append(f"{_describe(i, a)} overlaps {_describe(j, b)}")
    return problems


def caption_layout_stats(
    boxes: Sequence[CaptionBox | Mapping[str, Any]],
    width: int,
    height: int,
    safe_zone: SafeZone = SHORTS_SAFE_ZONE,
) -> dict[str, float | int]:
    """Chartable numbers: boxes, the lowest and rightmost box edge as fractions of the frame,
    and the smallest distance of any box to the safe area's edges (negative: outside)."""
    safe = safe_box(width, height, safe_zone)
    parsed, _ = _box_list(boxes)
    if not parsed:
        return {"boxes": 0, "max_bottom_fraction": 0.0, "max_right_fraction": 0.0,
                "min_margin_px": 0}  # fmt: skip
    found = [box for _, box in parsed]
    return {
        "boxes": len(found),
        "max_bottom_fraction": round(max(b.bottom for b in found) / height, 4),
        "max_right_fraction": round(max(b.right for b in found) / width, 4),
        "min_margin_px": min(
            min(b.x - safe.left, b.y - safe.top, safe.right - b.right, safe.bottom - b.bottom)
            for b in found
        ),
    }
