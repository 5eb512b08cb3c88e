"""Procedural clips: pure argument building, and real ffmpeg renders of every pattern style."""

from __future__ import annotations

import hashlib

import pytest

from mdame_domain.probe import (
    analyze_media,
    frame_signature,
    frames_differ,
    mean_abs_diff,
    probe_media,
)
from mdame_domain.visuals import (
    STYLE_NAMES,
    clip_style,
    parse_colour,
    procedural_clip_args,
    procedural_clip_filter,
    render_procedural_clip,
)

PALETTE = ("#1e88e5", "#ff7043", "#fdd835")


def _hash(label: str) -> str:
    return hashlib.sha256(label.encode()).hexdigest()


def _hash_per_style() -> dict[str, str]:
    found: dict[str, str] = {}
    index = 0
    while len(found) < len(STYLE_NAMES):
        scene_hash = _hash(f"scene-{index}")
        found.setdefault(clip_style(scene_hash), scene_hash)
        index += 1
    return found


def test_args_are_a_deterministic_h264_clip_without_audio() -> None:
    args = procedural_clip_args(_hash("a"), PALETTE, 5.0, "/tmp/out.mp4")
    assert args == procedural_clip_args(_hash("a"), PALETTE, 5.0, "/tmp/out.mp4")
    assert args[0] == "ffmpeg" and args[-1] == "/tmp/out.mp4"
    joined = " ".join(args)
    for expected in (
        "-f lavfi",
        "-c:v libx264",
        "-preset ultrafast",
        "-pix_fmt yuv420p",
        "-an",
        "-t 5.000",
        "-r 24",
        "+faststart",
    ):
        assert expected in joined
    assert "scale=360:640" in args[args.index("-i") + 1]


def test_scene_hash_and_palette_change_the_pattern() -> None:
    graphs = {procedural_clip_filter(_hash(f"s{i}"), PALETTE, 2.0) for i in range(12)}
    assert len(graphs) == 12
    styles = {clip_style(_hash(f"s{i}")) for i in range(12)}
    assert len(styles) >= 4, "a dozen scenes should spread over several pattern families"
    scene = _hash("same-scene")
    other_palette = procedural_clip_filter(scene, ("#00ff00", "#800080"), 2.0)
    assert other_palette != procedural_clip_filter(scene, PALETTE, 2.0)


def test_palette_validation() -> None:
    assert parse_colour("#1E88E5") == parse_colour("1e88e5")
    assert parse_colour("#fff").r == 255
    with pytest.raises(ValueError):
        procedural_clip_args(_hash("x"), ("blue",), 2.0, "out.mp4")
    with pytest.raises(ValueError):
        procedural_clip_args(_hash("x"), (), 2.0, "out.mp4")
    with pytest.raises(ValueError):
        procedural_clip_args(_hash("x"), PALETTE, 0.0, "out.mp4")
    # One colour is enough: a tint of it supplies the contrast.
    assert procedural_clip_filter(_hash("x"), ("#1e88e5",), 2.0)


def test_every_style_renders_a_moving_coloured_clip(tmp_path) -> None:
    for style, scene_hash in _hash_per_style().items():
        out = str(tmp_path / f"{style}.mp4")
        render_procedural_clip(scene_hash, PALETTE, 1.0, out, width=108, height=192)
        early, late = frame_signature(out, 0.1), frame_signature(out, 0.9)
        assert mean_abs_diff(early, late) > 2.0, f"{style} does not move"
        assert max(late) - min(late) > 20, f"{style} is a flat colour"


# A Game of Life field that settles into a still picture about 5 s in (found by scanning
# random scene hashes). A still stretch over 2 s fails the render_freeze gate, and the same
# scene_hash would make the same clip again: the field must keep moving.
SETTLING_LIFE = "9d120c1496b7ff15e3b904bb354fab10769d70687c61838ca325c0ae6921f4be"


def test_a_life_field_that_settles_still_moves(tmp_path) -> None:
    assert clip_style(SETTLING_LIFE) == "life"
    out = render_procedural_clip(
        SETTLING_LIFE, ("#1e3a8a", "#b91c1c", "#0f766e"), 8.0, str(tmp_path / "life.mp4"),
        width=270, height=480,
    )  # fmt: skip
    assert analyze_media(out).longest_freeze_s < 0.5


def test_two_second_clip_probe_and_motion(tmp_path) -> None:
    out = render_procedural_clip(_hash("probe-me"), PALETTE, 2.0, str(tmp_path / "clip.mp4"))
    probe = probe_media(out)
    assert (probe.width, probe.height) == (360, 640)
    assert probe.video_codec == "h264" and probe.audio_codec is None
    assert probe.fps == pytest.approx(24.0)
    assert probe.duration_s == pytest.approx(2.0, abs=0.1)
    assert frames_differ(frame_signature(out, 0.1), frame_signature(out, 1.9), 4.0)


def test_different_scenes_look_different(tmp_path) -> None:
    signatures = []
    for style, scene_hash in list(_hash_per_style().items())[:4]:
        out = str(tmp_path / f"{style}.mp4")
        render_procedural_clip(scene_hash, PALETTE, 0.5, out, width=108, height=192)
        signatures.append(frame_signature(out, 0.2))
    for i, first in enumerate(signatures):
        for second in signatures[i + 1 :]:
            assert frames_differ(first, second)


@pytest.mark.parametrize("style", ["bands", "rings", "plasma"])
def test_a_sine_field_on_a_quarter_grid_draws_the_whole_fields_picture(style, tmp_path) -> None:
    """geq draws the sine styles on half the field's width and height, X and Y scaled up: the
    picture must be the one the whole field draws (rebuilt here as the reference)."""
    import re
    import subprocess

    graph = procedural_clip_filter(_hash_per_style()[style], PALETTE, 1.0)
    size = re.search(r"color=c=black:s=(\d+)x(\d+)", graph)
    assert size is not None, graph
    w, h = int(size.group(1)), int(size.group(2))
    whole = graph.replace(f"s={w}x{h}", f"s={w * 2}x{h * 2}", 1)
    whole = re.sub(r"\(([XY])\*2\)", r"\1", whole)
    assert whole != graph and "X*2" not in whole
    done = subprocess.run(
        ["ffmpeg", "-hide_banner", "-f", "lavfi", "-i", graph, "-f", "lavfi", "-i", whole,
         "-t", "1", "-lavfi", "[0][1]psnr", "-f", "null", "-"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    average = re.search(r"PSNR .* average:([0-9.inf]+)", done.stderr)
    assert average is not None, done.stderr[-2000:]
    assert float(average.group(1)) > 35.0, average.group(0)
