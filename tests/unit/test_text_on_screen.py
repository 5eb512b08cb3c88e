"""Text blocks measured on rendered frames (mdame_domain.captions.onscreen): real libass text
burned over the offline visuals' moving patterns by ffmpeg and encoded with libx264, at the
tiny profile's 216x384, then decoded and read back. The hook and the captions are two blocks;
a third block drawn over them is counted, and found outside the recorded boxes when the render
did not record it; frames with no text where text was recorded say so; the blocky patterns
behind the text (cellular automata, a game of life) are not text."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from mdame_domain.captions import (
    MAX_TEXT_BLOCKS,
    CaptionBox,
    build_captions,
    read_text_on_screen,
    recorded_block_problems,
    text_on_screen_problems,
    text_on_screen_stats,
)
from mdame_domain.visuals import clip_style, procedural_clip_filter
from mdame_domain.voice import WordTiming

W, H, FPS, SECONDS = 216, 384, 24, 5.0
HOOK = "Did you know glass rains sideways?"
NARRATION = "Did you know glass rains sideways? It happens on a planet far away from here."
# A title block as captions used to draw one: the caption style, at the top of the safe area.
TITLE = (
    "Dialogue: 1,0:00:00.00,0:00:05.00,Hook,,0,0,0,,{\\an8\\pos(540,330)\\fs60}"
    "Glass rain, faster than sound"
)
TITLE_BOX = CaptionBox("title", 0.0, 5.0, 160, 310, 760, 90, "Glass rain, faster than sound")


def _words() -> list[WordTiming]:
    return [
        WordTiming(word, round(0.3 * i, 3), round(0.3 * i + 0.25, 3))
        for i, word in enumerate(NARRATION.split())
    ]


def _scene_hash(style: str) -> str:
    return next(
        h
        for h in (hashlib.sha256(f"onscreen-{i}".encode()).hexdigest() for i in range(200))
        if clip_style(h) == style
    )


def _video(tmp_path: Path, name: str, ass: str | None, style: str, palette: tuple[str, ...]):
    """A SECONDS-long clip of the offline pattern `style` with the ASS burned in."""
    source = procedural_clip_filter(_scene_hash(style), palette, SECONDS, W, H, FPS)
    if ass is not None:
        (tmp_path / f"{name}.ass").write_text(ass, encoding="utf-8")
        source += f",subtitles={tmp_path / f'{name}.ass'}"
    out = tmp_path / f"{name}.mp4"
    subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", source,
         "-t", str(SECONDS), "-r", str(FPS), "-c:v", "libx264", "-preset", "veryfast",
         "-crf", "23", "-pix_fmt", "yuv420p", str(out)],
        check=True, timeout=120,
    )  # fmt: skip
    return str(out)


def _read(path: str, boxes):
    return read_text_on_screen(path, boxes, [SECONDS], SECONDS, W, H, FPS)


# Two shipped dimensions' palettes: cooking's amber is near the captions' highlight yellow.
SCIENCE = ("#1b5e20", "#aeea00", "#004d40")
COOKING = ("#e65100", "#ffca28", "#bf360c")


@pytest.mark.parametrize(
    ("style", "palette"),
    [("rings", SCIENCE), ("cellular", SCIENCE), ("life", COOKING)],
)
def test_the_hook_and_the_captions_are_two_blocks(tmp_path: Path, style, palette) -> None:
    track = build_captions(_words(), hook=HOOK)
    readings = _read(_video(tmp_path, "good", track.ass, style, palette), track.boxes)

    assert text_on_screen_problems(readings) == []
    stats = text_on_screen_stats(readings)
    assert stats["max_blocks_seen"] == MAX_TEXT_BLOCKS
    assert stats["blocks_outside_boxes"] == 0
    # Not every window: one spanning a change of cue sees neither.
    assert stats["recorded_text_seen_fraction"] >= 0.7
    # While the hook is said both are seen, each on its own recorded box.
    [hook] = [i for i, b in enumerate(track.boxes) if b.kind == "hook"]
    during = [r for r in readings if r.at_s < track.boxes[hook].end_s - 0.2]
    assert during and all(hook in r.matched and r.count == 2 for r in during)


def test_a_third_block_is_counted_on_the_frames(tmp_path: Path) -> None:
    track = build_captions(_words(), hook=HOOK)
    path = _video(tmp_path, "three", track.ass + TITLE + "\n", "rings", SCIENCE)

    # Recorded honestly, the layout alone already says so, and so do the frames.
    recorded = [*track.boxes, TITLE_BOX]
    assert recorded_block_problems(recorded)[0].startswith("3 text blocks recorded")
    honest = text_on_screen_problems(_read(path, recorded))
    assert any(p.startswith("3 text blocks on screen at 0.") for p in honest), honest
    assert not any("outside the recorded" in p for p in honest)

    # Not recorded: only the frames show it, drawn where no box says text is.
    hidden = _read(path, track.boxes)
    problems = text_on_screen_problems(hidden)
    assert any(p.startswith("3 text blocks on screen at 0.") for p in problems), problems
    outside = [p for p in problems if p.startswith("text drawn outside the recorded caption")]
    assert outside and all("y=" in p for p in outside)
    stats = text_on_screen_stats(hidden)
    assert stats["max_blocks_seen"] == 3 and stats["blocks_outside_boxes"] >= 1
    # It is seen for as long as it is drawn: after the hook, caption and title are two.
    late = [r for r in hidden if r.at_s > 3.0 and r.recorded]
    assert late and all(None in r.matched for r in late)


def test_frames_without_the_recorded_text_cannot_vouch_for_it(tmp_path: Path) -> None:
    track = build_captions(_words(), hook=HOOK)
    readings = _read(_video(tmp_path, "bare", None, "rings", SCIENCE), track.boxes)

    [problem] = text_on_screen_problems(readings)
    assert problem.startswith("no recorded caption box shows text on any of the")
    assert text_on_screen_stats(readings)["recorded_text_seen_fraction"] == 0.0
