"""Caption cues, ASS output, and where libass really draws the captions."""

from __future__ import annotations

import re
import subprocess

import pytest

from mdame_domain.captions import (
    SHORTS_SAFE_ZONE,
    Box,
    Cue,
    ass_colour,
    ass_escape,
    ass_subtitles,
    ass_time,
    caption_box,
    caption_cues,
    caption_margins,
    safe_box,
    title_box,
)
from mdame_domain.voice import WordTiming

WIDTH, HEIGHT = 1080, 1920


def _words(*spec: tuple[str, float, float]) -> list[WordTiming]:
    return [WordTiming(word, start, end) for word, start, end in spec]


def test_cues_group_at_most_three_words_and_stop_at_sentence_ends() -> None:
    words = _words(
        ("One", 0.0, 0.3),
        ("two", 0.3, 0.6),
        ("three", 0.6, 0.9),
        ("four.", 0.9, 1.2),
        ("Five", 1.6, 1.9),
        ("six", 1.9, 2.2),
    )
    cues = caption_cues(words)
    assert [c.text for c in cues] == ["One two three", "four.", "Five six"]
    assert cues[0] == Cue(0.0, 0.9, "One two three")
    # The 0.4 s sentence pause is left as a gap; short gaps are bridged.
    assert cues[1].end_s == 1.2 and cues[2].start_s == 1.6
    assert [c.text for c in caption_cues(words, max_words=1)][:2] == ["One", "two"]
    with pytest.raises(ValueError):
        caption_cues(words, max_words=0)


def test_short_gaps_are_bridged() -> None:
    words = _words(("a", 0.0, 0.2), ("b", 0.2, 0.4), ("c", 0.4, 0.6), ("d", 0.7, 0.9))
    cues = caption_cues(words)
    assert cues[0].end_s == 0.7 == cues[1].start_s


def test_ass_helpers() -> None:
    assert ass_colour("#FF8800") == "&H000088FF"
    assert ass_colour("#000000", alpha=0x80) == "&H80000000"
    assert ass_time(3723.456) == "1:02:03.46"
    assert ass_time(0) == "0:00:00.00"
    escaped = ass_escape("a {b}\\N c\nd")
    assert "{" not in escaped.replace("\\{", "") and "}" not in escaped.replace("\\}", "")
    assert "\\N" not in escaped and "\n" not in escaped
    with pytest.raises(ValueError):
        ass_colour("white")


def test_margins_keep_captions_out_of_the_platform_ui() -> None:
    margins = caption_margins(WIDTH, HEIGHT)
    assert margins.vertical >= HEIGHT * SHORTS_SAFE_ZONE.bottom
    assert margins.right >= WIDTH * SHORTS_SAFE_ZONE.right
    assert margins.left == margins.right
    zone = safe_box(WIDTH, HEIGHT)
    assert zone == Box(left=0, top=288, right=950, bottom=1440)
    assert caption_box(WIDTH, HEIGHT).inside(zone)
    assert caption_box(WIDTH, HEIGHT, font_size=96).inside(zone)


def test_ass_document_style_line() -> None:
    doc = ass_subtitles([Cue(0.0, 1.0, "Hello {there}")])
    assert "PlayResX: 1080" in doc and "PlayResY: 1920" in doc
    style = next(line for line in doc.splitlines() if line.startswith("Style: "))
    fields = style.removeprefix("Style: ").split(",")
    assert fields[1] == "DejaVu Sans" and fields[2] == "72"
    assert fields[7] == "-1"  # bold
    assert fields[16] == "4"  # outline
    assert fields[18] == "2"  # bottom centre
    margins = caption_margins()
    assert [int(f) for f in fields[19:22]] == [margins.left, margins.right, margins.vertical]
    dialogue = doc.splitlines()[-1]
    assert dialogue.startswith("Dialogue: 0,0:00:00.00,0:00:01.00,Caption,")
    assert dialogue.endswith("Hello \\{there\\}")


def _bright_boxes(ass_path: str, seconds: int) -> list[Box | None]:
    """Render the ASS on black, one frame per second; box around the white caption pixels."""
    raw = subprocess.run(
        ["ffmpeg", "-v", "error", "-f", "lavfi", "-i",
         f"color=c=black:s={WIDTH}x{HEIGHT}:r=1:d={seconds}", "-vf",
         f"subtitles={ass_path},format=gray", "-f", "rawvideo", "pipe:1"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    frame_size = WIDTH * HEIGHT
    boxes: list[Box | None] = []
    for index in range(seconds):
        frame = raw[index * frame_size : (index + 1) * frame_size]
        rows = [y for y in range(HEIGHT) if max(frame[y * WIDTH : (y + 1) * WIDTH]) > 60]
        if not rows:
            boxes.append(None)
            continue
        columns = [
            x for x in range(WIDTH)
            if max(frame[x + y * WIDTH] for y in range(rows[0], rows[-1] + 1)) > 60
        ]  # fmt: skip
        boxes.append(Box(columns[0], rows[0], columns[-1], rows[-1]))
    return boxes


def test_libass_draws_every_caption_inside_the_box(tmp_path) -> None:
    cues = [
        Cue(0.0, 1.0, "Three short words"),
        Cue(1.0, 2.0, "WWWWWWWWWWWWWWWWWWWWWW"),  # one word too wide for the line
        Cue(2.0, 3.0, "Supercalifragilistic expialidocious MMMMMMMM"),
    ]
    ass_path = tmp_path / "captions.ass"
    ass_path.write_text(ass_subtitles(cues), encoding="utf-8")
    allowed = caption_box(WIDTH, HEIGHT)
    boxes = _bright_boxes(str(ass_path), len(cues))
    for cue, drawn in zip(cues, boxes, strict=True):
        assert drawn is not None, f"{cue.text!r} was not drawn"
        assert drawn.inside(allowed), f"{cue.text!r} drawn at {drawn}, allowed {allowed}"
    assert re.search(r"\{\\fs\d+\}WWW", ass_path.read_text())


def test_scene_titles_are_drawn_top_centre_inside_the_safe_zone(tmp_path) -> None:
    titles = [Cue(0.0, 1.0, "Webb spots water"), Cue(1.0, 2.0, "A much longer scene title here")]
    ass_path = tmp_path / "titles.ass"
    ass_path.write_text(ass_subtitles([], titles=titles), encoding="utf-8")
    allowed = title_box(WIDTH, HEIGHT)
    assert allowed.inside(safe_box(WIDTH, HEIGHT))
    for title, drawn in zip(titles, _bright_boxes(str(ass_path), len(titles)), strict=True):
        assert drawn is not None, f"{title.text!r} was not drawn"
        assert drawn.inside(allowed), f"{title.text!r} drawn at {drawn}, allowed {allowed}"
