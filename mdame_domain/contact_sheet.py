"""A render's contact sheet: one small JPEG tiling a frame from the middle of every scene, each
labelled with the scene's index, the engine that made its picture and its relevance score.

An operator sees a whole video at a glance: in the renders asset's materialization (a path and
a small inline image) and in the weekly report. Each tile is the scene's own picture at the
middle of its span, as the render shows it there (its clip looped, scaled and cropped to the
frame) but before the captions, as the relevance gate judged it: read from the scene clips, a
seek into each small file, so the sheet costs no decode of the render. One ffmpeg pass scales
them to TILE_W x TILE_H, puts a label band under each, tiles them SHEET_COLUMNS wide and draws
the labels with libass (the caption fonts) from an ASS document built here.

What a label says comes from the scene's result (scene_label): `engine` (the visuals engine that
made the clip) and `relevance.score` (the relevance gate's score, 0..1); either missing reads
as "—".
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ffmpeg

from mdame_domain.captions.ass import ass_escape
from mdame_domain.mediatools import FFMPEG_BASE, MediaToolError, run_tool
from mdame_domain.timing import spent

SHEET_RECIPE_VERSION = "contact-sheet-v2"  # v2: the scene clips' frames, not the render's
TILE_W, TILE_H = 144, 256
LABEL_H = 38
LABEL_FONT = "DejaVu Sans"
LABEL_SIZE = 14
SHEET_COLUMNS = 5
SHEET_QUALITY = 5  # ffmpeg's -q:v for the JPEG (2 best .. 31 worst)
BACKGROUND = "0x1c1c1c"
# The most of a sheet's bytes inlined in a materialization's Markdown (as a data URI): Dagster
# keeps every event's metadata, so a bigger sheet is only linked by its path.
INLINE_MAX_BYTES = 96 * 1024
NO_VALUE = "\u2014"


@dataclass(frozen=True)
class SheetScene:
    """One tile: the scene's index, the time into its clip the render shows at the middle of
    the scene's span (the clip loops), and what made its picture and how relevant it was
    judged, when known."""

    index: int
    at_s: float
    engine: str | None = None
    score: float | None = None

    def label(self) -> tuple[str, str]:
        score = NO_VALUE if self.score is None else f"{self.score:.2f}"
        return f"#{self.index} {self.engine or NO_VALUE}", f"score {score}"

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "at_s": self.at_s, "engine": self.engine,
                "score": self.score}  # fmt: skip


def scene_label(result: Mapping[str, Any]) -> tuple[str | None, float | None]:
    """The engine and relevance score a scene's result carries: `engine` (a string) and
    `relevance` -> `score` (a number); None for what it does not carry."""
    engine = result.get("engine")
    relevance = result.get("relevance")
    score = relevance.get("score") if isinstance(relevance, Mapping) else None
    value = None
    if isinstance(score, int | float) and not isinstance(score, bool) and math.isfinite(score):
        value = float(score)
    return str(engine) if isinstance(engine, str) and engine.strip() else None, value


def sheet_scenes(
    indices: Sequence[int],
    durations_s: Sequence[float],
    results: Sequence[Mapping[str, Any]],
) -> list[SheetScene]:
    """A tile per scene, in render order: the middle of its span (each scene's clip starts
    with the scene), labelled from the scene's result."""
    if not len(indices) == len(durations_s) == len(results):
        raise ValueError("one index, duration and result per scene")
    return [
        SheetScene(index, round(duration / 2, 3), *scene_label(result))
        for index, duration, result in zip(indices, durations_s, results, strict=True)
    ]


def sheet_size(count: int) -> tuple[int, int]:
    """Width and height of a sheet of `count` tiles."""
    columns = min(SHEET_COLUMNS, max(1, count))
    rows = max(1, math.ceil(count / columns))
    return columns * TILE_W, rows * (TILE_H + LABEL_H)


