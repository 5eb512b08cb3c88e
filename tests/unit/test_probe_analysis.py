"""Issue 11: the one-decode analysis (ffprobe + one ffmpeg pass) and the render quality rules.

The parsers run on output captured from ffmpeg 5.1; the rules run on real files made with
ffmpeg, each broken in one property on purpose (and one compliant file that passes all).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mdame_domain import render_quality as q
from mdame_domain.mediatools import MediaToolError
from mdame_domain.probe import (
    MediaAnalysis,
    PictureStats,
    analysis_args,
    analyze_media,
    parse_analysis,
    parse_ffprobe,
)

# Captured: ffmpeg 5.1 on a 4 s file with 1 s black (also frozen) at the start and audio that
# falls silent at 2 s. Note the first, empty ebur128 summary and a freeze_start logged at t=0.
CAPTURED = """\
[Parsed_ebur128_3 @ 0x5557f749e240] Summary:

  Integrated loudness:
    I:         -70.0 LUFS
    Threshold:   0.0 LUFS

  True peak:
    Peak:       -inf dBFS
Stream mapping:
frame=    1 fps=0.0 q=-0.0 size=N/A time=00:00:00.04 bitrate=N/A speed=  48x    \
[freezedetect @ 0x5557f78af9c0] lavfi.freezedetect.freeze_start: 0
[blackdetect @ 0x5557f78aef40] black_start:0 black_end:1 black_duration:1
[freezedetect @ 0x5557f78af9c0] lavfi.freezedetect.freeze_duration: 1
[freezedetect @ 0x5557f78af9c0] lavfi.freezedetect.freeze_end: 1
[silencedetect @ 0x5557f74a3bc0] silence_start: 2
video:48kB audio:346kB subtitle:0kB other streams:0kB global headers:0kB muxing overhead: unknown
[silencedetect @ 0x5557f74a3bc0] silence_end: 4.01705 | silence_duration: 2.01705
[Parsed_ebur128_3 @ 0x5557f78b0280] Summary:

  Integrated loudness:
    I:         -22.1 LUFS
    Threshold: -32.3 LUFS

  Loudness range:
    LRA:         2.8 LU

  True peak:
    Peak:      -17.7 dBFS
