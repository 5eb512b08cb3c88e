"""What a rendered video's frames show: the text blocks on screen, measured on decoded frames.

The render draws text one way only: libass fills the glyphs with the caption style's primary
colour (white by default; one word at a time in the highlight colour) inside a solid black
outline (track.py), over a picture that moves (the render gate fails frozen stretches). So, on
frames scaled to at most ANALYSIS_WIDTH, inside the safe area (the platform's UI covers the
rest; caption_layout keeps the recorded boxes inside it):

- a text pixel is of the fill colour (each channel within FILL_TOLERANCE of it) with a
  near-black pixel (every channel <= DARK_LEVEL) within the outline's width, on each of
  WINDOW_FRAMES frames WINDOW_STEP apart: the glyph's edge against its own outline, which
  holds still while a caption is up. A picture's own edges are rarely of exactly that colour
  against black, and move; a scattered few that do not are noise;
- a cell (CELL_PX of the 1080-wide caption frame, square) is text when at least CELL_FILL of its
  pixels are text pixels;
- a text block is a group of at least MIN_BLOCK_CELLS text cells that touch, up to two cells
  apart across and one down (the space between words, a faint letter, the gap between a
  block's lines; a hook and a caption are ten cells apart and more).

Where the render recorded its blocks (the caption boxes, in caption-frame pixels), each block
seen is matched to a box on screen then; one that matches none is text drawn outside the
recorded layout. Windows are sampled where the recorded layout holds still (the middle of every
stretch between box and scene boundaries) and at least every MAX_SAMPLE_GAP_S besides, so an
unrecorded block is looked for too. It is one ffmpeg decode of the file, whose sampled frames
are read one window at a time, and numpy.

What it cannot tell from text: a picture that is itself marks of the fill colour ringed in
black holding still for the window (white lettering in the footage, a still black-and-white
cell pattern). Such a render fails the check, as text outside the recorded boxes.
"""

from __future__ import annotations

import math
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mdame_domain.captions.checks import _box_list
from mdame_domain.captions.geometry import SHORTS_SAFE_ZONE, Box, SafeZone, safe_box
from mdame_domain.captions.model import CaptionBox
from mdame_domain.mediatools import FFMPEG_BASE, MediaToolError, MissingToolError, summarize_args
from mdame_domain.timing import spent

if TYPE_CHECKING:  # numpy is imported where frames are read: importing the product skips it
    import numpy as np

# The hook while it is said, over the word-timed captions; never more.
MAX_TEXT_BLOCKS = 2
ANALYSIS_WIDTH = 540  # frames wider than this are scaled down (area) first: 4 px outlines stay 2
# Per channel; the encode's chroma subsampling moves a thin stroke's colour by up to ~50.
FILL_TOLERANCE = 70
DARK_LEVEL = 50
WHITE = (255, 255, 255)
# Text holds still for the window: 3 frames 2 apart, a sixth of a second at 24 fps. A moving
# picture's chance pixel of the fill colour next to black thins with every frame added; a
# longer window would often span a karaoke word turning the highlight colour (no longer fill).
WINDOW_FRAMES = 3
WINDOW_STEP = 2
WINDOW = (WINDOW_FRAMES - 1) * WINDOW_STEP
CELL_PX = 24
CELL_FILL = 0.05
# Fewer cells than this is no block: a picture's stray still edge (a word of the smallest
# caption is twice as many).
MIN_BLOCK_CELLS = 6
MAX_SAMPLE_GAP_S = 1.0
MAX_SAMPLES = 64  # windows; ffmpeg's select parses about a hundred terms at most
# libass draws a block's outline and anti-aliasing a little past the ink box the layout
# measured; a block seen that far outside its recorded box still matches it.
MATCH_SLACK_PX = 12


def fill_colour(hex_colour: str) -> tuple[int, int, int]:
    """'#RRGGBB' (a caption style's primary) as the fill the frames are read for."""
    digits = hex_colour.strip().lstrip("#")
    if len(digits) != 6:
        raise ValueError(f"not a hex colour like '#FFFFFF': {hex_colour!r}")
    return int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16)


