"""Word-timed karaoke captions: line breaking, cue grouping, karaoke timing, the layout inside
the Shorts safe area (measured with the font's real advance widths), the hook's time on screen,
the check of recorded boxes, and libass drawing exactly there (pixels of real frames)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mdame_domain.captions import (
    HOOK_MAX_S,
    HOOK_MIN_S,
    MAX_TEXT_BLOCKS,
    MIN_FONT_SIZE,
    SHORTS_SAFE_ZONE,
    CaptionBox,
    CaptionLayoutError,
    CaptionStyle,
    ass_time,
    break_lines,
    build_captions,
    caption_groups,
    caption_layout_problems,
    caption_layout_stats,
    caption_regions,
    font_file,
    font_metrics,
    hook_end_s,
    recorded_block_problems,
    safe_box,
)
from mdame_domain.dimensions import (
    DimensionConfigError,
    dimension_from_json,
    load_registry,
    parse_dimension,
)
from mdame_domain.voice import WordTiming

WIDTH, HEIGHT = 1080, 1920
STYLE = CaptionStyle()
HIGHLIGHT = "&H00D4FF&"  # #FFD400 as a \1c override


def _timed(text: str, start: float = 0.0, step: float = 0.4) -> list[WordTiming]:
    return [
        WordTiming(word, round(start + i * step, 3), round(start + i * step + step * 0.8, 3))
        for i, word in enumerate(text.split())
    ]


def _events(ass: str, style: str) -> list[tuple[str, str, str]]:
    """(start, end, text) of every Dialogue line of one style."""
    found = []
    for line in ass.splitlines():
        if line.startswith("Dialogue: "):
            fields = line.removeprefix("Dialogue: ").split(",", 9)
            if fields[3] == style:
                found.append((fields[1], fields[2], fields[9]))
    return found


# ------------------------------------------------------------------------------------------
# Line breaking and cues
# ------------------------------------------------------------------------------------------
def test_break_lines_keeps_each_line_within_the_character_limit() -> None:
    words = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"]
    lines = break_lines(words, 12)
    assert lines == ["the quick", "brown fox", "jumps over", "the lazy dog"]
    assert all(len(line) <= 12 for line in lines)
    assert " ".join(lines) == " ".join(words)
    # A word longer than a line gets a line of its own rather than being lost.
    assert break_lines(["a", "supercalifragilistic", "b"], 8) == ["a", "supercalifragilistic", "b"]
    # The width predicate breaks too; no limit keeps one line.
    assert break_lines(words, None) == [" ".join(words)]
    assert break_lines(["aa", "bb", "cc"], None, lambda line: len(line) <= 5) == ["aa bb", "cc"]
    assert break_lines([], 10) == []


def test_caption_groups_respect_words_lines_and_sentences() -> None:
    words = _timed("One two three four five six seven eight. Nine ten")
    groups = caption_groups(words, CaptionStyle(max_words=6))
    assert [[w.word for w in g] for g in groups] == [
        ["One", "two", "three", "four", "five", "six"],
        ["seven", "eight."],
        ["Nine", "ten"],
    ]
    # Two lines of ten characters hold fewer words than six.
    narrow = caption_groups(words, CaptionStyle(max_chars_per_line=10, max_lines=2))
    for group in narrow:
        assert len(break_lines([w.word for w in group], 10)) <= 2
    assert sum(len(g) for g in narrow) == len(words)


# ------------------------------------------------------------------------------------------
# Karaoke timing
# ------------------------------------------------------------------------------------------
def test_each_word_is_highlighted_from_its_spoken_start() -> None:
    words = [
        WordTiming("Glass", 0.10, 0.42),
        WordTiming("rains", 0.47, 0.80),
        WordTiming("sideways", 0.83, 1.40),
        WordTiming("here.", 1.52, 1.90),
        WordTiming("Wind", 2.60, 2.90),
        WordTiming("howls", 2.95, 3.30),
    ]
    track = build_captions(words, STYLE)
    events = _events(track.ass, "Caption")
    assert len(events) == len(words)  # one event per spoken word
    for word, (start, _end, text) in zip(words, events, strict=True):
        assert start == ass_time(word.start_s), f"{word.word} highlighted late or early"
        # Exactly the spoken word carries the highlight colour.
        highlighted = re.findall(r"\{\\1c" + re.escape(HIGHLIGHT) + r"\}([^{]*)\{", text)
        assert highlighted == [word.word]
    # The highlight stays until the next word starts; the cue ends with its last word.
    assert [e[1] for e in events[:4]] == ["0:00:00.47", "0:00:00.83", "0:00:01.52", "0:00:01.90"]
    assert events[-1][1] == ass_time(3.30)
    # Every event of one cue is the same layout (no jitter as the highlight moves).
    layouts = {re.sub(r"\{\\1c[^}]*\}", "", e[2]) for e in events[:4]}
    assert len(layouts) == 1
    cue_boxes = [b for b in track.boxes if b.kind == "caption"]
    assert [(b.start_s, b.end_s) for b in cue_boxes] == [(0.1, 1.9), (2.6, 3.3)]


def test_the_hook_stays_while_it_is_said_over_the_captions_and_no_title_is_drawn() -> None:
    hook = "Did you know glass can rain sideways?"
    # The narration opens with the hook: 7 words, the last said until 0.4 * 6 + 0.32 s.
    words = _timed(f"{hook} It happens on a planet far away from here.", step=0.4)
    track = build_captions(words, STYLE, hook=hook)
    [event] = _events(track.ass, "Hook")
    said = words[6].end_s
    assert event[:2] == ("0:00:00.00", ass_time(said)) and said > HOOK_MIN_S
    assert "glass" in event[2]
    # Two kinds of text only, and at most two blocks on screen at any moment.
    assert {b.kind for b in track.boxes} == {"hook", "caption"}
    assert "Style: Title" not in track.ass and _events(track.ass, "Title") == []
    [hook_box] = [b for b in track.boxes if b.kind == "hook"]
    assert (hook_box.start_s, hook_box.end_s) == (0.0, round(said, 3))
    assert recorded_block_problems(track.boxes) == []
    for t in [b.start_s for b in track.boxes]:
        assert sum(1 for b in track.boxes if b.start_s <= t < b.end_s) <= MAX_TEXT_BLOCKS
    assert caption_layout_problems(track.boxes, WIDTH, HEIGHT) == []


def test_how_long_the_hook_stays() -> None:
    hook = "Glass rains sideways!"
    # Said quickly: still on screen long enough to read.
    assert hook_end_s(_timed("Glass rains sideways! Then more.", step=0.3), hook) == HOOK_MIN_S
    # Said slowly: gone once said, capped.
    assert hook_end_s(_timed("Glass rains sideways! Then more.", step=1.5), hook) == 4.2
    assert hook_end_s(_timed("Glass rains sideways! Then more.", step=3.0), hook) == HOOK_MAX_S
    # Punctuation and case aside, the narration must open with the hook's words.
    assert hook_end_s(_timed("glass, RAINS sideways. Then", step=1.5), hook) == 4.2
    assert hook_end_s(_timed("Today: glass rains sideways!", step=1.5), hook) == HOOK_MIN_S
    assert hook_end_s(_timed("Glass rains", step=1.5), hook) == HOOK_MIN_S
    # The settings' bounds, and nonsense refused.
    assert hook_end_s(_timed("Glass rains sideways!", step=0.3), hook, 1.0, 1.5) == 1.0
    with pytest.raises(ValueError):
        hook_end_s([], hook, 3.0, 2.0)
    # Three blocks recorded at once: what the layout must never produce.
    boxes = [
        _box(kind="hook", start_s=0.0, end_s=2.0, y=700),
        _box(start_s=0.0, end_s=1.0),
        _box(kind="title", start_s=0.0, end_s=5.0, y=320, text="A title"),
    ]
    [three] = recorded_block_problems(boxes)
    assert three.startswith("3 text blocks recorded on screen at 0.00s") and "title" in three


# ------------------------------------------------------------------------------------------
# Layout inside the safe area
# ------------------------------------------------------------------------------------------
def test_text_is_measured_with_the_fonts_real_advance_widths() -> None:
    metrics = font_metrics("DejaVu Sans")
    # The same file libass gets from fontconfig for the bold style.
    matched = subprocess.run(
        ["fc-match", "-f", "%{file}", "DejaVu Sans:bold"], capture_output=True, text=True
    ).stdout
    assert str(font_file("DejaVu Sans")) == matched
    assert metrics.width_px("WWWW", 64) > 2 * metrics.width_px("iiii", 64)
    # DejaVu Sans Bold: 'W' advances 2134 of 2048 units; libass sizes the face by its
    # Windows ascent + descent (2384 units), so 64 px of size is 64 / 2384 px per unit.
    assert metrics.width_px("W", 64) == pytest.approx(metrics.advances[ord("W")] * 64 / 2384)
    assert metrics.ascent + metrics.descent == 2384
    # A character the font lacks (CJK) is assumed wider than an em, never zero.
    assert metrics.width_px("漢", 64) > 64 * 2048 / 2384


@pytest.mark.parametrize(
    ("label", "text"),
    [
        ("long word", "Pneumonoultramicroscopicsilicovolcanoconiosis"),
        ("absurd word", "W" * 90),
        ("many words", " ".join(["extraordinary"] * 6)),
        ("cyrillic", "Стеклянный дождь идёт боком"),
        ("greek", "Γυάλινη βροχή πέφτει πλάγια"),
        ("cjk", "玻璃雨横着下 风速超过音速"),
        ("arabic", "مطر زجاجي يسقط جانبيا"),
        ("accents", "ÅÉÎÕÜ Ḝ́ Ṩ̂ façade"),
    ],
)
def test_every_box_lies_inside_the_safe_area(label: str, text: str) -> None:
    track = build_captions(_timed(text), STYLE, hook=text)
    assert caption_layout_problems(track.boxes, WIDTH, HEIGHT) == [], label
    safe = safe_box(WIDTH, HEIGHT)
    regions = caption_regions(WIDTH, HEIGHT)
    for box in track.boxes:
        assert safe.left <= box.x and box.right <= safe.right
        assert safe.top <= box.y and box.bottom <= safe.bottom
        region = regions[box.kind]
        assert region.left <= box.x and box.right <= region.right
        assert region.top <= box.y and box.bottom <= region.bottom
    sizes = [int(s) for s in re.findall(r"\\fs(\d+)", track.ass)]
    assert all(MIN_FONT_SIZE <= s <= STYLE.size for s in sizes)


def test_a_word_too_wide_for_the_line_shrinks_the_font_and_lines_stay_within_limits() -> None:
    words = _timed("Hi Pneumonoultramicroscopicsilicovolcanoconiosis")
    track = build_captions(words, STYLE)
    sizes = {int(s) for s in re.findall(r"\\fs(\d+)", track.ass)}
    assert max(sizes) < STYLE.size
    short = build_captions(_timed("Hi there"), STYLE)
    assert set(re.findall(r"\\fs(\d+)", short.ass)) == {str(STYLE.size)}
    # At most max_lines lines per caption event.
    many = build_captions(_timed(" ".join(["word"] * 40)), STYLE)
    for _, _, text in _events(many.ass, "Caption"):
        assert text.count("\\N") + 1 <= STYLE.max_lines


def test_text_that_cannot_fit_is_refused() -> None:
    with pytest.raises(CaptionLayoutError):
        build_captions([], STYLE, hook=" ".join(["Wwwwwwwwww"] * 400))
    with pytest.raises(CaptionLayoutError, match="Comic Sans"):
        build_captions([], CaptionStyle(font="Comic Sans"))


# ------------------------------------------------------------------------------------------
# The check of recorded boxes
# ------------------------------------------------------------------------------------------
def _box(**changes) -> dict:
    box = CaptionBox("caption", 0.0, 1.0, 200, 1200, 500, 150, "Glass rain").to_json()
    return {**box, **changes}


def test_layout_problems_name_the_box_and_the_side_it_crosses() -> None:
    assert caption_layout_problems([_box()], WIDTH, HEIGHT) == []
    # Into the bottom UI (the safe area ends at 75 % of 1920 = 1440).
    [low] = caption_layout_problems([_box(y=1400)], WIDTH, HEIGHT)
    assert "caption box 0 'Glass rain' at x=200 y=1400 w=500 h=150" in low
    assert "bottom by 110 px" in low
    # Under the right-hand button rail (the safe area ends at 950).
    [rail] = caption_layout_problems([_box(x=500)], WIDTH, HEIGHT)
    assert "right by 50 px" in rail
    [head] = caption_layout_problems([_box(kind="hook", y=100)], WIDTH, HEIGHT)
    assert head.startswith("hook box 0") and "top by 188 px" in head
    # Two boxes on screen together must not overlap; one after the other may.
    [overlap] = caption_layout_problems(
        [_box(), _box(kind="hook", y=1250, start_s=0.5, end_s=2.0)], WIDTH, HEIGHT
    )
    assert "overlaps" in overlap
    assert caption_layout_problems([_box(), _box(start_s=1.0, end_s=2.0)], WIDTH, HEIGHT) == []
    broken = caption_layout_problems([{"kind": "caption"}, _box(w=0), _box(x="1")], WIDTH, HEIGHT)
    assert [p.split(":")[0] for p in broken] == [
        "caption box 0",
        "caption box 2",
        "caption box 1 'Glass rain' at x=200 y=1200 w=0 h=150 (0.00-1.00s)",
    ]


def test_layout_stats_are_chartable() -> None:
    stats = caption_layout_stats([_box(), _box(y=1400, x=500)], WIDTH, HEIGHT)
    assert stats == {
        "boxes": 2,
        "max_bottom_fraction": round(1550 / 1920, 4),
        "max_right_fraction": round(1000 / 1080, 4),
        "min_margin_px": -110,
    }
    assert caption_layout_stats([], WIDTH, HEIGHT)["boxes"] == 0


# ------------------------------------------------------------------------------------------
# What libass really draws
# ------------------------------------------------------------------------------------------
def _frames(ass_path: str, times: list[float], fps: int = 25) -> list[np.ndarray]:
    """RGB frames of the ASS drawn on black, at the given times (ffmpeg + libass)."""
    wanted = [round(t * fps) for t in times]
    select = "+".join(f"eq(n\\,{n})" for n in wanted)
    raw = subprocess.run(
        ["ffmpeg", "-v", "error", "-f", "lavfi", "-i",
         f"color=c=black:s={WIDTH}x{HEIGHT}:r={fps}:d={max(times) + 0.5}", "-vf",
         f"format=rgb24,subtitles={ass_path},select='{select}'", "-fps_mode", "passthrough",
         "-pix_fmt", "rgb24", "-f", "rawvideo", "pipe:1"],
        capture_output=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    frames = np.frombuffer(raw, dtype=np.uint8).reshape(-1, HEIGHT, WIDTH, 3)
    assert len(frames) == len(times)
    return list(frames)


def _highlight_mask(frame: np.ndarray) -> np.ndarray:
    """Pixels of the highlight colour #FFD400 (white and black are not)."""
    r, g, b = (frame[..., i].astype(int) for i in range(3))
    return (r > 180) & (g > 130) & (b < 90)


