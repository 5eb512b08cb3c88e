"""Where a video cuts from one scene's clip to the next, measured on its frames against the
clips (mdame_domain/scene_cuts.py): real procedural clips and real ffmpeg, small frames."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from mdame_domain.mediatools import FFMPEG_BASE, run_tool
from mdame_domain.scene_cuts import (
    CutReading,
    cut_offset,
    cut_problems,
    cut_windows,
    measure_cuts,
    read_cuts,
    select_expression,
)
from mdame_domain.visuals import render_procedural_clip

FPS = 24
PALETTE = ("#1e3a8a", "#b91c1c", "#0f766e")


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> list[str]:
    work = tmp_path_factory.mktemp("cuts")
    return [
        render_procedural_clip(
            hashlib.sha256(f"cut-{i}".encode()).hexdigest(), PALETTE, 1.5, str(work / f"{i}.mp4"),
            width=180, height=320,
        )
        for i in range(3)
    ]  # fmt: skip


def _video(clips: list[str], frames: list[int], out: Path) -> str:
    """The clips cut as the render cuts them (each looped, trimmed to its frame count, fitted
    to the frame), concatenated, at 270x480."""
    args = [*FFMPEG_BASE, "-loglevel", "error"]
    for clip in clips:
        args += ["-stream_loop", "-1", "-i", clip]
    chains = [
        f"[{i}:v]fps={FPS},trim=end_frame={n},setpts=PTS-STARTPTS,"
        f"scale=270:480:force_original_aspect_ratio=increase,crop=270:480,setsar=1[v{i}]"
        for i, n in enumerate(frames)
    ]
    joined = "".join(f"[v{i}]" for i in range(len(frames)))
    graph = ";".join([*chains, f"{joined}concat=n={len(frames)}:v=1:a=0[v]"])
    args += ["-filter_complex", graph, "-map", "[v]", "-c:v", "libx264", "-preset", "ultrafast",
             "-pix_fmt", "yuv420p", "-r", str(FPS), str(out)]  # fmt: skip
    run_tool(args, timeout=120)
    return str(out)


def test_the_cuts_are_found_on_the_frame_and_a_late_cut_is_found_late(clips, tmp_path):
    # Scenes of 2.0, 2.5 and 1.5 s: cuts at frames 48 and 108 (the clips loop past 1.5 s).
    video = _video(clips, [48, 60, 36], tmp_path / "on.mp4")
    readings = measure_cuts(video, clips, [2.0, 4.5], 6.0, FPS)
    assert [(r.scene, r.found_s, r.note) for r in readings] == [(1, 2.0, ""), (2, 4.5, "")]
    assert all(r.low_s == r.high_s == r.found_s and r.residual < 10 for r in readings)
    assert cut_problems(readings, [2.0, 4.5], 0.25) == []

    # The same scenes, the second cut 0.5 s late (12 frames).
    late = _video(clips, [48, 72, 24], tmp_path / "late.mp4")
    readings = measure_cuts(late, clips, [2.0, 4.5], 6.0, FPS)
    assert [r.found_s for r in readings] == [2.0, 5.0]
    assert cut_offset(readings[1], 4.5) == pytest.approx(0.5)
    [problem] = cut_problems(readings, [2.0, 4.5], 0.25, ["", "Follow"])
    assert problem == (
        "scene 2 ('Follow'...) starts at 5.00s in the render, its words at 4.50s: 0.50s off "
        "(at most 0.25s)"
    )
    # Within the tolerance it passes.
    assert cut_problems(readings, [2.0, 4.8], 0.25) == []


def test_a_cut_outside_the_search_is_at_its_edge_and_fails(clips, tmp_path):
    video = _video(clips, [48, 60, 36], tmp_path / "on.mp4")
    [first, _] = measure_cuts(video, clips, [3.5, 4.6], 6.0, FPS, search_s=0.5)
    # Looked for 3.0-4.0 s (and no nearer than half way to the next cut): all scene 1 there.
    assert first.found_s == pytest.approx(3.0, abs=1 / FPS) and "earlier" in first.note
    [problem, *_] = cut_problems([first], [3.5], 0.25)
    assert problem.startswith("scene 1 starts at 3.0") and "the cut may be earlier" in problem


def test_frames_that_show_neither_clip_are_no_cut(clips, tmp_path):
    other = tmp_path / "other.mp4"
    run_tool([*FFMPEG_BASE, "-loglevel", "error", "-f", "lavfi", "-i",
              "testsrc2=size=270x480:rate=24:duration=6", "-c:v", "libx264", "-preset",
              "ultrafast", "-pix_fmt", "yuv420p", str(other)], timeout=60)  # fmt: skip
    [reading, _] = measure_cuts(str(other), clips, [2.0, 4.5], 6.0, FPS)
    assert reading.found_s is None and "neither scene's clip" in reading.note
    [problem, *_] = cut_problems([reading], [2.0], 0.25)
    assert "its clip's start was not found near 2.00s" in problem


def test_readings_from_thumbnails_round_trip_and_bad_input_is_refused(clips):
    windows = cut_windows([2.0, 4.5], 6.0, FPS, search_s=1.0)
    assert [(w.first, w.last) for w in windows] == [(23, 72), (83, 132)]
    assert select_expression(windows) == "between(n,23,72)+between(n,83,132)"
    reading = CutReading(2, 4.5, 4.6, 4.5, 4.7, 1.2, "")
    assert CutReading.from_json(reading.to_json()) == reading
    assert cut_offset(reading, 4.55) == 0.0  # inside the range the frames cannot tell apart
    with pytest.raises(ValueError):
        read_cuts({}, windows, clips[:2], FPS)
    assert cut_problems([reading], [1.0, 2.0], 0.25) == ["the render has 2 scenes, the words 3"]
