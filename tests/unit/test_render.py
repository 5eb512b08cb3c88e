"""Scene timing, the single-invocation filtergraph, and a real end-to-end render."""

from __future__ import annotations

import hashlib
import math
import subprocess
from pathlib import Path

import pytest

from mdame_domain import render_quality as q
from mdame_domain.audio_mix import (
    LUFS_TOLERANCE_LU,
    MAX_TRUE_PEAK_DBTP,
    TARGET_LUFS,
    LoudnormMeasurement,
    MixMeasurement,
    SourceLoudness,
    generate_procedural_bed,
)
from mdame_domain.captions import build_captions, caption_layout_problems, safe_box
from mdame_domain.encoders import H264_NVENC
from mdame_domain.probe import analyze_media, frame_signature, frames_differ
from mdame_domain.render import (
    RenderInput,
    build_filtergraph,
    build_render_args,
    render_media,
    scene_durations,
    scene_frame_counts,
)
from mdame_domain.visuals import render_procedural_clip
from mdame_domain.voice import synthesize_espeak
from tests.media_measure import ebur128_summary


def _input(durations=(2.0, 3.0), ass="/tmp/subs.ass", **extra) -> RenderInput:
    return RenderInput(
        clip_paths=[f"/tmp/clip{i}.mp4" for i in range(len(durations))],
        scene_durations_s=durations,
        voice_wav="/tmp/voice.wav",
        subtitles_ass=ass,
        out_path="/tmp/out.mp4",
        music_path="/tmp/bed.wav",
        **extra,
    )


MEASURED = MixMeasurement(
    SourceLoudness(voice_lufs=-22.0, music_lufs=-30.0),
    LoudnormMeasurement(
        input_i=-18.5, input_tp=-6.9, input_lra=2.1, input_thresh=-28.9, target_offset=0.1
    ),
)


def test_scene_durations_follow_weights_and_sum_to_total() -> None:
    durations = scene_durations([1, 1, 2], 20.0)
    assert durations == pytest.approx([5.0, 5.0, 10.0])
    assert math.fsum(durations) == pytest.approx(20.0, abs=1e-9)


def test_scene_durations_respect_the_minimum() -> None:
    durations = scene_durations([0.01, 1, 1, 10], 12.0, min_s=1.5)
    assert min(durations) >= 1.5 - 1e-9
    assert durations[0] == pytest.approx(1.5)
    assert math.fsum(durations) == pytest.approx(12.0, abs=1e-9)
    odd = scene_durations([1, 3, 7, 2, 5], 31.337)
    assert math.fsum(odd) == pytest.approx(31.337, abs=1e-9)


@pytest.mark.parametrize(
    ("weights", "total"), [([], 10.0), ([1, 1], 2.0), ([0, 0], 10.0), ([-1, 2], 10.0)]
)
def test_scene_durations_reject_impossible_requests(weights, total) -> None:
    with pytest.raises(ValueError):
        scene_durations(weights, total)


def test_frame_counts_do_not_drift() -> None:
    counts = scene_frame_counts([1.01] * 30, 24)
    assert sum(counts) == round(30.3 * 24)
    assert scene_frame_counts([0.01], 24) == [1]


def test_filtergraph_shape() -> None:
    graph = build_filtergraph(_input(), MEASURED)
    assert "[0:v]fps=fps=24[" in graph and "trim=end_frame=48[" in graph
    assert "trim=end_frame=72[" in graph
    assert "scale=1080:1920:force_original_aspect_ratio=increase" in graph
    assert "crop=1080:1920" in graph and "setsar=1" in graph
    assert "concat=a=0:n=2:v=1" in graph and "subtitles=filename=/tmp/subs.ass" in graph
    # The voice is normalised (-22 -> -16 LUFS), the bed set 20 dB under it (-30 -> -36),
    # ducked by the voice, both mixed.
    assert "volume=6.00dB" in graph and "volume=-6.00dB" in graph
    assert "sidechaincompress=attack=10.0:ratio=10.0:release=400.0:threshold=0.03" in graph
    assert "amix=duration=first:inputs=2:normalize=0" in graph
    # Pass 2: pass 1's values applied linearly, to the -14 LUFS target.
    assert "I=-14.0" in graph and "linear=true" in graph
    assert "measured_I=-18.50" in graph and "measured_TP=-6.90" in graph
    assert "apad=whole_dur=5.000000" in graph and "atrim=end=5.000000" in graph