def _drawn(frame: np.ndarray) -> np.ndarray:
    return frame.max(axis=2) > 24


def test_libass_draws_the_highlight_on_the_spoken_word_and_only_inside_the_boxes(
    tmp_path,
) -> None:
    words = [
        WordTiming("Hot", 0.0, 0.8),
        WordTiming("glass", 1.0, 1.8),
        WordTiming("rains", 2.0, 2.8),
        WordTiming("down", 3.0, 3.8),
        WordTiming("Стекло", 4.0, 4.8),
        WordTiming("Pneumonoultramicroscopicsilicovolcanoconiosis", 5.0, 5.8),
    ]
    track = build_captions(
        words, STYLE, hook="Did you know glass rains sideways on a faraway planet?"
    )
    ass_path = tmp_path / "karaoke.ass"
    ass_path.write_text(track.ass, encoding="utf-8")
    assert "Hot glass rains down" in track.boxes[0].text  # one line: the highlight moves right
    times = [0.4, 1.4, 2.4, 3.4, 4.4, 5.4]
    frames = _frames(str(ass_path), times)

    # The highlight moves across the words, left to right, as they are spoken.
    centres = []
    for t, frame in zip(times[:4], frames[:4], strict=True):
        mask = _highlight_mask(frame)
        assert mask.sum() > 200, f"no highlighted word at {t}s"
        ys, xs = np.nonzero(mask)
        assert ys.min() > HEIGHT // 2, "the highlight is in the caption, not the hook"
        centres.append(xs.mean())
    assert centres == sorted(centres) and centres[-1] - centres[0] > 200, centres

    safe = safe_box(WIDTH, HEIGHT)
    for t, frame in zip(times, frames, strict=True):
        drawn = _drawn(frame)
        assert drawn.any()
        # Nothing in the bottom UI band, under the right-hand rail or in the header.
        assert not drawn[safe.bottom :, :].any(), f"drawn in the bottom 25 % at {t}s"
        assert not drawn[:, safe.right :].any(), f"drawn under the right rail at {t}s"
        assert not drawn[: safe.top, :].any(), f"drawn in the header at {t}s"
        # Every drawn pixel lies inside a box recorded for an event on screen then.
        allowed = np.zeros_like(drawn)
        for box in track.boxes:
            if box.start_s <= t < box.end_s:
                allowed[box.y : box.bottom, box.x : box.right] = True
        outside = drawn & ~allowed
        assert not outside.any(), f"{int(outside.sum())} pixels drawn outside the boxes at {t}s"
    # The hook is drawn in the first two seconds (it is not said here) and gone after.
    [hook] = [b for b in track.boxes if b.kind == "hook"]
    assert _drawn(frames[0])[hook.y : hook.bottom, hook.x : hook.right].any()
    assert not _drawn(frames[-1])[hook.y : hook.bottom, hook.x : hook.right].any()
    assert caption_layout_problems(track.boxes, WIDTH, HEIGHT, SHORTS_SAFE_ZONE) == []


