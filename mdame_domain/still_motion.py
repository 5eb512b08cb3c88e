"""A still made into a scene's clip: a slow zoom or pan, smooth, never showing the still's edge.

ffmpeg's zoompan crops on whole pixels of the picture it is given, so a slow zoom steps, and
its steps go back and forth as the rounding changes (the well-known zoompan jitter). Here the
still is scaled once to cover a canvas twice the clip's size, and every frame takes a window of
that canvas through `perspective`, whose corners are real numbers, sampled with interpolation:
the window moves by fractions of a pixel, and the area downscale to the clip keeps it sharp
without aliasing. A window is described by its zoom (>= 1) and where it sits within the room
the zoom leaves (0 flush with the left or top, 1 flush with the right or bottom), a little inside
the canvas so that interpolation never reads past it: a valid Motion cannot reach past the
still, so its edge is never shown, by construction.

The zoom changes geometrically (the same ratio per frame, what reads as a steady zoom) and the
position linearly, so the picture moves by steps that change smoothly. Which motion a scene gets
is drawn from its scene hash: the same scene always moves the same way.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

from mdame_domain.mediatools import FFMPEG_BASE, run_tool

DEFAULT_FPS = 24  # the procedural clips' rate
# The canvas is this many times the clip's size: the window's interpolation works on finer
# pixels than the clip shows.
SUPERSAMPLE = 2
# Canvas pixels kept clear of the window on the canvas's narrower sides (proportionally more
# on the others, so the window keeps the clip's shape): interpolation never reads past the edge.
_INSET_PX = 2
KINDS = ("zoom_in", "zoom_out", "pan_left", "pan_right", "pan_up", "pan_down")
# Slow: a zoom ends at most MAX_ZOOM times the start, changing by at most ZOOM_PER_S (as a
# ratio) a second; a pan moves in the room PAN_ZOOM leaves, at most PAN_PER_S of the still's
# width (or height) a second.
MAX_ZOOM = 1.25
ZOOM_PER_S = 1.07
PAN_ZOOM = 1.18
PAN_PER_S = 0.04


@dataclass(frozen=True)
class Motion:
    """A window's path over the canvas, start to end of the clip. zoom: the canvas over the
    window (1 shows all of it); x, y: where the window sits in the room the zoom leaves,
    0 (left, top) to 1 (right, bottom). The zoom changes geometrically, x and y linearly."""

    kind: str
    zoom_from: float
    zoom_to: float
    x_from: float
    x_to: float
    y_from: float
    y_to: float

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown motion {self.kind!r} (known: {', '.join(KINDS)})")
        for name in ("zoom_from", "zoom_to"):
            value = getattr(self, name)
            if not 1.0 <= value <= MAX_ZOOM:
                raise ValueError(f"{name} must be between 1 and {MAX_ZOOM}, got {value}")
        for name in ("x_from", "x_to", "y_from", "y_to"):
            value = getattr(self, name)
            # Outside [0, 1] the window would leave the still and show its edge.
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {value}")

    def window(
        self, t: float, canvas_w: float, canvas_h: float
    ) -> tuple[float, float, float, float]:
        """(left, top, width, height) of the window at t in [0, 1], in canvas pixels."""
        zoom = self.zoom_from * (self.zoom_to / self.zoom_from) ** t
        inset_x, inset_y, usable_w, usable_h = _usable(canvas_w, canvas_h)
        w, h = usable_w / zoom, usable_h / zoom
        x = self.x_from + (self.x_to - self.x_from) * t
        y = self.y_from + (self.y_to - self.y_from) * t
        return inset_x + x * (usable_w - w), inset_y + y * (usable_h - h), w, h


def _usable(canvas_w: float, canvas_h: float) -> tuple[float, float, float, float]:
    """(inset x, inset y, width, height) of the canvas the window may cover."""
    edge = _INSET_PX / min(canvas_w, canvas_h)
    return edge * canvas_w, edge * canvas_h, canvas_w * (1 - 2 * edge), canvas_h * (1 - 2 * edge)


def plan_motion(scene_hash: str, duration_s: float) -> Motion:
    """The scene's motion, drawn from its hash: a zoom in or out about a point near the
    middle, or a pan across the room a slight zoom leaves; slow whatever the scene's length."""
    seed = hashlib.sha256(scene_hash.encode()).digest()

    def unit(i: int) -> float:
        return seed[i] / 255.0

    kind = KINDS[seed[0] % len(KINDS)]
    seconds = max(duration_s, 0.1)
    if kind.startswith("zoom"):
        wanted = 1.10 + 0.12 * unit(1)  # 1.10-1.22 over a scene of a few seconds
        end = min(wanted, ZOOM_PER_S**seconds, MAX_ZOOM)
        ax, ay = 0.3 + 0.4 * unit(2), 0.3 + 0.4 * unit(3)
        start, end = (1.0, end) if kind == "zoom_in" else (end, 1.0)
        return Motion(kind, start, end, ax, ax, ay, ay)
    room = 1.0 - 1.0 / PAN_ZOOM  # of the canvas, what the window may travel
    travel = min(0.6 + 0.2 * unit(1), PAN_PER_S * seconds / room)
    start = (1.0 - travel) * unit(2)
    first, last = start, start + travel
    if kind in ("pan_left", "pan_up"):  # the view travels left (up): the window does too
        first, last = 1.0 - first, 1.0 - last
    across = 0.3 + 0.4 * unit(3)
    if kind in ("pan_left", "pan_right"):
        return Motion(kind, PAN_ZOOM, PAN_ZOOM, first, last, across, across)
    return Motion(kind, PAN_ZOOM, PAN_ZOOM, across, across, first, last)