def test_render_args_are_one_ffmpeg_call() -> None:
    args = build_render_args(_input(), MEASURED)
    joined = " ".join(args)
    assert args[0] == "ffmpeg" and args.count("-filter_complex") == 1
    assert args.count("-stream_loop") == 3  # two clips and the bed
    for expected in (
        "-c:v libx264",
        "-preset veryfast",
        "-crf 23",
        "-r 24",
        "-pix_fmt yuv420p",
        "-c:a aac",
        "-b:a 128k",
        "-ar 48000",
        "-movflags +faststart",
        "-t 5.000000",
    ):
        assert expected in joined
    # The video and the mix into the file; a copy of the video into the picture measurements.
    assert joined.count("-map [") == 3
    out = args.index("/tmp/out.mp4")
    assert args[out + 1 :] == ["-map", args[out + 2], "-f", "null", "-"]
    assert "blackdetect=d=0.1:pix_th=0.1" in joined and "freezedetect=d=0.5:n=-60dB" in joined
    assert args[args.index("-loglevel") + 1] == "info"  # where the measurements are logged


def test_render_args_follow_the_encoder_preset() -> None:
    joined = " ".join(build_render_args(_input(encoder=H264_NVENC), MEASURED))
    assert "-c:v h264_nvenc" in joined and "-cq 23" in joined and "-pix_fmt yuv420p" in joined
    assert "libx264" not in joined


def test_render_input_validation() -> None:
    with pytest.raises(ValueError):
        _input(durations=())
    with pytest.raises(ValueError):
        RenderInput(["a.mp4"], [1.0, 2.0], "v.wav", "s.ass", "o.mp4")
    with pytest.raises(ValueError):
        _input(durations=(1.0, 0.0))
    with pytest.raises(ValueError):
        _input(music_volume_db=0.0)
    with pytest.raises(ValueError):
        _input(music_volume_db=-60.0)


