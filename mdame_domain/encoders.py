"""Video encoder presets per target.

libx264 on a CPU host; h264_nvenc on a GPU host when ffmpeg lists it and a CUDA device can
actually encode (the listing alone only says ffmpeg was built with it). MDAME_VIDEO_ENCODER
picks: auto (the default: detect once, fall back to libx264), libx264 or h264_nvenc (refused
when unavailable, rather than silently rendering on the CPU).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from mdame_core import settings
from mdame_domain.mediatools import FFMPEG_BASE, MediaToolError, run_tool

ENCODER_ENV = "MDAME_VIDEO_ENCODER"
ENCODER_CHOICES = ("auto", "libx264", "h264_nvenc")


@dataclass(frozen=True)
class EncoderPreset:
    """An encoder and the options that go with it; every option changes the output bytes,
    so the whole preset is part of a render's input digest."""

    name: str
    options: tuple[tuple[str, str], ...]

    def output_options(self) -> dict[str, str]:
        return dict(self.options)

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "options": [list(o) for o in self.options]}


LIBX264 = EncoderPreset(
    "libx264",
    (
        ("c:v", "libx264"),
        ("preset", "veryfast"),
        ("crf", "23"),
        ("profile:v", "high"),
        ("pix_fmt", "yuv420p"),
    ),
)
# p5/hq with constant-quality VBR: about libx264 veryfast's size at CRF 23.
H264_NVENC = EncoderPreset(
    "h264_nvenc",
    (
        ("c:v", "h264_nvenc"),
        ("preset", "p5"),
        ("tune", "hq"),
        ("rc", "vbr"),
        ("cq", "23"),
        ("b:v", "0"),
        ("profile:v", "high"),
        ("pix_fmt", "yuv420p"),
    ),
)
PRESETS = {p.name: p for p in (LIBX264, H264_NVENC)}


class EncoderUnavailable(RuntimeError):
    """The configured encoder cannot run on this host."""


def choose_encoder(
    requested: str, listed: Iterable[str], cuda_usable: bool | Callable[[], bool]
) -> EncoderPreset:
    """The preset for `requested` given ffmpeg's encoder names and whether NVENC can encode
    here (a bool, or a function asked only when the answer matters)."""
    choice = (requested or "auto").strip().lower()
    if choice not in ENCODER_CHOICES:
        raise ValueError(
            f"{ENCODER_ENV} must be one of {', '.join(ENCODER_CHOICES)}, not {requested!r}"
        )
    names = set(listed)

    def nvenc_ok() -> bool:
        if "h264_nvenc" not in names:
            return False
        return cuda_usable() if callable(cuda_usable) else cuda_usable

    if choice == "libx264" or (choice == "auto" and not nvenc_ok()):
        if "libx264" not in names:
            raise EncoderUnavailable("this ffmpeg has no libx264 encoder")
        return LIBX264
    if choice == "h264_nvenc" and not nvenc_ok():
        raise EncoderUnavailable(
            f"{ENCODER_ENV}=h264_nvenc, but "
            + (
                "this ffmpeg was built without it"
                if "h264_nvenc" not in names
                else "no CUDA device could encode with it"
            )
        )
    return H264_NVENC


_ENCODER_LINE = re.compile(r"^[ \t]*V[A-Z.]{5}[ \t]+([A-Za-z0-9_]+)[ \t]", re.MULTILINE)


def parse_encoder_listing(text: str) -> frozenset[str]:
    """Video encoder names from `ffmpeg -encoders`."""
    return frozenset(_ENCODER_LINE.findall(text))


@functools.lru_cache(maxsize=1)
def listed_encoders() -> frozenset[str]:
    out = run_tool(["ffmpeg", "-hide_banner", "-encoders"], timeout=30.0).stdout
    return parse_encoder_listing(out.decode("utf-8", "replace"))


@functools.lru_cache(maxsize=1)
def nvenc_usable() -> bool:
    """One tiny NVENC encode: proves the driver, a device and a free session (detected once)."""
    args = [
        *FFMPEG_BASE, "-loglevel", "error", "-f", "lavfi", "-i", "color=black:s=256x256:d=0.1",
        "-frames:v", "2", "-c:v", "h264_nvenc", "-f", "null", "-",
    ]  # fmt: skip
    try:
        run_tool(args, timeout=30.0)
    except MediaToolError:
        return False
    return True


def video_encoder(environ: Mapping[str, str] | None = None) -> EncoderPreset:
    """The preset this host renders with (MDAME_VIDEO_ENCODER, default auto)."""
    return choose_encoder(
        settings.raw(ENCODER_ENV, environ) or "auto", listed_encoders(), nvenc_usable
    )