@dataclass(frozen=True)
class TextBlock:
    """A block of text seen on a frame, in caption-frame pixels (as the recorded boxes)."""

    x: int
    y: int
    w: int
    h: int
    cells: int

    @property
    def right(self) -> int:
        return self.x + self.w

    @property
    def bottom(self) -> int:
        return self.y + self.h

    def to_json(self) -> dict[str, int]:
        return {"x": self.x, "y": self.y, "w": self.w, "h": self.h, "cells": self.cells}


@dataclass(frozen=True)
class FrameReading:
    """What one sampled window of frames shows."""

    frame: int  # the window's first
    at_s: float
    blocks: tuple[TextBlock, ...]
    recorded: tuple[int, ...]  # the indices of the recorded boxes on screen then
    matched: tuple[int | None, ...]  # per block, the recorded box it lies on (None: outside)

    @property
    def count(self) -> int:
        """Text blocks on screen: the recorded boxes seen, and each block outside them."""
        boxes = {m for m in self.matched if m is not None}
        return len(boxes) + sum(1 for m in self.matched if m is None)


def _on_screen(box: CaptionBox, first_s: float, last_s: float) -> bool:
    return box.start_s <= last_s and first_s < box.end_s


def sample_frames(
    boxes: Sequence[CaptionBox],
    scene_durations_s: Sequence[float],
    duration_s: float,
    fps: int,
    max_samples: int = MAX_SAMPLES,
) -> list[int]:
    """The first frame of each sampled window: the middle of every stretch where the recorded
    boxes and the scene stay the same, and enough more that no two samples are more than
    MAX_SAMPLE_GAP_S apart; thinned evenly to max_samples, the stretches with the most boxes on
    screen kept first."""
    last = max(0, math.floor(duration_s * fps) - 1 - WINDOW)
    edges = {0.0, duration_s}
    for box in boxes:
        edges |= {box.start_s, box.end_s}
    elapsed = 0.0
    for d in scene_durations_s:
        elapsed += d
        edges.add(elapsed)
    cuts = sorted(e for e in edges if 0.0 <= e <= duration_s)
    gap = WINDOW / fps
    middles: list[tuple[int, int]] = []  # (boxes on screen, frame)
    for a, b in zip(cuts, cuts[1:], strict=False):
        if b - a <= gap + 1 / fps:
            continue  # too short for a window that stays inside it
        at = a + (b - a - gap) / 2
        on = sum(1 for box in boxes if _on_screen(box, at, at + gap))
        middles.append((on, min(last, round(at * fps))))
    chosen = {frame for _, frame in middles}
    steps = max(1, math.ceil(duration_s / MAX_SAMPLE_GAP_S))
    chosen |= {min(last, round((i + 0.5) * duration_s / steps * fps)) for i in range(steps)}
    frames = sorted(chosen)
    if len(frames) <= max_samples:
        return frames
    # Thinned: the busiest stretches first (where a third block would most likely show).
    keep = {frame for _, frame in sorted(middles, reverse=True)[: max_samples // 2]}
    rest = [f for f in frames if f not in keep]
    room = max_samples - len(keep)
    if rest and room > 0:
        keep |= {rest[round(i * (len(rest) - 1) / max(1, room - 1))] for i in range(room)}
    return sorted(keep)


def _window(first: int) -> list[int]:
    return [first + k * WINDOW_STEP for k in range(WINDOW_FRAMES)]


def analysis_size(width: int, height: int) -> tuple[int, int]:
    """The size frames are read at: the video's, scaled to at most ANALYSIS_WIDTH wide."""
    if width <= ANALYSIS_WIDTH:
        return width, height
    scaled_h = round(height * ANALYSIS_WIDTH / width)
    return ANALYSIS_WIDTH, scaled_h - scaled_h % 2


def decoded_windows(
    path: str, starts: Sequence[int], width: int, height: int
) -> Iterator[tuple[int, list[np.ndarray]]]:
    """Each sampled window's frames (RGB, at analysis_size), by its first frame number, in
    order: one ffmpeg decode whose selected frames are read as they come, so only a window's
    worth is held at a time."""
    import numpy as np

    firsts = sorted(set(starts))
    if not firsts:
        return
    w, h = analysis_size(width, height)
    size = w * h * 3
    # One term per window: ffmpeg's expression parser refuses a hundred-odd terms.
    select = "+".join(
        f"between(n\\,{f}\\,{f + WINDOW})*not(mod(n-{f}\\,{WINDOW_STEP}))" for f in firsts
    )
    args = [*FFMPEG_BASE, "-loglevel", "error", "-i", path, "-an", "-vf",
            f"select='{select}',scale={w}:{h}:flags=area,format=rgb24",
            "-fps_mode", "passthrough", "-f", "rawvideo", "pipe:1"]  # fmt: skip
    wanted = sorted({n for f in firsts for n in _window(f)})
    timeout = 60.0 + 0.2 * wanted[-1]
    try:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError as exc:
        raise MissingToolError(["ffmpeg"]) from exc
    assert proc.stdout is not None and proc.stderr is not None
    stderr = proc.stderr
    # Its error output is small (-loglevel error) but read aside, so it cannot block the pipe.
    errors: list[bytes] = []
    reader = threading.Thread(target=lambda: errors.append(stderr.read()), daemon=True)
    reader.start()
    timed_out = threading.Event()

    def stop() -> None:
        timed_out.set()
        proc.kill()

    watchdog = threading.Timer(timeout, stop)
    watchdog.start()
    held: dict[int, np.ndarray] = {}
    try:
        with spent("probes"):
            frames = iter(wanted)
            for i, first in enumerate(firsts):
                for n in frames:
                    data = proc.stdout.read(size)
                    if len(data) < size:
                        break  # the file ends before the frames recorded for it
                    held[n] = np.frombuffer(data, dtype=np.uint8).reshape(h, w, 3)
                    if n >= first + WINDOW:
                        break
                window = _window(first)
                if any(k not in held for k in window):
                    break
                yield first, [held[k] for k in window]
                following = firsts[i + 1] if i + 1 < len(firsts) else wanted[-1] + 1
                for k in [k for k in held if k < following]:
                    del held[k]
    finally:
        proc.stdout.close()
        code = proc.wait()
        watchdog.cancel()
        reader.join(timeout=5)
    if timed_out.is_set():
        raise MediaToolError(
            "ffmpeg", summarize_args(args), "", reason=f"timed out after {timeout:.0f}s"
        )
    if code != 0:
        tail = b"".join(errors).decode("utf-8", "replace").strip()[-1500:]
        raise MediaToolError("ffmpeg", summarize_args(args), tail, reason=f"failed (exit {code})")


def _spread(mask: np.ndarray, radius: int) -> np.ndarray:
    """mask dilated by a (2r+1)-square: separable, edges not wrapped."""
    out = mask.copy()
    for axis in (0, 1):
        grown = out.copy()
        for step in range(1, radius + 1):
            if axis == 0:
                grown[step:] |= out[:-step]
                grown[:-step] |= out[step:]
            else:
                grown[:, step:] |= out[:, :-step]
                grown[:, :-step] |= out[:, step:]
        out = grown
    return out


def text_cells(
    window: Sequence[np.ndarray],
    scale: float,
    area: Box | None = None,
    fill: tuple[int, int, int] = WHITE,
) -> np.ndarray:
    """Which cells of a frame are text (see the module docstring), as a boolean grid, from the
    RGB frames of one window; `scale` is the analysis frame's width over the caption frame's
    (1080); only cells inside `area` (analysis pixels) can be text; `fill` is the text's
    colour."""
    import numpy as np

    radius = max(1, round(4 * scale)) + 1  # the default outline (4 px at 1080) and a pixel
    height, width = int(window[0].shape[0]), int(window[0].shape[1])
    edge = np.ones((height, width), dtype=bool)
    for frame in window:
        # Channel by channel: numpy reduces a last axis of three slowly.
        filled = np.ones_like(edge)
        dark = np.ones_like(edge)
        for channel, value in enumerate(fill):
            plane = frame[:, :, channel]
            filled &= plane >= max(0, value - FILL_TOLERANCE)
            filled &= plane <= min(255, value + FILL_TOLERANCE)
            dark &= plane <= DARK_LEVEL
        edge &= filled & _spread(dark, radius)
    if area is not None:
        inside = np.zeros_like(edge)
        inside[area.top : area.bottom, area.left : area.right] = True
        edge &= inside
    cell = max(2, round(CELL_PX * scale))
    rows, cols = height // cell, width // cell
    counts = edge[: rows * cell, : cols * cell].reshape(rows, cell, cols, cell).sum(axis=(1, 3))
    return counts >= CELL_FILL * cell * cell


def text_blocks(cells: np.ndarray, cell_px: float) -> list[TextBlock]:
    """Groups of text cells that touch (up to two cells apart across, one down), in
    caption-frame pixels; a group of fewer than MIN_BLOCK_CELLS is noise, not a block."""
    import numpy as np

    rows, cols = cells.shape
    seen = np.zeros_like(cells)
    blocks = []
    for r0, c0 in zip(*np.nonzero(cells), strict=True):
        if seen[r0, c0]:
            continue
        seen[r0, c0] = True
        stack, members = [(int(r0), int(c0))], []
        while stack:
            r, c = stack.pop()
            members.append((r, c))
            for rr in range(max(0, r - 2), min(rows, r + 3)):
                for cc in range(max(0, c - 3), min(cols, c + 4)):
                    if cells[rr, cc] and not seen[rr, cc]:
                        seen[rr, cc] = True
                        stack.append((rr, cc))
        if len(members) < MIN_BLOCK_CELLS:
            continue
        top = min(r for r, _ in members)
        left = min(c for _, c in members)
        bottom = max(r for r, _ in members) + 1
        right = max(c for _, c in members) + 1
        blocks.append(
            TextBlock(
                x=math.floor(left * cell_px),
                y=math.floor(top * cell_px),
                w=math.ceil((right - left) * cell_px),
                h=math.ceil((bottom - top) * cell_px),
                cells=len(members),
            )
        )
    return blocks


def _match(block: TextBlock, boxes: Sequence[tuple[int, CaptionBox]]) -> int | None:
    """The recorded box (index) the block lies on: the one it overlaps most, slack allowed."""
    best, best_area = None, 0
    for index, box in boxes:
        w = min(block.right, box.right + MATCH_SLACK_PX) - max(block.x, box.x - MATCH_SLACK_PX)
        h = min(block.bottom, box.bottom + MATCH_SLACK_PX) - max(block.y, box.y - MATCH_SLACK_PX)
        if w > 0 and h > 0 and w * h > best_area:
            best, best_area = index, w * h
    if best is None:
        return None
    # Mostly inside its box: a block that only brushes a box is text of its own.
    return best if best_area >= 0.5 * block.w * block.h else None


def read_text_on_screen(
    path: str,
    boxes: Sequence[CaptionBox | Mapping[str, Any]],
    scene_durations_s: Sequence[float],
    duration_s: float,
    width: int,
    height: int,
    fps: int,
    caption_frame: tuple[int, int] = (1080, 1920),
    zone: SafeZone = SHORTS_SAFE_ZONE,
    fill: tuple[int, int, int] = WHITE,
) -> list[FrameReading]:
    """The text blocks the video at `path` shows inside the safe area on its sampled windows,
    each matched to the recorded box it lies on (boxes in `caption_frame` pixels); `fill` is
    the text's colour (the caption style's primary)."""
    parsed = [(i, b) for i, b in _box_list(boxes)[0]]
    starts = sample_frames([b for _, b in parsed], scene_durations_s, duration_s, fps)
    w, h = analysis_size(width, height)
    scale = w / caption_frame[0]
    cell_px = max(2, round(CELL_PX * scale)) / scale  # a cell's side in caption-frame pixels
    area = safe_box(w, h, zone)
    readings = []
    for first, window in decoded_windows(path, starts, width, height):
        cells = text_cells(window, scale, area, fill)
        first_s, last_s = first / fps, (first + WINDOW) / fps
        on = [(i, b) for i, b in parsed if _on_screen(b, first_s, last_s)]
        blocks = text_blocks(cells, cell_px)
        readings.append(
            FrameReading(
                frame=first,
                at_s=round(first_s, 3),
                blocks=tuple(blocks),
                recorded=tuple(i for i, _ in on),
                matched=tuple(_match(block, on) for block in blocks),
            )
        )
    return readings


def recorded_block_problems(
    boxes: Sequence[CaptionBox | Mapping[str, Any]], max_blocks: int = MAX_TEXT_BLOCKS
) -> list[str]:
    """Moments when the recorded layout has more than max_blocks boxes on screen at once."""
    parsed = [b for _, b in _box_list(boxes)[0]]
    problems = []
    for t in sorted({b.start_s for b in parsed}):
        on = [b for b in parsed if b.start_s <= t < b.end_s]
        if len(on) > max_blocks:
            kinds = ", ".join(f"{b.kind} {b.text[:30]!r}" for b in on)
            problems.append(f"{len(on)} text blocks recorded on screen at {t:.2f}s: {kinds}")
    return problems


def text_on_screen_problems(
    readings: Sequence[FrameReading], max_blocks: int = MAX_TEXT_BLOCKS
) -> list[str]:
    """What the frames show wrong: more than max_blocks text blocks at once, or text where no
    recorded box is on screen; and a video whose frames show none of the text it recorded (the
    measurement cannot vouch for it, or the captions were never burned in)."""
    problems = []
    crowded = [r for r in readings if r.count > max_blocks]
    if crowded:
        first = crowded[0]
        problems.append(
            f"{first.count} text blocks on screen at {first.at_s:.2f}s (at most {max_blocks}: "
            f"the hook, then the captions); more than {max_blocks} on {len(crowded)} of "
            f"{len(readings)} sampled frames, up to {max(r.count for r in crowded)}, "
            f"the last at {crowded[-1].at_s:.2f}s"
        )
    strays = [
        (r, block)
        for r in readings
        for block, match in zip(r.blocks, r.matched, strict=True)
        if match is None
    ]
    if strays:
        reading, block = strays[0]
        frames = len({r.frame for r, _ in strays})
        problems.append(
            f"text drawn outside the recorded caption boxes at {reading.at_s:.2f}s: "
            f"x={block.x} y={block.y} w={block.w} h={block.h} (caption-frame pixels); "
            f"such text on {frames} of {len(readings)} sampled frames"
        )
    recorded = sum(1 for r in readings if r.recorded)
    seen = sum(1 for r in readings if any(m is not None for m in r.matched))
    if recorded and not seen:
        problems.append(
            f"no recorded caption box shows text on any of the {recorded} sampled frames "
            "that should show one"
        )
    return problems


def text_on_screen_stats(readings: Sequence[FrameReading]) -> dict[str, float | int]:
    """Chartable numbers: frames read, the most text blocks on one frame, blocks outside the
    recorded boxes, and the share of frames with recorded text on which it was seen."""
    recorded = [r for r in readings if r.recorded]
    seen = [r for r in recorded if any(m is not None for m in r.matched)]
    return {
        "frames_read": len(readings),
        "max_blocks_seen": max((r.count for r in readings), default=0),
        "blocks_outside_boxes": sum(1 for r in readings for m in r.matched if m is None),
        "recorded_text_seen_fraction": round(len(seen) / len(recorded), 3) if recorded else 0.0,
    }
