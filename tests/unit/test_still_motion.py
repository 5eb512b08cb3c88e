"""A still made into a clip (mdame_domain/still_motion.py), measured on the encoded frames.

Smooth: a bright marker on a textured still is tracked frame by frame (its intensity-weighted
centroid, to a small fraction of a pixel); along the motion it must only go forward, by steps
that follow the clip's smooth trend closely. ffmpeg's zoompan, the usual way, fails that.
Never the edge: no frame has a black row or column at its border, where a still whose every
pixel is mid-grey or brighter would show through a window that left it. A pan drawn the naive
way, too far, fails that.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mdame_domain.still_motion import (
    KINDS,
    MAX_ZOOM,
    PAN_PER_S,
    PAN_ZOOM,
    ZOOM_PER_S,
    Motion,
    animate_still,
    plan_motion,
)

# Bigger than the tiny profile's clips so the marker's steps are well above the encoder's noise.
WIDTH, HEIGHT, FPS, SECONDS = 216, 384, 24, 2.0
MARKER = (0.25, 0.3)  # where the marker sits on the still, as fractions of its size
# The tracked steps' spread about the clip's smooth trend, over their mean: ours measure about
# 0.05-0.1; zoompan's 0.6 and more, with steps back.
MAX_STEP_SPREAD = 0.3
BLACK = 24.0  # a border row or column darker than this on average shows what is past the still


@pytest.fixture(scope="module")
def still(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 576x1024 grey still (luma about 55-245): a texture that shows any motion, and a soft
    bright marker."""
    path = tmp_path_factory.mktemp("still") / "still.png"
    w, h = 576, 1024
    lum = (
        "100+30*sin(X/5)*cos(Y/7)+15*sin((X+Y)/11)"
        f"+120*exp(-(pow(X-{MARKER[0]}*W,2)+pow(Y-{MARKER[1]}*H,2))/{2 * (w * 0.025) ** 2})"
    )
    _ffmpeg(
        ["-f", "lavfi", "-i", f"color=c=black:s={w}x{h},format=gray", "-vf", f"geq=lum='{lum}'",
         "-frames:v", "1", str(path)]
    )  # fmt: skip
    return path


def _ffmpeg(args: list[str]) -> bytes:
    return subprocess.run(
        ["ffmpeg", "-hide_banner", "-nostdin", "-v", "error", "-y", *args],
        capture_output=True,
        check=True,
    ).stdout


def frames(clip: Path, width: int = WIDTH, height: int = HEIGHT) -> np.ndarray:
    raw = _ffmpeg(["-i", str(clip), "-f", "rawvideo", "-pix_fmt", "gray", "-"])
    return np.frombuffer(raw, np.uint8).reshape(-1, height, width).astype(float)


def marker_path(video: np.ndarray) -> np.ndarray:
    """The marker's centroid in every frame (x, y), weighted by how far above the texture."""
    ys, xs = np.indices(video.shape[1:])
    weights = np.clip(video - 150.0, 0.0, None)
    total = weights.sum(axis=(1, 2))
    assert (total > 0).all(), "the marker left the frame"
    return (
        np.stack([(weights * xs).sum(axis=(1, 2)), (weights * ys).sum(axis=(1, 2))], 1)
        / total[:, None]
    )


def smoothness(path: np.ndarray) -> tuple[int, float]:
    """(steps that go back or stand still, the steps' spread about the smooth trend over their
    mean), along the axis the marker moves most on."""
    axis = int(np.argmax(np.abs(np.diff(path, axis=0)).sum(axis=0)))
    position = path[:, axis]
    steps = np.diff(position)
    direction = np.sign(steps.sum())
    steps = steps * direction
    n = np.arange(len(position))
    trend = np.diff(np.polyval(np.polyfit(n, position, 2), n)) * direction
    return int((steps <= 0).sum()), float(np.std(steps - trend) / steps.mean())


def edge_frames(video: np.ndarray) -> list[int]:
    """The frames with a black row or column at a border (two pixels deep)."""
    shown = []
    for index, frame in enumerate(video):
        borders = [frame[:2].mean(axis=1), frame[-2:].mean(axis=1)]
        borders += [frame[:, :2].mean(axis=0), frame[:, -2:].mean(axis=0)]
        if min(float(b.min()) for b in borders) < BLACK:
            shown.append(index)
    return shown


def probe(clip: Path) -> dict:
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-show_streams", "-of", "json", str(clip)],
        capture_output=True,
        check=True,
    ).stdout
    return json.loads(out)


def hash_for(kind: str) -> str:
    """A scene hash whose planned motion is `kind`."""
    for i in range(1000):
        candidate = hashlib.sha256(f"scene {i}".encode()).hexdigest()
        if plan_motion(candidate, SECONDS).kind == kind:
            return candidate
    raise AssertionError(f"no scene hash plans {kind}")


MOTIONS = {
    "zoom_in": Motion("zoom_in", 1.0, 1.2, 0.5, 0.5, 0.5, 0.5),
    "zoom_out": Motion("zoom_out", 1.2, 1.0, 0.6, 0.6, 0.45, 0.45),
    "pan_right": Motion("pan_right", PAN_ZOOM, PAN_ZOOM, 0.1, 0.9, 0.5, 0.5),
    "pan_up": Motion("pan_up", PAN_ZOOM, PAN_ZOOM, 0.5, 0.5, 0.9, 0.1),
}


