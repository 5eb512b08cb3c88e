"""The caption data: a timed Cue, the CaptionStyle a dimension sets, the CaptionTrack and the
CaptionBox of every event a render records, and CaptionLayoutError."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Cue:
    start_s: float
    end_s: float
    text: str


class CaptionLayoutError(ValueError):
    """Text that cannot be placed inside the safe area at any allowed size."""


@dataclass(frozen=True)
class CaptionStyle:
    """A dimension's caption style (YAML `captions:`; validated in dimensions.py)."""

    font: str = "DejaVu Sans"
    size: int = 64
    max_chars_per_line: int = 24
    max_lines: int = 2
    max_words: int = 6
    outline: int = 4
    shadow: int = 2
    primary: str = "#FFFFFF"
    highlight: str = "#FFD400"


@dataclass(frozen=True)
class CaptionBox:
    """Where one caption or hook event is drawn, in output pixels, outline and shadow
    included: every pixel libass draws for it lies inside (x, y, x + w, y + h)."""

    kind: str  # "caption" or "hook"
    start_s: float
    end_s: float
    x: int
    y: int
    w: int
    h: int
    text: str

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "x": self.x,
            "y": self.y,
            "w": self.w,
            "h": self.h,
            "text": self.text,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CaptionBox:
        """The recorded form back; ValueError naming what is wrong with it."""
        if not isinstance(data, Mapping):
            raise ValueError(f"expected a mapping, got {type(data).__name__}")
        missing = [k for k in ("kind", "start_s", "end_s", "x", "y", "w", "h") if k not in data]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        for key in ("x", "y", "w", "h"):
            if isinstance(data[key], bool) or not isinstance(data[key], int):
                raise ValueError(f"{key} is not an integer: {data[key]!r}")
        for key in ("start_s", "end_s"):
            if isinstance(data[key], bool) or not isinstance(data[key], int | float):
                raise ValueError(f"{key} is not a number: {data[key]!r}")
        return cls(
            kind=str(data["kind"]),
            start_s=float(data["start_s"]),
            end_s=float(data["end_s"]),
            x=data["x"],
            y=data["y"],
            w=data["w"],
            h=data["h"],
            text=str(data.get("text", "")),
        )

    @property
    def right(self) -> int:
        return self.x + self.w

    @property
    def bottom(self) -> int:
        return self.y + self.h


@dataclass(frozen=True)
class CaptionTrack:
    """The ASS document to burn in and the box of every event in it."""

    ass: str
    boxes: tuple[CaptionBox, ...]
