"""The contact sheet: a tile per scene, its clip's picture at the middle of the scene's span,
labelled with the scene's index, engine and relevance score (or a dash), made by ffmpeg and
libass from real clips."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from mdame_domain.contact_sheet import (
    INLINE_MAX_BYTES,
    LABEL_H,
    TILE_H,
    TILE_W,
    SheetScene,
    inline_markdown,
    labels_ass,
    render_contact_sheet,
    scene_label,
    sheet_scenes,
    sheet_size,
)

FPS = 24
COLOURS = ("red", "lime", "blue", "yellow", "cyan", "magenta", "white")


def test_what_a_scene_result_says_about_its_picture() -> None:
    assert scene_label({"uri": "media://x", "worker": "h:1"}) == (None, None)
    assert scene_label({"engine": "generated", "relevance": {"score": 0.92, "reason": "r"}}) == (
        "generated",
        0.92,
    )
    assert scene_label({"engine": "stock", "relevance": {"score": 1}}) == ("stock", 1.0)
    # Anything else is not known: a dash, never a wrong label.
    for bad in (
        {"engine": "", "relevance": {"score": "high"}},
        {"engine": 3, "relevance": 0.5},
        {"engine": None, "relevance": {"score": True}},
        {"relevance": {"score": math.nan}},
    ):
        assert scene_label(bad) == (None, None), bad
    assert SheetScene(0, 1.0).label() == ("#0 \u2014", "score \u2014")
    assert SheetScene(3, 1.0, "stock", 0.125).label() == ("#3 stock", "score 0.12")


def test_each_tile_is_the_middle_of_its_scene() -> None:
    scenes = sheet_scenes([0, 1, 2], [2.0, 3.0, 1.5], [{}, {"engine": "stock"}, {}])
    assert [s.at_s for s in scenes] == [1.0, 1.5, 0.75]  # into each scene's own clip
    assert [s.engine for s in scenes] == [None, "stock", None]
    with pytest.raises(ValueError):
        sheet_scenes([0, 1], [2.0], [{}, {}])
    assert sheet_size(1) == (TILE_W, TILE_H + LABEL_H)
    assert sheet_size(5) == (5 * TILE_W, TILE_H + LABEL_H)
    assert sheet_size(7) == (5 * TILE_W, 2 * (TILE_H + LABEL_H))
    ass = labels_ass(
        [SheetScene(0, 1.0, "generated", 0.9), SheetScene(1, 2.0), SheetScene(2, 3.0, "{x}")]
    )
    assert "PlayResX: 432" in ass and "PlayResY: 294" in ass
    assert "#0 generated\\Nscore 0.90" in ass and "#1 \u2014\\Nscore \u2014" in ass
    assert "\\{x\\}" in ass  # an engine name is text, never an override block


def _clip(path: Path, colours: tuple[str, str]) -> str:
    """A 216x384 clip of 2 s: one flat colour for a second, then another."""
    a, b = (f"color=c={c}:s=216x384:r={FPS}:d=1" for c in colours)
    subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", a, "-f", "lavfi",
         "-i", b, "-filter_complex", "[0:v][1:v]concat=n=2:v=1:a=0[v]", "-map", "[v]",
         "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", str(path)],
        check=True, timeout=120,
    )  # fmt: skip
    return str(path)


def _pixels(jpeg: str, width: int):
    """The JPEG's pixels: a function of (x, y) -> (r, g, b)."""
    raw = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", jpeg, "-vf", "format=rgb24", "-f", "rawvideo", "-"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    return lambda x, y: tuple(raw[(y * width + x) * 3 : (y * width + x) * 3 + 3])


def test_the_sheet_tiles_every_scene_in_order_with_its_label(tmp_path: Path) -> None:
    # Each clip shows black in its first second, then the scene's colour: the middle of a
    # scene of 3 s, 1.5 s into its clip, is its colour. The render loops a clip shorter than
    # its scene, and so does the sheet: 2.5 s into a 2 s clip is its black first second.
    clips = [_clip(tmp_path / f"c{i}.mp4", ("black", c)) for i, c in enumerate(COLOURS)]
    durations = [3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 5.0]
    results = [{"engine": "generated", "relevance": {"score": 0.9}}, *([{}] * 6)]
    scenes = sheet_scenes(list(range(7)), durations, results)

    out = render_contact_sheet(clips, scenes, str(tmp_path / "sheet.jpg"), tmp_path)

    data = Path(out).read_bytes()
    assert data[:3] == b"\xff\xd8\xff"
    probe = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "stream=width,height", "-of", "json", out],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    [stream] = json.loads(probe)["streams"]
    assert (stream["width"], stream["height"]) == sheet_size(7) == (720, 588)
    pixel = _pixels(out, stream["width"])
    # Each tile shows its own scene's colour, in order: 5 to a row.
    expected = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (0, 255, 255),
                (255, 0, 255), (255, 255, 255)]  # fmt: skip
    expected[-1] = (0, 0, 0)
    for i, colour in enumerate(expected):
        x = (i % 5) * TILE_W + TILE_W // 2
        y = (i // 5) * (TILE_H + LABEL_H) + TILE_H // 2
        seen = pixel(x, y)
        assert all(abs(a - b) < 40 for a, b in zip(seen, colour, strict=True)), (i, seen)
    # The label band has text drawn in it (white on the dark band), the empty cells none.
    band = [pixel(x, TILE_H + LABEL_H // 2 - 6) for x in range(4, 60, 2)]
    assert max(max(p) for p in band) > 200
    empty = pixel(4 * TILE_W + TILE_W // 2, TILE_H + LABEL_H + TILE_H // 2)
    assert max(empty) < 60
    # Small enough to show inline in a materialization.
    markdown = inline_markdown(data, "sheet")
    assert markdown is not None and markdown.startswith("![sheet](data:image/jpeg;base64,")
    assert inline_markdown(b"x" * (INLINE_MAX_BYTES + 1), "sheet") is None