# ------------------------------------------------------------------------------------------
# The dimension's `captions:` style
# ------------------------------------------------------------------------------------------
def _dimension(**extra: object) -> dict:
    return {
        "slug": "tech",
        "title": "Tech",
        "visual_style": "neon",
        "palette": ["#000000", "#ffffff"],
        "feeds": ["feeds/tech.xml"],
        "accounts": [{"platform": "youtube", "handle": "tech"}],
        **extra,
    }


def test_caption_style_parses_with_defaults_and_round_trips() -> None:
    assert parse_dimension(_dimension(), "tech.yaml").captions == CaptionStyle()
    custom = {"font": "DejaVu Serif", "size": 72, "max_lines": 1, "highlight": "#00E5FF"}
    config = parse_dimension(_dimension(captions=custom), "tech.yaml")
    assert config.captions == CaptionStyle(
        font="DejaVu Serif", size=72, max_lines=1, highlight="#00E5FF"
    )
    assert dimension_from_json(config.to_json()) == config
    stored = config.to_json()
    del stored["captions"]  # a config stored before the field existed
    assert dimension_from_json(stored).captions == CaptionStyle()
    # Every shipped dimension file parses (tech.yaml spells the block out).
    registry = load_registry(Path(__file__).resolve().parents[2] / "dimensions")
    assert registry.errors == ()
    assert registry.by_slug()["tech"].captions == CaptionStyle()


@pytest.mark.parametrize(
    ("captions", "field"),
    [
        ("big", "captions"),
        ({"font": "Comic Sans MS"}, "captions.font"),
        ({"size": 8}, "captions.size"),
        ({"size": "64"}, "captions.size"),
        ({"size": True}, "captions.size"),
        ({"max_chars_per_line": 4}, "captions.max_chars_per_line"),
        ({"max_lines": 3}, "captions.max_lines"),
        ({"max_words": 0}, "captions.max_words"),
        ({"outline": -1}, "captions.outline"),
        ({"shadow": 40}, "captions.shadow"),
        ({"primary": "white"}, "captions.primary"),
        ({"highlight": "#FFD40"}, "captions.highlight"),
        ({"highlight": "#ffffff"}, "captions.highlight"),  # the same as primary: no highlight
        ({"colour": "#FFFFFF"}, "captions.colour"),
    ],
)
def test_bad_caption_style_names_the_field(captions: object, field: str) -> None:
    with pytest.raises(DimensionConfigError) as raised:
        parse_dimension(_dimension(captions=captions), "tech.yaml")
    assert raised.value.field_name == field
