"""The render's sound (issue 11, slice "audio"): loudness and true peak measured on real
mixes, ducking measured on the bed, licensed libraries, the dimension's `music:` block."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import ffmpeg
import pytest

from mdame_domain.audio_mix import (
    AUDIO_BITRATE,
    LUFS_TOLERANCE_LU,
    MAX_TRUE_PEAK_DBTP,
    MIN_DUCKING_DB,
    TARGET_LUFS,
    LoudnessError,
    MusicLibraryError,
    SourceLoudness,
    audio_inputs,
    choose_library_track,
    ducked,
    final_loudnorm,
    generate_procedural_bed,
    levelled_music,
    library_tracks,
    measure_mix,
    measure_sources,
    mixed_audio,
    music_bed,
    normalized_voice,
    parse_loudnorm_json,
    procedural_bed_expression,
)
from mdame_domain.dimensions import DimensionConfigError, dimension_from_json, parse_dimension
from mdame_domain.mediatools import FFMPEG_BASE, run_tool
from mdame_domain.voice import synthesize_espeak
from tests.media_measure import ebur128_summary, mono_samples, rms_db

SENTENCES = (
    "Glass rains sideways on a planet far from here.",
    "The wind is faster than sound, and its deep blue colour hides a brutal place.",
    "Scientists found it by watching starlight pass through its air.",
    "Follow for more strange facts about space and the worlds beyond our own.",
)


def _mix_to_aac(voice: str, music: str | None, total_s: float, volume_db: float, out: str) -> None:
    """The render's two passes on the audio alone: the same graph, encoded the same way."""
    measured = measure_mix(voice, music, total_s, volume_db)
    voice_in, music_in = audio_inputs(voice, music)
    mix = mixed_audio(voice_in, music_in, total_s, volume_db, measured.sources)
    audio = final_loudnorm(mix, measured.mix)
    stream = ffmpeg.output(audio, out, **{"c:a": "aac", "b:a": AUDIO_BITRATE}, t=f"{total_s:.6f}")
    run_tool([*FFMPEG_BASE, "-loglevel", "error", *stream.get_args()], timeout=120.0)


@pytest.mark.parametrize(
    ("espeak_voice", "sentences", "volume_db", "with_music"),
    [
        ("en-us", 1, -20.0, True),  # ~3 s
        ("en-us+f3", 2, -20.0, True),
        ("en-gb", 4, -12.0, True),  # ~15 s, a loud bed
        ("en-us+m3", 3, -20.0, False),  # the voice alone
    ],
)
def test_mix_meets_loudness_and_true_peak_targets(
    tmp_path: Path, espeak_voice: str, sentences: int, volume_db: float, with_music: bool
) -> None:
    text = " ".join(SENTENCES[:sentences])
    voice = synthesize_espeak(text, espeak_voice, str(tmp_path / "voice.wav"))
    total_s = voice.duration_s + 0.5
    bed = generate_procedural_bed(espeak_voice, total_s, str(tmp_path / "bed.wav"))
    out = str(tmp_path / "mix.m4a")

    _mix_to_aac(voice.path, bed.path if with_music else None, total_s, volume_db, out)

    integrated, true_peak = ebur128_summary(out)
    assert abs(integrated - TARGET_LUFS) <= LUFS_TOLERANCE_LU, integrated
    assert true_peak <= MAX_TRUE_PEAK_DBTP, true_peak


