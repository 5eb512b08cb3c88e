"""The ASS helpers, the safe box's geometry, and cue timing of build_captions (the layout, the
karaoke highlight and libass's drawing are in test_karaoke_captions.py)."""

from __future__ import annotations

import pytest

from mdame_domain.captions import (
    Box,
    CaptionStyle,
    ass_colour,
    ass_escape,
    ass_time,
    build_captions,
    safe_box,
)
from mdame_domain.voice import WordTiming

WIDTH, HEIGHT = 1080, 1920


def _words(*spec: tuple[str, float, float]) -> list[WordTiming]:
    return [WordTiming(word, start, end) for word, start, end in spec]


def test_short_gaps_between_cues_are_bridged_and_sentence_pauses_kept() -> None:
    words = _words(
        ("a", 0.0, 0.2), ("b", 0.2, 0.4), ("c", 0.4, 0.6),
        ("d", 0.7, 0.9), ("e", 0.9, 1.1), ("end.", 1.1, 1.3),
        ("Next", 1.8, 2.0),
    )  # fmt: skip
    track = build_captions(words, CaptionStyle(max_words=3))
    cues = [(b.start_s, b.end_s, b.text) for b in track.boxes if b.kind == "caption"]
    # The 0.1 s gap is closed, so the captions do not flicker off between words; the 0.5 s
    # sentence pause is left as a gap.
    assert cues == [(0.0, 0.7, "a b c"), (0.7, 1.3, "d e end."), (1.8, 2.0, "Next")]


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


def test_spoken_braces_are_literal_text_in_the_document() -> None:
    track = build_captions(_words(("Hello", 0.0, 0.5), ("{there}", 0.5, 1.0)))
    assert "PlayResX: 1080" in track.ass and "PlayResY: 1920" in track.ass
    dialogues = [line for line in track.ass.splitlines() if line.startswith("Dialogue: ")]
    assert len(dialogues) == 2 and all("\\{there\\}" in line for line in dialogues)


def test_safe_box_leaves_out_the_platform_ui() -> None:
    assert safe_box(WIDTH, HEIGHT) == Box(left=0, top=288, right=950, bottom=1440)
