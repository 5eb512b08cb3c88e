"""The video's thumbnail: the opening frame with the title drawn on it.

A vertical 1080x1920 JPEG (a Short's own frame) of at most 2 MB, which YouTube's
thumbnails.set accepts. The render takes the frame at THUMBNAIL_AT_S of its first scene clip,
before captions are burned in, so the title (the hook) is the only text on it; the title goes
in the upper part of the frame, clear of the platform's buttons.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import ffmpeg

from mdame_domain.mediatools import FFMPEG_BASE, MediaToolError, run_tool
from mdame_domain.timing import spent

THUMBNAIL_AT_S = 1.0
THUMBNAIL_WIDTH = 1080
THUMBNAIL_HEIGHT = 1920
MAX_THUMBNAIL_BYTES = 2 * 1024 * 1024  # thumbnails.set's limit
TITLE_FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"
TITLE_FONT_SIZE = 76
TITLE_CHARS_PER_LINE = 20
TITLE_MAX_LINES = 4
TITLE_TOP = 0.12  # the title block starts this far down the frame
JPEG_QUALITIES = (3, 6, 10, 16)  # ffmpeg's -q:v, best first: the first under the size limit
THUMBNAIL_RECIPE_VERSION = "thumbnail-v2"  # v2: the first clip's frame, not the render's


def title_lines(title: str) -> list[str]:
    """The title wrapped to TITLE_CHARS_PER_LINE, at most TITLE_MAX_LINES (the last shortened
    with an ellipsis)."""
    words = " ".join(title.split())
    if not words:
        raise ValueError("a thumbnail needs a non-empty title")
    lines = textwrap.wrap(words, TITLE_CHARS_PER_LINE, break_long_words=True)
    if len(lines) > TITLE_MAX_LINES:
        lines = lines[:TITLE_MAX_LINES]
        last = lines[-1]
        lines[-1] = (last[: TITLE_CHARS_PER_LINE - 1].rstrip() + "\u2026") if last else "\u2026"
    return lines


def build_thumbnail_args(
    video_path: str, line_files: list[str], out_path: str, at_s: float, quality: int
) -> list[str]:
    """One frame at at_s, scaled to the thumbnail size, one drawtext per title line (each
    centred; text from a file, so no title text needs filtergraph quoting)."""
    frame = (
        ffmpeg.input(video_path, ss=f"{max(0.0, at_s):.3f}")
        .video.filter(
            "scale", THUMBNAIL_WIDTH, THUMBNAIL_HEIGHT, force_original_aspect_ratio="increase"
        )
        .filter("crop", THUMBNAIL_WIDTH, THUMBNAIL_HEIGHT)
    )
    line_height = round(TITLE_FONT_SIZE * 1.3)
    top = round(THUMBNAIL_HEIGHT * TITLE_TOP)
    for i, line_file in enumerate(line_files):
        frame = frame.filter(
            "drawtext",
            fontfile=TITLE_FONT,
            textfile=line_file,
            expansion="none",
            fontsize=TITLE_FONT_SIZE,
            fontcolor="white",
            borderw=5,
            bordercolor="black",
            box=1,
            boxcolor="black@0.45",
            boxborderw=18,
            x="(w-text_w)/2",
            y=str(top + i * line_height),
        )
    out = ffmpeg.output(frame, out_path, vframes=1, **{"q:v": quality}, pix_fmt="yuvj420p")
    return [*FFMPEG_BASE, "-loglevel", "error", *out.get_args()]


def render_thumbnail(
    video_path: str, title: str, out_path: str, at_s: float = THUMBNAIL_AT_S
) -> str:
    """Write the thumbnail JPEG to out_path (at most MAX_THUMBNAIL_BYTES) and return it."""
    if not Path(TITLE_FONT).is_file():
        raise MediaToolError(
            "ffmpeg", "drawtext", f"{TITLE_FONT} is missing", reason="has no title font"
        )
    work = Path(out_path).parent
    line_files = []
    for i, line in enumerate(title_lines(title)):
        line_file = work / f"thumbnail-title-{i}.txt"
        line_file.write_text(line, encoding="utf-8")
        line_files.append(str(line_file))
    for quality in JPEG_QUALITIES:
        args = build_thumbnail_args(video_path, line_files, out_path, at_s, quality)
        with spent("encode"):
            run_tool(args, timeout=60.0)
        if not os.path.exists(out_path) or os.path.getsize(out_path) == 0:
            raise MediaToolError("ffmpeg", f"frame at {at_s}s of {video_path}", "", "made no JPEG")
        if os.path.getsize(out_path) <= MAX_THUMBNAIL_BYTES:
            return out_path
    raise MediaToolError(
        "ffmpeg",
        out_path,
        f"{os.path.getsize(out_path)} bytes at the lowest quality",
        reason=f"could not make a thumbnail under {MAX_THUMBNAIL_BYTES} bytes",
    )