@pytest.mark.parametrize("kind", sorted(MOTIONS))
def test_a_zoom_or_a_pan_is_smooth_and_never_shows_the_edge(still, tmp_path, kind):
    clip = animate_still(
        still,
        tmp_path / "clip.mp4",
        SECONDS,
        scene_hash="unused",
        width=WIDTH,
        height=HEIGHT,
        fps=FPS,
        motion=MOTIONS[kind],
    )
    [stream] = probe(clip)["streams"]  # video only: no audio
    assert (stream["codec_name"], stream["pix_fmt"]) == ("h264", "yuv420p")
    assert (stream["width"], stream["height"], stream["r_frame_rate"]) == (WIDTH, HEIGHT, "24/1")
    video = frames(clip)
    assert len(video) == SECONDS * FPS
    back, spread = smoothness(marker_path(video))
    assert back == 0 and spread < MAX_STEP_SPREAD, (back, spread)
    assert edge_frames(video) == []


def test_zoompan_the_usual_way_fails_the_smoothness_measure(still, tmp_path):
    frames_n = int(SECONDS * FPS)
    clip = tmp_path / "zoompan.mp4"
    zoompan = (
        "zoompan=z='min(zoom+0.004,1.5)':x='iw/2-(iw/zoom/2)':y='ih/2-(ih/zoom/2)'"
        f":d={frames_n}:s={WIDTH}x{HEIGHT}:fps={FPS}"
    )
    _ffmpeg(
        ["-loop", "1", "-framerate", str(FPS), "-i", str(still), "-vf", f"{zoompan},format=yuv420p",
         "-frames:v", str(frames_n), "-c:v", "libx264", "-crf", "18", str(clip)]
    )  # fmt: skip
    back, spread = smoothness(marker_path(frames(clip)))
    assert back > 0 or spread > 2 * MAX_STEP_SPREAD, (back, spread)


def test_a_pan_past_the_still_shows_its_edge_and_the_measure_says_so(still, tmp_path):
    frames_n = int(SECONDS * FPS)
    clip = tmp_path / "too-far.mp4"
    # The still 10 % wider than the frame slides by 20 % of its width: half-way, it runs out.
    wide = f"{round(WIDTH * 1.1)}:{round(HEIGHT * 1.1)}"
    graph = (
        f"color=c=black:s={WIDTH}x{HEIGHT}:r={FPS}[bg];[0:v]scale={wide},format=gray[pic];"
        f"[bg][pic]overlay=x='-t/{SECONDS}*0.2*{WIDTH}*1.1':y=0:shortest=1,format=yuv420p"
    )
    _ffmpeg(
        ["-loop", "1", "-framerate", str(FPS), "-i", str(still), "-filter_complex", graph,
         "-frames:v", str(frames_n), "-c:v", "libx264", "-crf", "18", str(clip)]
    )  # fmt: skip
    shown = edge_frames(frames(clip))
    assert shown and shown[0] > frames_n // 3 and shown[-1] == frames_n - 1
    # The product's motions cannot be asked to go there.
    with pytest.raises(ValueError, match="x_to must be between 0 and 1"):
        Motion("pan_right", PAN_ZOOM, PAN_ZOOM, 0.1, 1.4, 0.5, 0.5)
    with pytest.raises(ValueError, match="zoom_from must be between 1"):
        Motion("zoom_out", 0.9, 1.0, 0.5, 0.5, 0.5, 0.5)


@pytest.mark.parametrize("kind", KINDS)
def test_every_planned_motion_keeps_inside_the_still(still, tmp_path, kind):
    """The scene's own motion (from its hash), at the tiny clip size: no edge in any frame."""
    clip = animate_still(
        still, tmp_path / "clip.mp4", SECONDS, scene_hash=hash_for(kind), width=108, height=192
    )
    video = frames(clip, 108, 192)
    assert len(video) == SECONDS * FPS and edge_frames(video) == []


def test_planned_motions_are_the_scenes_own_slow_and_inside_the_canvas():
    hashes = [hashlib.sha256(f"h{i}".encode()).hexdigest() for i in range(300)]
    for seconds in (1.0, 3.0, 8.0):
        kinds = set()
        for scene in hashes:
            motion = plan_motion(scene, seconds)
            assert motion == plan_motion(scene, seconds)  # the same scene moves the same way
            kinds.add(motion.kind)
            zoom = max(motion.zoom_from, motion.zoom_to) / min(motion.zoom_from, motion.zoom_to)
            assert zoom <= min(MAX_ZOOM, ZOOM_PER_S**seconds) + 1e-9
            travel = max(abs(motion.x_to - motion.x_from), abs(motion.y_to - motion.y_from))
            assert travel * (1 - 1 / PAN_ZOOM) <= PAN_PER_S * seconds + 1e-9
            for t in np.linspace(0.0, 1.0, 11):
                left, top, w, h = motion.window(float(t), 720.0, 1280.0)
                assert left >= 1.0 and top >= 1.0 and left + w <= 719.0 and top + h <= 1279.0
                assert abs(w / h - 720 / 1280) < 1e-9  # the window keeps the clip's shape
        assert kinds == set(KINDS)
    assert len({plan_motion(scene, 3.0) for scene in hashes}) > 250  # scenes differ