"""


def test_parse_analysis_reads_the_last_summary_and_every_stretch() -> None:
    stats = parse_analysis(CAPTURED, duration_s=4.16, has_audio=True)
    assert stats.integrated_lufs == -22.1 and stats.true_peak_dbtp == -17.7
    assert stats.longest_black_s == 1.0
    assert stats.longest_freeze_s == 1.0
    assert stats.longest_silence_s == pytest.approx(2.01705)


def test_parse_analysis_closes_open_stretches_at_the_end() -> None:
    text = "lavfi.freezedetect.freeze_start: 1.5\nsilence_start: 3\n"
    stats = parse_analysis(text, duration_s=10.0, has_audio=False)
    assert stats.longest_freeze_s == 8.5 and stats.longest_silence_s == 7.0
    assert stats.integrated_lufs is None and stats.true_peak_dbtp is None


def test_parse_analysis_without_a_loudness_summary_is_an_error() -> None:
    with pytest.raises(MediaToolError):
        parse_analysis("silence_start: 1\n", duration_s=4.0, has_audio=True)


def test_parse_ffprobe() -> None:
    info = {
        "streams": [
            {"codec_type": "video", "codec_name": "h264", "width": 1080, "height": 1920,
             "avg_frame_rate": "24/1", "pix_fmt": "yuv420p", "sample_aspect_ratio": "2:2",
             "duration": "30.000000"},
            {"codec_type": "audio", "codec_name": "aac", "duration": "29.98"},
        ],
        "format": {"duration": "30.02"},
    }  # fmt: skip
    s = parse_ffprobe(info)
    assert (s.width, s.height, s.fps, s.pix_fmt, s.sar) == (1080, 1920, 24.0, "yuv420p", "1:1")
    assert (s.duration_s, s.video_duration_s, s.audio_duration_s) == (30.02, 30.0, 29.98)
    del info["streams"][1]
    info["streams"][0].pop("sample_aspect_ratio")
    bare = parse_ffprobe(info)
    assert bare.audio_codec is None and bare.audio_duration_s is None and bare.sar == "1:1"
    with pytest.raises(MediaToolError):
        parse_ffprobe({"streams": [{"codec_type": "audio"}]})


# ------------------------------------------------------------------------------------------
# Real files, each broken in one property
# ------------------------------------------------------------------------------------------
def _ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", *args], check=True, timeout=300)


SPEECHLIKE = "sine=f=220:r=48000,volume='0.5+0.4*sin(2*PI*2*t)':eval=frame"
# Small frames keep the encodes cheap; the rules below expect this geometry.
MOVING = "testsrc2=s=270x480:r=24"


def make(
    path: Path,
    *,
    seconds: float = 16.0,
    video: str = MOVING,
    audio: str = SPEECHLIKE,
    loudness: str = "loudnorm=I=-14:TP=-2:LRA=11,aresample=48000",
    vf: str = "null",
    extra: tuple[str, ...] = (),
) -> Path:
    """A short H.264/AAC render-like file; `loudness` normalises it like a compliant render."""
    _ffmpeg(
        "-f", "lavfi", "-i", video, "-f", "lavfi", "-i", audio, "-t", str(seconds),
        "-vf", vf, "-af", f"{loudness},aformat=channel_layouts=stereo",
        "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
        "-c:a", "aac", "-b:a", "128k", *extra, str(path),
    )  # fmt: skip
    return path


RULES = q.QualityRules(width=270, height=480, min_duration_s=15.0, max_duration_s=20.0)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("quality")
    good = make(root / "good.mp4")
    drifted = root / "drift.mp4"
    _ffmpeg("-i", str(good), "-map", "0:v", "-map", "0:a", "-c", "copy",
            "-t", "16", "-af", "atrim=0:15", "-c:a", "aac", str(drifted))  # fmt: skip
    return {
        "good": good,
        "loud": make(root / "loud.mp4", loudness="volume=26dB"),
        "black": make(root / "black.mp4", vf="drawbox=c=black:t=fill:enable='between(t,5,7)'"),
        "frozen": make(root / "frozen.mp4", vf="loop=loop=96:size=1:start=120,setpts=N/24/TB"),
        "silent": make(
            root / "silent.mp4",
            loudness="volume=enable='between(t,6,9)':volume=0,"
            "loudnorm=I=-14:TP=-2:LRA=11,aresample=48000",
        ),
        "small": make(root / "small.mp4", video="testsrc2=s=180x320:r=30"),
        "long": make(root / "long.mp4", seconds=22.0),
        "drift": drifted,
    }


def _failing(path: Path) -> dict[str, list[str]]:
    found = q.media_problems(analyze_media(str(path)), RULES)
    return {name: problems for name, problems in found.items() if problems}


def test_a_compliant_file_passes_every_rule(files) -> None:
    a = analyze_media(str(files["good"]))
    assert (a.width, a.height, a.video_codec, a.audio_codec) == (270, 480, "h264", "aac")
    assert (a.fps, a.pix_fmt, a.sar) == (24.0, "yuv420p", "1:1")
    assert a.integrated_lufs == pytest.approx(-14.0, abs=1.0)
    assert a.true_peak_dbtp is not None and a.true_peak_dbtp <= -1.0
    assert _failing(files["good"]) == {}
    assert MediaAnalysis.from_json(a.to_json()) == MediaAnalysis.from_json(a.to_json())


@pytest.mark.parametrize(
    ("name", "check", "words"),
    [
        ("loud", q.LOUDNESS, "LUFS"),
        ("black", q.BLACK, "black stretch"),
        ("frozen", q.FREEZE, "frozen stretch"),
        ("silent", q.SILENCE, "silent stretch"),
        ("small", q.FORMAT, "frame is 180x320"),
        ("long", q.DURATION, "outside 15-20s"),
        ("drift", q.AV_SYNC, "apart"),
    ],
)
def test_each_broken_property_fails_its_rule(files, name, check, words) -> None:
    failing = _failing(files[name])
    assert check in failing, failing
    assert any(words in p for p in failing[check]), failing[check]


def test_loud_file_also_breaks_the_true_peak(files) -> None:
    found = _failing(files["loud"])[q.LOUDNESS]
    assert any("true peak" in p for p in found)


def test_scene_problems() -> None:
    assert q.scene_problems([5.0, 10.0], [5.0, 10.0], 15.0) == []
    assert q.scene_problems([5.0, 10.0], [5.0], 15.0)[0] == "1 scenes rendered, the plan has 2"
    assert "scene 1 rendered 8.00s, planned 10.00s" in q.scene_problems(
        [5.0, 10.0], [5.0, 8.0], 15.0
    )
    assert q.scene_problems([5.0, 10.0], [5.0, 10.0], 13.0) == [
        "video is 13.00s, the plan adds up to 15.00s"
    ]
    assert q.scene_problems([5.0], None, 5.0) == ["the render recorded no scene durations"]


def test_acceptance_context_names_policy_checks_and_thresholds() -> None:
    context = q.QualityRules().acceptance_context()
    assert context["policy"] == q.POLICY_VERSION
    assert context["checks"] == list(q.QUALITY_CHECKS)
    assert context["rules"]["target_lufs"] == -14.0  # type: ignore[index]


def test_picture_measured_at_the_encode_leaves_the_decode_to_the_sound(files) -> None:
    sound_only = " ".join(analysis_args("x.mp4", has_audio=True, picture=False))
    assert "0:v" not in sound_only and "blackdetect" not in sound_only
    assert "ebur128" in sound_only and "silencedetect" in sound_only
    with pytest.raises(ValueError):
        analysis_args("x.mp4", has_audio=False, picture=False)
    # The file's own picture passes; the measurements handed in are what is judged.
    given = PictureStats(longest_black_s=0.9, longest_freeze_s=2.5)
    a = analyze_media(str(files["good"]), given)
    assert (a.longest_black_s, a.longest_freeze_s) == (0.9, 2.5)
    assert a.integrated_lufs == pytest.approx(-14.0, abs=1.0)
    failing = q.media_problems(a, RULES)
    assert failing[q.BLACK] and failing[q.FREEZE]
