"""Procedural visuals: the offline stand-in for the diffusion models.

Each clip is a moving pattern built from one of several ffmpeg lavfi generators, tinted with the
dimension's palette and parameterised by the scene hash, so the same scene always renders the
same clip and different scenes look clearly different. Patterns are computed on a small "field"
and scaled up: they are smooth (or deliberately blocky), and it keeps generation fast on CPUs.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mdame_domain.mediatools import FFMPEG_BASE, run_tool

_HEX_COLOUR = re.compile(r"^#?([0-9a-fA-F]{6}|[0-9a-fA-F]{3})$")

# A few places on the Mandelbrot set's boundary that stay interesting while zooming in.
_MANDELBROT_POINTS: tuple[tuple[float, float], ...] = (
    (-0.743644, -0.131826),
    (-0.7453, 0.1127),
    (-1.25066, 0.02012),
    (-0.16070, 1.03756),
    (0.28693, 0.01428),
)
_LIFE_RULES = ("B3/S23", "B36/S23", "B3678/S34678", "B34/S34")
_CELLAUTO_RULES = (30, 45, 73, 90, 105, 110, 150, 225)
_GRADIENT_TYPES = ("linear", "radial", "circular", "spiral")


@dataclass(frozen=True)
class Rgb:
    r: int
    g: int
    b: int

    @property
    def ffmpeg(self) -> str:
        return f"0x{self.r:02x}{self.g:02x}{self.b:02x}"

    def scaled(self, factor: float) -> Rgb:
        return Rgb(*(min(255, round(c * factor)) for c in (self.r, self.g, self.b)))


@dataclass(frozen=True)
class ClipSpec:
    """Everything a pattern needs: sizes, timing, colours and seeded random bytes."""

    width: int
    height: int
    field_w: int
    field_h: int
    fps: int
    duration_s: float
    colours: tuple[Rgb, Rgb, Rgb]  # dark base, first accent, second accent
    seed: bytes

    def unit(self, index: int) -> float:
        """A deterministic number in [0, 1) taken from the seed."""
        return self.seed[index % len(self.seed)] / 256.0

    def pick(self, index: int, lo: float, hi: float) -> float:
        return round(lo + (hi - lo) * self.unit(index), 3)

    @property
    def seed_int(self) -> int:
        return int.from_bytes(self.seed[28:32], "big")


def parse_colour(text: str) -> Rgb:
    match = _HEX_COLOUR.match(text.strip())
    if not match:
        raise ValueError(f"not a hex colour like '#1e88e5': {text!r}")
    digits = match.group(1)
    if len(digits) == 3:
        digits = "".join(ch * 2 for ch in digits)
    return Rgb(int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16))


def _scene_colours(palette: Sequence[str], seed: bytes) -> tuple[Rgb, Rgb, Rgb]:
    """Two accents from the palette (rotated by the seed) plus a dark base from the first."""
    colours = [parse_colour(c) for c in palette]
    if not colours:
        raise ValueError("palette needs at least one colour")
    if len(colours) == 1:
        # A single brand colour still needs contrast: pair it with a light tint of itself.
        colours.append(
            Rgb(*(c + (255 - c) * 3 // 4 for c in (colours[0].r, colours[0].g, colours[0].b)))
        )
    start = seed[1] % len(colours)
    step = 1 + seed[2] % (len(colours) - 1)
    first, second = colours[start], colours[(start + step) % len(colours)]
    # Dark, not black: black frames are a render defect the checks look for.
    return first.scaled(0.35), first, second


def _ramp_lut(colours: tuple[Rgb, Rgb, Rgb]) -> str:
    """lutrgb mapping grey 0..255 onto dark -> accent1 -> accent2 (per channel)."""

    def channel(a: int, b: int, c: int) -> str:
        return f"'if(lt(val,128),{a}+({b - a})*val/128,{b}+({c - b})*(val-128)/127)'"

    dark, one, two = colours
    return (
        "format=rgb24,lutrgb="
        f"r={channel(dark.r, one.r, two.r)}:"
        f"g={channel(dark.g, one.g, two.g)}:"
        f"b={channel(dark.b, one.b, two.b)}"
    )


def _grey_field(spec: ClipSpec, lum_expr: str) -> str:
    """A grey pattern computed per pixel by geq, on a grid of half the field's width and height
    whose X and Y are the field's coordinates: the patterns are smooth sines (a period is 30
    field pixels or more), so a quarter of the evaluations draws the same picture, and the
    scale after it smooths it. geq runs on one core; on the whole field it was most of a
    sine clip's time."""
    w, h = _even(spec.field_w // 2), _even(spec.field_h // 2)
    expr = re.sub(r"\bX\b", f"(X*{spec.field_w / w:g})", lum_expr)
    expr = re.sub(r"\bY\b", f"(Y*{spec.field_h / h:g})", expr)
    return (
        f"color=c=black:s={w}x{h}:r={spec.fps},format=gray,"
        f"geq=lum='{expr}',{_ramp_lut(spec.colours)}"
    )


def _moving_bands(spec: ClipSpec) -> str:
    angle = spec.pick(3, 0.0, 3.14159)
    ax, ay = round(math.cos(angle), 3), round(math.sin(angle), 3)
    period = spec.pick(4, 6.0, 18.0)
    speed = spec.pick(5, 1.5, 4.0) * (1 if spec.seed[6] % 2 else -1)
    wobble = spec.pick(7, 0.05, 0.3)
    phase = f"(X*{ax}+Y*{ay})/{period}"
    warp = f"{wobble}*sin(Y/{period * 3}+T)*{period}/4"  # bends the bands gently
    expr = f"128+127*sin({phase}+{warp}+T*{speed})"
    return _grey_field(spec, expr)


def _drifting_rings(spec: ClipSpec) -> str:
    cx, cy = spec.field_w / 2, spec.field_h / 2
    ampx, ampy = spec.pick(3, 0.15, 0.4) * spec.field_w, spec.pick(4, 0.1, 0.35) * spec.field_h
    fx, fy = spec.pick(5, 0.4, 1.2), spec.pick(6, 0.3, 1.0)
    spacing = spec.pick(7, 5.0, 12.0)
    speed = spec.pick(8, 2.0, 5.0)
    expr = (
        f"128+127*sin(hypot(X-{cx:.1f}-{ampx:.1f}*sin(T*{fx}),"
        f"Y-{cy:.1f}-{ampy:.1f}*cos(T*{fy}))/{spacing}-T*{speed})"
    )
    return _grey_field(spec, expr)


def _plasma(spec: ClipSpec) -> str:
    sx, sy, sr = spec.pick(3, 8.0, 20.0), spec.pick(4, 10.0, 26.0), spec.pick(5, 6.0, 14.0)
    tx, ty, tr = spec.pick(6, 0.6, 1.6), spec.pick(7, 0.6, 1.8), spec.pick(8, 1.0, 2.5)
    ox = round(spec.unit(9) * spec.field_w, 1)
    oy = round(spec.unit(10) * spec.field_h, 1)
    # Three travelling waves (horizontal, vertical, radial) summed: the classic plasma.
    waves = (f"sin(X/{sx}+T*{tx})", f"sin(Y/{sy}-T*{ty})", f"sin(hypot(X-{ox},Y-{oy})/{sr}+T*{tr})")
    expr = "128+" + "+".join(f"42*{wave}" for wave in waves)
    return _grey_field(spec, expr)


def _gradient(spec: ClipSpec) -> str:
    dark, one, two = spec.colours
    kind = _GRADIENT_TYPES[spec.seed[3] % len(_GRADIENT_TYPES)]
    speed = spec.pick(4, 0.03, 0.08)
    w, h = spec.field_w, spec.field_h
    # Endpoints near opposite corners so every colour of the ramp is on screen.
    x0, y0 = round(spec.unit(5) * w / 3), round(spec.unit(6) * h / 3)
    x1, y1 = w - round(spec.unit(7) * w / 3), h - round(spec.unit(8) * h / 3)
    return (
        f"gradients=s={w}x{h}:r={spec.fps}:n=3:"
        f"c0={one.ffmpeg}:c1={dark.ffmpeg}:c2={two.ffmpeg}:"
        f"x0={x0}:y0={y0}:x1={x1}:y1={y1}:type={kind}:speed={speed}:seed={spec.seed_int}"
    )


def _life(spec: ClipSpec) -> str:
    dark, one, two = spec.colours
    rule = _LIFE_RULES[spec.seed[3] % len(_LIFE_RULES)]
    ratio = spec.pick(4, 0.2, 0.5)
    # Bigger cells than the other fields: a fine life grid reads as noise on a phone. Half the
    # field, so the clip scales it by a whole number and every cell is the same size.
    grid_w, grid_h = max(8, spec.field_w // 2), max(8, spec.field_h // 2)
    # A life field can settle into still lifes within seconds, and a still clip fails the
    # render's freeze gate for good (the scene_hash makes the same clip again): the stitched
    # (toroidal) grid scrolls slowly upwards, without a seam, so the picture always moves.
    speed = spec.pick(5, 0.003, 0.006)
    return (
        f"life=s={grid_w}x{grid_h}:r={spec.fps}:rule={rule}:ratio={ratio}:"
        f"seed={spec.seed_int}:mold=12:life_color={two.ffmpeg}:"
        f"death_color={dark.ffmpeg}:mold_color={one.ffmpeg},scroll=v={speed}"
    )


def _cellular(spec: ClipSpec) -> str:
    rule = _CELLAUTO_RULES[spec.seed[3] % len(_CELLAUTO_RULES)]
    grid_w, grid_h = max(8, spec.field_w // 2), max(8, spec.field_h // 2)
    return (
        f"cellauto=s={grid_w}x{grid_h}:r={spec.fps}:rule={rule}:"
        f"seed={spec.seed_int}:ratio=0.5,format=gray,{_ramp_lut(spec.colours)}"
    )


def _mandelbrot_zoom(spec: ClipSpec) -> str:
    x, y = _MANDELBROT_POINTS[spec.seed[3] % len(_MANDELBROT_POINTS)]
    end_scale = spec.pick(4, 0.01, 0.2)
    frames = max(1, round(spec.duration_s * spec.fps))
    return (
        f"mandelbrot=s={spec.field_w}x{spec.field_h}:r={spec.fps}:maxiter=200:"
        f"start_x={x}:start_y={y}:start_scale=2.5:end_scale={end_scale}:end_pts={frames},"
        f"format=gray,{_ramp_lut(spec.colours)}"
    )


# Smooth patterns are scaled up with bicubic; cell patterns keep their hard edges.
_STYLES: tuple[tuple[str, Callable[[ClipSpec], str], str], ...] = (
    ("bands", _moving_bands, "bicubic"),
    ("rings", _drifting_rings, "bicubic"),
    ("plasma", _plasma, "bicubic"),
    ("gradient", _gradient, "bicubic"),
    ("life", _life, "neighbor"),
    ("cellular", _cellular, "neighbor"),
    ("mandelbrot", _mandelbrot_zoom, "bicubic"),
)
STYLE_NAMES: tuple[str, ...] = tuple(name for name, _, _ in _STYLES)


def _even(value: int) -> int:
    return max(2, value - value % 2)


def _spec(
    scene_hash: str, palette: Sequence[str], duration_s: float, width: int, height: int, fps: int
) -> ClipSpec:
    if duration_s <= 0:
        raise ValueError(f"duration_s must be positive, got {duration_s}")
    if width < 16 or height < 16 or fps < 1:
        raise ValueError(f"bad clip geometry {width}x{height}@{fps}")
    # Re-hash so any scene_hash format (hex, text) spreads evenly over the choices.
    seed = hashlib.sha256(f"mdame-visuals:{scene_hash}".encode()).digest()
    return ClipSpec(
        width=width,
        height=height,
        field_w=_even(width // 2),
        field_h=_even(height // 2),
        fps=fps,
        duration_s=duration_s,
        colours=_scene_colours(palette, seed),
        seed=seed,
    )


def clip_style(scene_hash: str) -> str:
    """The pattern family a scene hash maps to (for logs and tests)."""
    seed = hashlib.sha256(f"mdame-visuals:{scene_hash}".encode()).digest()
    return STYLE_NAMES[seed[0] % len(STYLE_NAMES)]


def procedural_clip_filter(
    scene_hash: str,
    palette: Sequence[str],
    duration_s: float,
    width: int = 360,
    height: int = 640,
    fps: int = 24,
) -> str:
    """The lavfi source graph for one scene's clip."""
    spec = _spec(scene_hash, palette, duration_s, width, height, fps)
    _, build, scale_flags = _STYLES[spec.seed[0] % len(_STYLES)]
    return f"{build(spec)},scale={width}:{height}:flags={scale_flags},setsar=1,format=yuv420p"


def procedural_clip_args(
    scene_hash: str,
    palette: Sequence[str],
    duration_s: float,
    out_path: str,
    width: int = 360,
    height: int = 640,
    fps: int = 24,
) -> list[str]:
    """ffmpeg arguments for a moving, palette-tinted H.264 clip without audio."""
    graph = procedural_clip_filter(scene_hash, palette, duration_s, width, height, fps)
    return [
        *FFMPEG_BASE,
        "-loglevel", "error",
        "-f", "lavfi",
        "-i", graph,
        "-t", f"{duration_s:.3f}",
        "-r", str(fps),
        "-an",
        "-c:v", "libx264",
        "-preset", "ultrafast",
        "-pix_fmt", "yuv420p",
        "-movflags", "+faststart",
        out_path,
    ]  # fmt: skip


def render_procedural_clip(
    scene_hash: str,
    palette: Sequence[str],
    duration_s: float,
    out_path: str,
    width: int = 360,
    height: int = 640,
    fps: int = 24,
) -> str:
    """Generate the clip at out_path and return the path."""
    args = procedural_clip_args(scene_hash, palette, duration_s, out_path, width, height, fps)
    # Generation runs ~3-6x real time on two cores; the floor covers slow, busy CI hosts.
    run_tool(args, timeout=60.0 + 4.0 * duration_s)
    return out_path
