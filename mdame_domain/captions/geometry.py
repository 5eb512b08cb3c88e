"""The frame's safe area (what no platform UI covers) and its split into the regions the hook
and captions may draw in."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SafeZone:
    """Fractions of the frame the platform UI covers, for 9:16 Shorts."""

    top: float = 0.15
    bottom: float = 0.25
    right: float = 0.12
    left: float = 0.0


SHORTS_SAFE_ZONE = SafeZone()
# Extra room between the text and the UI, in pixels of a 1920-high frame.
SAFE_PADDING_PX = 24


@dataclass(frozen=True)
class Box:
    left: int
    top: int
    right: int
    bottom: int

    def inside(self, other: Box) -> bool:
        return (
            self.left >= other.left
            and self.top >= other.top
            and self.right <= other.right
            and self.bottom <= other.bottom
        )


def safe_box(width: int = 1080, height: int = 1920, zone: SafeZone = SHORTS_SAFE_ZONE) -> Box:
    """The part of the frame no platform UI covers."""
    return Box(
        left=math.ceil(width * zone.left),
        top=math.ceil(height * zone.top),
        right=math.floor(width * (1 - zone.right)),
        bottom=math.floor(height * (1 - zone.bottom)),
    )


# Vertical split of the safe area: the hook in the middle, captions below. The top stays clear
# (no title is burned in: the platform shows the video's own).
_HOOK_REGION = (0.3, 0.7)
_CAPTION_REGION = (0.7, 1.0)


def caption_regions(
    width: int = 1080, height: int = 1920, zone: SafeZone = SHORTS_SAFE_ZONE
) -> dict[str, Box]:
    """Where the hook and captions may draw: the safe area less a padding, split top to
    bottom, horizontally symmetric so text is centred on the frame."""
    safe = safe_box(width, height, zone)
    padding = round(SAFE_PADDING_PX * height / 1920)
    left = max(safe.left + padding, width - (safe.right - padding))
    top, bottom = safe.top + padding, safe.bottom - padding

    def band(span: tuple[float, float]) -> Box:
        return Box(
            left=left,
            top=top + math.ceil(span[0] * (bottom - top)),
            right=width - left,
            bottom=top + math.floor(span[1] * (bottom - top)),
        )

    return {
        "hook": band(_HOOK_REGION),
        "caption": band(_CAPTION_REGION),
    }
