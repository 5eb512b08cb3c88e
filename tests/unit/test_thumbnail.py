"""The thumbnail: the hook frame as a 1080x1920 JPEG under 2 MB with the title drawn on it."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from mdame_domain.mediatools import MediaToolError
from mdame_domain.probe import probe_media
from mdame_domain.thumbnail import (
    MAX_THUMBNAIL_BYTES,
    TITLE_CHARS_PER_LINE,
    TITLE_MAX_LINES,
    TITLE_TOP,
    render_thumbnail,
    title_lines,
)
from mdame_domain.visuals import render_procedural_clip

TITLE = "Glass rains sideways on a planet where the wind is faster than sound"


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("thumb")
    seed = hashlib.sha256(b"thumbnail").hexdigest()
    return render_procedural_clip(
        seed, ("#1e3a8a", "#b91c1c"), 2.0, str(folder / "clip.mp4"), width=270, height=480
    )


def _white_pixels(path: str, top: float, bottom: float) -> int:
    """Near-white pixels in a horizontal band (fractions of the height) of an image."""
    raw = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", path, "-vf", "scale=270:480,format=rgb24",
         "-f", "rawvideo", "pipe:1"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    rows = range(int(480 * top), int(480 * bottom))
    return sum(
        1
        for y in rows
        for x in range(270)
        if min(raw[(y * 270 + x) * 3 : (y * 270 + x) * 3 + 3]) > 220
    )


def test_thumbnail_is_a_vertical_jpeg_with_the_title(video: str, tmp_path: Path) -> None:
    out = render_thumbnail(video, TITLE, str(tmp_path / "thumb.jpg"), at_s=1.0)
    data = Path(out).read_bytes()
    assert data[:3] == b"\xff\xd8\xff", "not a JPEG"
    assert 0 < len(data) <= MAX_THUMBNAIL_BYTES
    probe = probe_media(out)
    assert (probe.video_codec, probe.width, probe.height) == ("mjpeg", 1080, 1920)
    # The title's white letters sit in the band under TITLE_TOP; the frame itself has none.
    band = (TITLE_TOP - 0.02, TITLE_TOP + 0.25)
    plain = str(tmp_path / "plain.png")
    subprocess.run(
        ["ffmpeg", "-v", "error", "-ss", "1", "-i", video, "-frames:v", "1", plain], check=True
    )
    assert _white_pixels(plain, *band) == 0
    assert _white_pixels(out, *band) > 500


def test_title_wrapping() -> None:
    lines = title_lines(TITLE)
    assert all(len(line) <= TITLE_CHARS_PER_LINE for line in lines)
    assert " ".join(lines) == TITLE
    long = title_lines("word " * 60)
    assert len(long) == TITLE_MAX_LINES and long[-1].endswith("\u2026")


def test_bad_thumbnail_inputs(video: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="non-empty title"):
        render_thumbnail(video, "   ", str(tmp_path / "a.jpg"))
    with pytest.raises(MediaToolError):
        render_thumbnail(str(tmp_path / "missing.mp4"), TITLE, str(tmp_path / "b.jpg"))