def _white_pixel_box(path: str, at_s: float) -> tuple[int, int, int, int] | None:
    """Bounding box (full-res pixels) of near-white pixels in the frame at at_s."""
    import subprocess

    half_w, half_h = 540, 960
    raw = subprocess.run(
        ["ffmpeg", "-v", "error", "-ss", str(at_s), "-i", path, "-frames:v", "1", "-vf",
         f"scale={half_w}:{half_h}:flags=neighbor,format=rgb24", "-f", "rawvideo", "pipe:1"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    white = [
        i // 3 for i in range(0, len(raw), 3)
        if raw[i] > 225 and raw[i + 1] > 225 and raw[i + 2] > 225
    ]  # fmt: skip
    if not white:
        return None
    xs, ys = [p % half_w for p in white], [p // half_w for p in white]
    return 2 * min(xs), 2 * min(ys), 2 * max(xs) + 1, 2 * max(ys) + 1


def test_end_to_end_render(tmp_path: Path) -> None:
    text = (
        "Glass rains sideways on a planet far from here. The wind is faster than sound. "
        "Its deep blue colour hides a brutal place. Scientists found it by watching starlight "
        "pass through its air. Follow for more strange facts about space."
    )
    voice = synthesize_espeak(text, "en-us", str(tmp_path / "voice.wav"))
    total_s = max(16.0, voice.duration_s + 0.3)
    durations = scene_durations([1.0, 1.3, 0.8, 1.1, 1.0], total_s)
    # Tiny, one-second clips: the render must loop them to fill each scene.
    palette = ("#1e3a8a", "#b91c1c", "#0f766e")
    clips = [
        render_procedural_clip(
            hashlib.sha256(f"e2e-scene-{i}".encode()).hexdigest(), palette, 1.0,
            str(tmp_path / f"clip{i}.mp4"), width=180, height=320,
        )
        for i in range(5)
    ]  # fmt: skip
    # Quotes, commas, colons and brackets in the path exercise the filter escaping.
    odd_dir = tmp_path / "subs [it's, a:test]"
    odd_dir.mkdir()
    ass_path = odd_dir / "captions.ass"
    # The renders asset's captions (no hook or titles here: the box check below reads white).
    track = build_captions(voice.words)
    ass_path.write_text(track.ass, encoding="utf-8")
    out = str(tmp_path / "final.mp4")
    bed = generate_procedural_bed("science:e2e", total_s, str(tmp_path / "bed.wav"))

    outcome = render_media(
        RenderInput(clips, durations, voice.path, str(ass_path), out, music_path=bed.path)
    )
    assert outcome.loudness.mix.linear_possible()

    # The render gate: every rule passed (the video is 16-20 s long), read with the picture
    # measured as it was encoded; a decode of the file measures the same picture.
    analysis = analyze_media(out, outcome.picture)
    decoded = analyze_media(out)
    assert analysis == decoded
    assert (analysis.width, analysis.height) == (1080, 1920)
    assert (analysis.video_codec, analysis.audio_codec) == ("h264", "aac")
    assert analysis.fps == pytest.approx(24.0)
    assert analysis.duration_s == pytest.approx(total_s, abs=0.1)
    rules = q.rules_for((15.0, 60.0))
    found = q.technical_problems(analysis, rules, durations, durations)
    assert {name: problems for name, problems in found.items() if problems} == {}
    integrated, true_peak = ebur128_summary(out)
    assert abs(integrated - TARGET_LUFS) <= LUFS_TOLERANCE_LU, integrated
    assert true_peak <= MAX_TRUE_PEAK_DBTP, true_peak

    starts = [math.fsum(durations[:i]) for i in range(len(durations))]
    middles = [start + d / 2 for start, d in zip(starts, durations, strict=True)]
    signatures = [frame_signature(out, t) for t in middles]
    for earlier, later in zip(signatures, signatures[1:], strict=False):
        assert frames_differ(earlier, later)

    # The first caption is burned in where its recorded box says, inside the safe area.
    assert caption_layout_problems(track.boxes, 1080, 1920) == []
    first = track.boxes[0]
    drawn = _white_pixel_box(out, (first.start_s + first.end_s) / 2)
    assert drawn is not None, "captions were not burned in"
    left, top, right, bottom = drawn
    assert first.x <= left and right <= first.right, (drawn, first)
    assert first.y <= top and bottom <= first.bottom, (drawn, first)
    safe = safe_box()
    assert safe.left <= left and right <= safe.right and safe.top <= top and bottom <= safe.bottom


def test_render_inputs_digest_names_content_not_paths():
    from mdame_domain.render import render_inputs_digest

    base = render_inputs_digest(["a" * 64, "b" * 64], [3.0, 4.0], "c" * 64, "[Script Info]")
    assert base == render_inputs_digest(["a" * 64, "b" * 64], [3.0, 4.0], "c" * 64, "[Script Info]")
    assert base != render_inputs_digest(["b" * 64, "a" * 64], [3.0, 4.0], "c" * 64, "[Script Info]")
    assert base != render_inputs_digest(["a" * 64, "b" * 64], [3.5, 3.5], "c" * 64, "[Script Info]")
    assert base != render_inputs_digest(["a" * 64, "b" * 64], [3.0, 4.0], "d" * 64, "[Script Info]")
    assert base != render_inputs_digest(["a" * 64, "b" * 64], [3.0, 4.0], "c" * 64, "other")
    # Everything else that changes the bytes: the bed, its level, the encoder preset.
    args = (["a" * 64, "b" * 64], [3.0, 4.0], "c" * 64, "[Script Info]")
    with_bed = render_inputs_digest(*args, music_sha256="e" * 64)
    assert with_bed not in (base, render_inputs_digest(*args, music_sha256="f" * 64))
    assert with_bed != render_inputs_digest(*args, music_sha256="e" * 64, music_volume_db=-12.0)
    assert with_bed != render_inputs_digest(*args, music_sha256="e" * 64, encoder=H264_NVENC)


def _still_or_moving_clip(path: Path, source: str) -> str:
    subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", source, "-t", "1",
         "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", str(path)],
        check=True, timeout=60,
    )  # fmt: skip
    return str(path)


def test_the_render_measures_black_and_frozen_scenes_as_it_encodes(tmp_path: Path) -> None:
    """A black scene and a still scene between moving ones: the render's own measurements
    find both, and the render gate judges the file by them without decoding its picture."""
    moving = "testsrc2=s=108x192:r=24"
    clips = [
        _still_or_moving_clip(tmp_path / "a.mp4", moving),
        _still_or_moving_clip(tmp_path / "black.mp4", "color=c=black:s=108x192:r=24"),
        _still_or_moving_clip(tmp_path / "b.mp4", moving),
        _still_or_moving_clip(tmp_path / "still.mp4", "color=c=0x3355aa:s=108x192:r=24"),
        _still_or_moving_clip(tmp_path / "c.mp4", moving),
    ]
    durations = [2.0, 1.5, 2.0, 3.0, 2.0]
    voice = synthesize_espeak("One two three four five six.", "en-us", str(tmp_path / "v.wav"))
    (tmp_path / "none.ass").write_text(build_captions([]).ass, encoding="utf-8")
    out = str(tmp_path / "out.mp4")
    inp = RenderInput(
        clips, durations, voice.path, str(tmp_path / "none.ass"), out, width=216, height=384
    )

    picture = render_media(inp).picture

    assert picture.longest_black_s == pytest.approx(1.5, abs=0.1)
    assert picture.longest_freeze_s == pytest.approx(3.0, abs=0.1)
    rules = q.QualityRules(width=216, height=384, min_duration_s=5.0, max_duration_s=20.0)
    failing = {
        name for name, found in q.media_problems(analyze_media(out, picture), rules).items()
        if found
    }  # fmt: skip
    assert {q.BLACK, q.FREEZE} <= failing