def test_music_ducks_under_speech(tmp_path: Path) -> None:
    # Speech, 3 s of silence, speech: the gap is where the bed must come back up.
    first = synthesize_espeak(SENTENCES[1], "en-us", str(tmp_path / "a.wav"))
    second = synthesize_espeak(SENTENCES[2], "en-us", str(tmp_path / "b.wav"))
    gap_s = 3.0
    voice_wav = str(tmp_path / "voice.wav")
    subprocess.run(
        ["ffmpeg", "-v", "error", "-y", "-i", first.path, "-i", second.path, "-filter_complex",
         f"[0:a]apad=pad_dur={gap_s}[a];[a][1:a]concat=n=2:v=0:a=1", voice_wav],
        check=True,
    )  # fmt: skip
    total_s = first.duration_s + gap_s + second.duration_s
    bed = generate_procedural_bed("ducking", total_s, str(tmp_path / "bed.wav"))
    sources = measure_sources(voice_wav, bed.path, total_s)

    def bed_level(duck: bool) -> list[float]:
        voice_in, music_in = audio_inputs(voice_wav, bed.path)
        music = levelled_music(music_in, total_s, -20.0, sources)
        if duck:
            music = ducked(music, normalized_voice(voice_in, total_s, sources))
        out = str(tmp_path / f"bed-{duck}.wav")
        stream = ffmpeg.output(music, out, t=f"{total_s:.6f}")
        run_tool([*FFMPEG_BASE, "-loglevel", "error", *stream.get_args()], timeout=120.0)
        samples = mono_samples(out)
        speech = (0.4, first.duration_s - 0.4)
        # The release is 0.4 s: measure the gap after it.
        gap = (first.duration_s + 0.9, first.duration_s + gap_s - 0.2)
        return [rms_db(samples, *speech), rms_db(samples, *gap)]

    plain_speech, plain_gap = bed_level(duck=False)
    ducked_speech, ducked_gap = bed_level(duck=True)
    # The bed's own swell differs between the windows: compare each with the unducked bed.
    under_speech = plain_speech - ducked_speech
    in_gap = plain_gap - ducked_gap
    assert under_speech - in_gap >= MIN_DUCKING_DB, (under_speech, in_gap)
    assert in_gap < 2.0, in_gap  # the bed is back (nearly) at full level between sentences


def test_silent_mix_is_refused(tmp_path: Path) -> None:
    silent = str(tmp_path / "silent.wav")
    subprocess.run(
        ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "anullsrc=r=22050:cl=mono",
         "-t", "3", silent],
        check=True,
    )  # fmt: skip
    with pytest.raises(LoudnessError, match="silent"):
        measure_mix(silent, None, 3.0, -20.0)
    with pytest.raises(LoudnessError, match="no measurement"):
        parse_loudnorm_json("ffmpeg said nothing useful")


def test_measurement_parsing_and_linear_check() -> None:
    stderr = (
        "[Parsed_loudnorm_13 @ 0x55] \n{\n"
        '\t"input_i" : "-18.73",\n\t"input_tp" : "-7.00",\n\t"input_lra" : "2.30",\n'
        '\t"input_thresh" : "-29.13",\n\t"output_i" : "-14.1",\n\t"output_tp" : "-2.0",\n'
        '\t"output_lra" : "1.0",\n\t"output_thresh" : "-24.4",\n'
        '\t"normalization_type" : "dynamic",\n\t"target_offset" : "0.13"\n}\n'
    )
    measured = parse_loudnorm_json(stderr)
    assert (measured.input_i, measured.input_tp, measured.target_offset) == (-18.73, -7.0, 0.13)
    assert measured.linear_possible()  # -7.00 + 4.73 = -2.27 <= -1.5
    peaky = parse_loudnorm_json(stderr.replace('"-7.00"', '"-3.00"'))
    assert not peaky.linear_possible()  # -3.00 + 4.73 = +1.73 would clip


def test_procedural_bed_is_deterministic_per_seed(tmp_path: Path) -> None:
    a = generate_procedural_bed("science:1", 4.0, str(tmp_path / "a.wav"))
    b = generate_procedural_bed("science:1", 4.0, str(tmp_path / "b.wav"))
    c = generate_procedural_bed("cooking:1", 4.0, str(tmp_path / "c.wav"))
    assert a.sha256 == b.sha256 != c.sha256
    assert a.source == "procedural" and a.license["license"].startswith("royalty-free")
    assert procedural_bed_expression("x") == procedural_bed_expression("x")
    with pytest.raises(ValueError):
        generate_procedural_bed("x", 0.0, str(tmp_path / "d.wav"))


def _tone(path: Path, hz: int) -> Path:
    subprocess.run(
        ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"sine=f={hz}:d=2", str(path)],
        check=True,
    )
    return path


def _license(track: Path, **fields: str) -> None:
    track.with_name(track.name + ".license.json").write_text(json.dumps(fields))