def labels_ass(scenes: Sequence[SheetScene]) -> str:
    """The labels as an ASS document on the sheet's own pixels, each in its tile's band."""
    width, height = sheet_size(len(scenes))
    columns = min(SHEET_COLUMNS, max(1, len(scenes)))
    header = [
        "[Script Info]",
        "ScriptType: v4.00+",
        f"PlayResX: {width}",
        f"PlayResY: {height}",
        "WrapStyle: 2",
        "ScaledBorderAndShadow: yes",
        "",
        "[V4+ Styles]",
        "Format: Name, Fontname, Fontsize, PrimaryColour, SecondaryColour, OutlineColour, "
        "BackColour, Bold, Italic, Underline, StrikeOut, ScaleX, ScaleY, Spacing, Angle, "
        "BorderStyle, Outline, Shadow, Alignment, MarginL, MarginR, MarginV, Encoding",
        f"Style: Label,{LABEL_FONT},{LABEL_SIZE},&H00FFFFFF,&H00FFFFFF,&H00000000,&H00000000,"
        "-1,0,0,0,100,100,0,0,1,0,0,7,0,0,0,1",
        "",
        "[Events]",
        "Format: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text",
    ]
    events = []
    for position, scene in enumerate(scenes):
        x = (position % columns) * TILE_W + 4
        y = (position // columns) * (TILE_H + LABEL_H) + TILE_H + 2
        first, second = scene.label()
        events.append(
            f"Dialogue: 0,0:00:00.00,9:00:00.00,Label,,0,0,0,,{{\\an7\\pos({x},{y})}}"
            f"{ass_escape(first)}\\N{ass_escape(second)}"
        )
    return "\n".join([*header, *events]) + "\n"


def contact_sheet_args(
    clip_paths: Sequence[str], scenes: Sequence[SheetScene], labels_path: str, out_path: str
) -> list[str]:
    """One ffmpeg pass: each scene's frame (a seek into its looped clip), scaled and cropped to
    a tile over its label band, tiled, labelled (ffmpeg-python quotes the graph)."""
    if not scenes or len(clip_paths) != len(scenes):
        raise ValueError("a contact sheet needs one clip per scene, and a scene at least")
    width, height = sheet_size(len(scenes))
    columns, rows = width // TILE_W, height // (TILE_H + LABEL_H)
    tiles = [
        ffmpeg.input(path, stream_loop=-1, ss=f"{scene.at_s:.3f}")
        .video.filter("trim", end_frame=1)
        .filter("setpts", "PTS-STARTPTS")
        .filter("scale", TILE_W, TILE_H, force_original_aspect_ratio="increase")
        .filter("crop", TILE_W, TILE_H)
        .filter("setsar", 1)
        .filter("format", "yuv420p")
        .filter("pad", TILE_W, TILE_H + LABEL_H, 0, 0, color=BACKGROUND)
        for path, scene in zip(clip_paths, scenes, strict=True)
    ]
    sheet = (
        ffmpeg.concat(*tiles, v=1, a=0)
        .filter("tile", f"{columns}x{rows}", color=BACKGROUND)
        .filter("setpts", "0")
        .filter("subtitles", filename=labels_path)
    )
    out = ffmpeg.output(sheet, out_path, vframes=1, **{"q:v": SHEET_QUALITY})
    return [*FFMPEG_BASE, "-loglevel", "error", *out.get_args()]


def render_contact_sheet(
    clip_paths: Sequence[str], scenes: Sequence[SheetScene], out_path: str, work: Path
) -> str:
    """The sheet of the scenes' clips as a JPEG at out_path (`work` holds the labels' ASS);
    the path."""
    labels = Path(work) / "contact-sheet.ass"
    labels.write_text(labels_ass(scenes), encoding="utf-8")
    with spent("encode"):
        run_tool(contact_sheet_args(clip_paths, scenes, str(labels), out_path), timeout=120.0)
    if not Path(out_path).is_file() or Path(out_path).stat().st_size == 0:
        raise MediaToolError("ffmpeg", f"contact sheet to {out_path}", "", reason="wrote nothing")
    return out_path


def inline_markdown(jpeg: bytes, alt: str, max_bytes: int = INLINE_MAX_BYTES) -> str | None:
    """A Markdown image of the JPEG as a data URI, or None when it is over max_bytes."""
    if len(jpeg) > max_bytes:
        return None
    return f"![{alt}](data:image/jpeg;base64,{base64.b64encode(jpeg).decode('ascii')})"
