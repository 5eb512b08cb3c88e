"""Technical checks on rendered media, with ffprobe and ffmpeg's analysis filters."""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from fractions import Fraction

from mdame_domain.mediatools import FFMPEG_BASE, MediaToolError, run_tool

SIGNATURE_SIZE = 32
_MEAN_VOLUME = re.compile(r"mean_volume:\s*(-?inf|-?\d+(?:\.\d+)?) dB")
_BLACK_DURATION = re.compile(r"black_duration:\s*(\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class MediaProbe:
    width: int
    height: int
    duration_s: float
    video_codec: str
    audio_codec: str | None
    fps: float
    size_bytes: int


@dataclass(frozen=True)
class RenderRules:
    width: int = 1080
    height: int = 1920
    min_duration_s: float = 15.0
    max_duration_s: float = 60.0
    min_mean_volume_db: float = -40.0
    max_black_fraction: float = 0.2


def _analysis_timeout(duration_s: float) -> float:
    return 60.0 + 2.0 * duration_s


def _rate(text: str | None) -> float:
    try:
        return float(Fraction(text)) if text and text != "0/0" else 0.0
    except (ValueError, ZeroDivisionError):
        return 0.0


def probe_media(path: str) -> MediaProbe:
    """Geometry, duration, codecs and frame rate of the first video and audio streams."""
    args = [
        "ffprobe", "-v", "error", "-print_format", "json",
        "-show_format", "-show_streams", path,
    ]  # fmt: skip
    info = json.loads(run_tool(args, timeout=60.0).stdout or b"{}")
    streams = info.get("streams", [])
    video = next((s for s in streams if s.get("codec_type") == "video"), None)
    audio = next((s for s in streams if s.get("codec_type") == "audio"), None)
    if video is None:
        raise MediaToolError("ffprobe", path, "no video stream", reason="found no video")
    duration = info.get("format", {}).get("duration") or video.get("duration") or 0.0
    return MediaProbe(
        width=int(video.get("width", 0)),
        height=int(video.get("height", 0)),
        duration_s=float(duration),
        video_codec=str(video.get("codec_name", "")),
        audio_codec=str(audio["codec_name"]) if audio else None,
        fps=_rate(video.get("avg_frame_rate")) or _rate(video.get("r_frame_rate")),
        size_bytes=os.path.getsize(path),
    )


def mean_volume_db(path: str) -> float:
    """Mean volume of the first audio stream in dBFS (-inf for digital silence)."""
    args = [*FFMPEG_BASE, "-loglevel", "info", "-i", path,
            "-map", "0:a:0", "-af", "volumedetect", "-f", "null", "-"]  # fmt: skip
    stderr = run_tool(args, timeout=120.0).stderr.decode("utf-8", "replace")
    match = _MEAN_VOLUME.search(stderr)
    if not match:
        raise MediaToolError("ffmpeg", "volumedetect " + path, stderr[-500:], reason="no reading")
    return float(match.group(1))


def black_fraction(path: str, duration_s: float | None = None) -> float:
    """Share of the video's duration that blackdetect calls black (0.0 - 1.0)."""
    duration = duration_s if duration_s is not None else probe_media(path).duration_s
    if duration <= 0:
        return 1.0
    # Analysing a downscaled copy is as good for "is the frame black" and far cheaper.
    args = [*FFMPEG_BASE, "-loglevel", "info", "-i", path, "-map", "0:v:0", "-an",
            "-vf", "scale=270:-2,blackdetect=d=0.1:pix_th=0.10", "-f", "null", "-"]  # fmt: skip
    stderr = run_tool(args, timeout=_analysis_timeout(duration)).stderr.decode("utf-8", "replace")
    black = math.fsum(float(m) for m in _BLACK_DURATION.findall(stderr))
    return min(1.0, black / duration)


def frame_signature(path: str, at_s: float) -> bytes:
    """One frame at at_s as 32x32 8-bit grey pixels: cheap to compare between frames."""
    args = [*FFMPEG_BASE, "-loglevel", "error", "-ss", f"{max(0.0, at_s):.3f}", "-i", path,
            "-frames:v", "1", "-vf", f"scale={SIGNATURE_SIZE}:{SIGNATURE_SIZE},format=gray",
            "-f", "rawvideo", "pipe:1"]  # fmt: skip
    data = run_tool(args, timeout=60.0).stdout
    if len(data) != SIGNATURE_SIZE * SIGNATURE_SIZE:
        raise MediaToolError(
            "ffmpeg",
            f"frame at {at_s}s of {path}",
            f"got {len(data)} bytes",
            reason="returned no frame",
        )
    return data


def mean_abs_diff(a: bytes, b: bytes) -> float:
    if len(a) != len(b) or not a:
        raise ValueError(f"signatures differ in size: {len(a)} vs {len(b)}")
    return sum(abs(x - y) for x, y in zip(a, b, strict=True)) / len(a)


def frames_differ(a: bytes, b: bytes, min_mean_abs_diff: float = 8.0) -> bool:
    """True when two frame signatures differ visibly (mean absolute grey difference)."""
    return mean_abs_diff(a, b) >= min_mean_abs_diff


DEFAULT_RENDER_RULES = RenderRules()


def check_render(path: str, rules: RenderRules = DEFAULT_RENDER_RULES) -> list[str]:
    """Human-readable problems with a rendered video; an empty list means it passes."""
    try:
        probe = probe_media(path)
    except MediaToolError as exc:
        return [f"not a readable video: {exc}"]
    problems: list[str] = []
    if (probe.width, probe.height) != (rules.width, rules.height):
        problems.append(
            f"frame is {probe.width}x{probe.height}, expected {rules.width}x{rules.height}"
        )
    if not rules.min_duration_s <= probe.duration_s <= rules.max_duration_s:
        problems.append(
            f"duration {probe.duration_s:.2f}s outside "
            f"{rules.min_duration_s:.0f}-{rules.max_duration_s:.0f}s"
        )
    if probe.audio_codec is None:
        problems.append("no audio track")
    else:
        volume = mean_volume_db(path)
        if volume < rules.min_mean_volume_db:
            problems.append(
                f"audio too quiet: mean volume {volume:.1f} dB < {rules.min_mean_volume_db:.1f} dB"
            )
    black = black_fraction(path, probe.duration_s)
    if black > rules.max_black_fraction:
        problems.append(f"{black:.0%} of the video is black (max {rules.max_black_fraction:.0%})")
    return problems