def test_library_track_needs_a_license(tmp_path: Path) -> None:
    library = tmp_path / "music"
    library.mkdir()
    first = _tone(library / "calm.wav", 220)
    second = _tone(library / "bright.wav", 330)
    _license(first, license="CC0-1.0", source="https://example.org/calm")
    with pytest.raises(MusicLibraryError, match="'bright.wav' has no license file"):
        library_tracks(library)
    _license(second, license="CC-BY-4.0")  # no source
    with pytest.raises(MusicLibraryError, match="lacks source"):
        library_tracks(library)
    second.with_name("bright.wav.license.json").write_text("not json")
    with pytest.raises(MusicLibraryError, match="not valid JSON"):
        library_tracks(library)
    _license(second, license="CC-BY-4.0", source="https://example.org/bright", attribution="A")

    tracks = library_tracks(library)
    assert [t.title for t in tracks] == ["bright", "calm"]
    chosen = choose_library_track(library, "science:7")
    assert chosen == choose_library_track(library, "science:7")
    payload = chosen.payload()
    assert payload["source"] == "library" and payload["license"]["license"] in {
        "CC0-1.0",
        "CC-BY-4.0",
    }
    picks = {choose_library_track(library, f"science:{i}").title for i in range(20)}
    assert picks == {"bright", "calm"}
    assert music_bed(str(library), "science:7", 5.0, tmp_path) == chosen


def test_bad_libraries_are_refused(tmp_path: Path) -> None:
    with pytest.raises(MusicLibraryError, match="is not a folder"):
        library_tracks(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no audio here")
    with pytest.raises(MusicLibraryError, match="holds no audio"):
        library_tracks(tmp_path / "empty")


def test_levelled_music_rejects_out_of_range_volume(tmp_path: Path) -> None:
    _, music = audio_inputs("v.wav", "m.wav")
    with pytest.raises(ValueError, match="outside"):
        levelled_music(music, 5.0, -3.0, SourceLoudness(-20.0, -20.0))
    with pytest.raises(LoudnessError, match="nearly"):  # +50 dB to reach the voice's level
        levelled_music(music, 5.0, -20.0, SourceLoudness(-20.0, -86.0))


BASE_DIMENSION = {
    "slug": "science",
    "title": "Science",
    "visual_style": "x",
    "palette": ["#000000", "#ffffff"],
    "feeds": ["feeds/science.json"],
    "accounts": [{"platform": "youtube", "handle": "sci"}],
}


def test_dimension_music_block() -> None:
    default = parse_dimension(BASE_DIMENSION, "science.yaml")
    assert (default.music.library, default.music.volume_db) == ("", -20.0)
    custom = parse_dimension(
        {**BASE_DIMENSION, "music": {"library": "music/science", "volume_db": -18}}, "s.yaml"
    )
    assert (custom.music.library, custom.music.volume_db) == ("music/science", -18.0)
    assert dimension_from_json(custom.to_json()).music == custom.music
    legacy = custom.to_json()
    del legacy["music"]
    assert dimension_from_json(legacy).music == default.music


@pytest.mark.parametrize(
    ("music", "field"),
    [
        ({"volume_db": -3}, "music.volume_db"),
        ({"volume_db": -50}, "music.volume_db"),
        ({"volume_db": "loud"}, "music.volume_db"),
        ({"volume_db": True}, "music.volume_db"),
        ({"library": 7}, "music.library"),
        ({"tempo": 120}, "music"),
        ("music/science", "music"),
    ],
)
def test_dimension_music_block_rejects_bad_values(music: object, field: str) -> None:
    with pytest.raises(DimensionConfigError) as caught:
        parse_dimension({**BASE_DIMENSION, "music": music}, "science.yaml")
    assert caught.value.field_name == field


def test_the_bed_is_synthesised_above_twice_its_highest_tone() -> None:
    """The pad is evaluated at BED_SYNTHESIS_RATE and resampled: every tone it can pick must be
    under that rate's Nyquist frequency, or it would fold back as a wrong note."""
    import re

    from mdame_domain.audio_mix import BED_SYNTHESIS_RATE

    highest = 0.0
    for n in range(400):  # every progression, tonic and bar length a seed can pick
        left, right = procedural_bed_expression(f"seed:{n}")
        numbers = [float(x) for x in re.findall(r"\d+\.\d{3}", left + right)]
        highest = max(highest, *numbers)
    assert 600 < highest < BED_SYNTHESIS_RATE / 2, highest