def frame_count(duration_s: float, fps: int) -> int:
    return max(1, round(duration_s * fps))


def _num(value: float) -> str:
    return f"{value:.6f}"


def motion_filter(motion: Motion, width: int, height: int, frames: int) -> str:
    """The filter graph from the still (any size) to `frames` frames of `width`x`height`."""
    cw, ch = width * SUPERSAMPLE, height * SUPERSAMPLE
    last = max(1, frames - 1)
    t = f"(in/{last})"
    zoom = f"({_num(motion.zoom_from)}*pow({_num(motion.zoom_to / motion.zoom_from)},{t}))"
    ix, iy, uw, uh = (_num(v) for v in _usable(cw, ch))
    w, h = f"({uw}/{zoom})", f"({uh}/{zoom})"
    x = f"({_num(motion.x_from)}+{_num(motion.x_to - motion.x_from)}*{t})"
    y = f"({_num(motion.y_from)}+{_num(motion.y_to - motion.y_from)}*{t})"
    left = f"({ix}+{x}*({uw}-{w}))"
    top = f"({iy}+{y}*({uh}-{h}))"
    right, bottom = f"({left}+{w})", f"({top}+{h})"
    corners = {
        "x0": left, "y0": top, "x1": right, "y1": top,
        "x2": left, "y2": bottom, "x3": right, "y3": bottom,
    }  # fmt: skip
    quad = ":".join(f"{name}='{expr}'" for name, expr in corners.items())
    return (
        # The still covers the canvas once (a centred crop of whatever its shape), ...
        f"scale={cw}:{ch}:force_original_aspect_ratio=increase:flags=lanczos,"
        f"crop={cw}:{ch},setsar=1,"
        # ... each frame's window fills the canvas, and the canvas is resized to the clip.
        f"perspective={quad}:interpolation=cubic:eval=frame,"
        f"scale={width}:{height}:flags=area,setsar=1,format=yuv420p"
    )


def still_motion_args(
    still: str | Path,
    out: str | Path,
    duration_s: float,
    *,
    width: int,
    height: int,
    fps: int = DEFAULT_FPS,
    motion: Motion,
) -> list[str]:
    """ffmpeg arguments for the clip: H.264, yuv420p, no audio, as the procedural clips."""
    if width < 16 or height < 16 or width % 2 or height % 2 or fps < 1:
        raise ValueError(f"bad clip geometry {width}x{height}@{fps}")
    if not math.isfinite(duration_s) or duration_s <= 0:
        raise ValueError(f"a clip needs a positive duration, got {duration_s}")
    frames = frame_count(duration_s, fps)
    return [
        *FFMPEG_BASE,
        "-loglevel", "error",
        "-loop", "1",
        "-framerate", str(fps),
        "-i", str(still),
        "-vf", motion_filter(motion, width, height, frames),
        "-frames:v", str(frames),
        "-r", str(fps),
        "-an",
        "-c:v", "libx264",
        # Finer than the procedural clips': at ultrafast's default quality the encoder's noise
        # moves fine detail by a good part of the window's sub-pixel step.
        "-preset", "veryfast",
        "-crf", "18",
        "-pix_fmt", "yuv420p",
        "-movflags", "+faststart",
        str(out),
    ]  # fmt: skip


def animate_still(
    still: str | Path,
    out: str | Path,
    duration_s: float,
    *,
    scene_hash: str,
    width: int,
    height: int,
    fps: int = DEFAULT_FPS,
    motion: Motion | None = None,
) -> Path:
    """Writes the scene's clip from `still` to `out` (the scene's motion unless one is given)
    and returns its path."""
    chosen = motion or plan_motion(scene_hash, duration_s)
    args = still_motion_args(
        still, out, duration_s, width=width, height=height, fps=fps, motion=chosen
    )
    run_tool(args, timeout=60.0 + 4.0 * duration_s)
    return Path(out)
