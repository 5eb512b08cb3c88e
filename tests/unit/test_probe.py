"""ffprobe/ffmpeg analysis on small media made by ffmpeg itself."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mdame_domain import render_quality as q
from mdame_domain.mediatools import MediaToolError
from mdame_domain.probe import (
    analyze_media,
    frame_signature,
    frames_differ,
    mean_abs_diff,
    mean_volume_db,
    probe_media,
)


def _make(path: Path, video: str, audio: str | None, seconds: float = 2.0) -> str:
    args = ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", video]
    if audio:
        args += ["-f", "lavfi", "-i", audio]
    args += ["-t", str(seconds), "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"]
    args += ["-c:a", "aac"] if audio else ["-an"]
    subprocess.run([*args, str(path)], check=True, capture_output=True)
    return str(path)


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("probe")
    return {
        "tone": _make(root / "tone.mp4", "testsrc2=s=320x240:r=25",
                      "sine=frequency=440:sample_rate=48000"),
        "silent": _make(root / "silent.mp4", "testsrc2=s=320x240:r=25",
                        "anullsrc=r=48000:cl=stereo"),
        "mute": _make(root / "mute.mp4", "testsrc2=s=320x240:r=30", None),
        "half_black": _make(root / "half_black.mp4",
                            "color=c=black:s=320x240:r=25:d=1[a];color=c=red:s=320x240:r=25:d=1[b];"
                            "[a][b]concat=n=2:v=1:a=0", None),
        "black": _make(root / "black.mp4", "color=c=black:s=320x240:r=25",
                       "anullsrc=r=48000:cl=stereo"),
    }  # fmt: skip


def test_probe_media(media) -> None:
    tone = probe_media(media["tone"])
    assert (tone.width, tone.height, tone.fps) == (320, 240, 25.0)
    assert (tone.video_codec, tone.audio_codec) == ("h264", "aac")
    assert tone.duration_s == pytest.approx(2.0, abs=0.1)
    assert tone.size_bytes == Path(media["tone"]).stat().st_size
    mute = probe_media(media["mute"])
    assert mute.audio_codec is None and mute.fps == pytest.approx(30.0)


def test_probe_errors_are_media_tool_errors(tmp_path) -> None:
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video")
    with pytest.raises(MediaToolError) as raised:
        probe_media(str(junk))
    assert raised.value.tool == "ffprobe" and "junk.mp4" in str(raised.value)


def test_mean_volume(media) -> None:
    assert -30.0 < mean_volume_db(media["tone"]) < 0.0
    assert mean_volume_db(media["silent"]) < -80.0
    with pytest.raises(MediaToolError):
        mean_volume_db(media["mute"])


def test_frame_signatures(media) -> None:
    black = frame_signature(media["half_black"], 0.5)
    red = frame_signature(media["half_black"], 1.5)
    assert len(black) == 32 * 32
    assert frames_differ(black, red)
    assert not frames_differ(red, frame_signature(media["half_black"], 1.8))
    assert mean_abs_diff(black, black) == 0.0
    with pytest.raises(ValueError):
        frames_differ(black, black[:10])


def test_the_render_gate_names_every_problem(media) -> None:
    found = q.media_problems(analyze_media(media["black"]), q.QualityRules())
    assert any("320x240" in p for p in found[q.FORMAT])
    assert any("duration" in p for p in found[q.DURATION])
    assert any("LUFS" in p for p in found[q.LOUDNESS])
    assert any("black stretch" in p for p in found[q.BLACK])
    mute = analyze_media(media["mute"])
    assert mute.audio_codec is None and mute.integrated_lufs is None
    found = q.media_problems(mute, q.QualityRules())
    assert "no audio track" in found[q.FORMAT] and "no audio track" in found[q.AV_SYNC]
    assert found[q.LOUDNESS] == ["no audio to measure"]


def test_analysis_of_an_unreadable_file_is_a_media_tool_error(tmp_path) -> None:
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"")
    with pytest.raises(MediaToolError):
        analyze_media(str(junk))
