"""The render's sound: the voice normalised, a music bed ducked under it, and a two-pass
loudnorm on the mix.

Pass 1 (`measure_mix`) runs the mix alone through ffmpeg with `loudnorm=...:print_format=json`
(audio only, cheap). Pass 2 (`final_loudnorm`) applies the measured values with `linear=true`
inside the single video encode, so the mix is scaled by one gain and never limited twice.

The bed is either a track from the dimension's music library, each with a license sidecar
(`<track>.license.json`), or, with no library configured, generated here from a seed: sine
chords under a slow swell, royalty-free by construction and never committed as a file.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ffmpeg

from mdame_domain.media_store import sha256_file
from mdame_domain.mediatools import FFMPEG_BASE, run_tool
from mdame_domain.timing import spent

# --- loudness targets (streaming practice: FACTS.md, "Media") -------------------------------
TARGET_LUFS = -14.0  # integrated loudness of the published mix
LUFS_TOLERANCE_LU = 1.0  # a render within TARGET_LUFS +- this passes
MAX_TRUE_PEAK_DBTP = -1.0  # the published limit
# What the final loudnorm aims at: 0.5 dB under the limit leaves room for AAC's overshoot.
LOUDNORM_TRUE_PEAK_DBTP = -1.5
# loudnorm only stays linear when the measured range fits the target range: speech over a bed
# measures 1-5 LU, so a wide target keeps it linear without compressing anything.
LOUDNORM_LRA_LU = 20.0
# The voice is normalised to VOICE_LUFS and the bed to volume_db under it, each by one gain
# from its measured integrated loudness (ebur128: far cheaper than a loudnorm per source).
VOICE_LUFS = -16.0
MAX_SOURCE_GAIN_DB = 40.0  # a source needing more is as good as silent
SILENCE_LUFS = -69.0  # ebur128 reports -70 for a signal that never passes its gate
# Linear mode needs the mix's peak-to-loudness ratio under LOUDNORM_TRUE_PEAK - TARGET_LUFS
# (12.5 dB); a sample-peak limiter 9 dB over the voice's loudness keeps it near 11-12 dB.
MIX_PEAK_LIMIT_DBFS = VOICE_LUFS + 9.0
DEFAULT_MUSIC_VOLUME_DB = -20.0
MUSIC_VOLUME_RANGE_DB = (-40.0, -6.0)
# Ducking: sidechaincompress keyed by the voice. Speech at VOICE_LUFS sits well over the
# threshold (about -30 dBFS), so the bed drops by roughly 10 dB while someone speaks.
DUCK_THRESHOLD = 0.03
DUCK_RATIO = 10.0
DUCK_ATTACK_MS = 10.0
DUCK_RELEASE_MS = 400.0
MIN_DUCKING_DB = 6.0  # what the tests demand between the bed in gaps and under speech
AUDIO_SAMPLE_RATE = 48000
BED_SYNTHESIS_RATE = 8000
AUDIO_BITRATE = "128k"

LICENSE_SUFFIX = ".license.json"
AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a")
REQUIRED_LICENSE_FIELDS = ("license", "source")
PROCEDURAL_RECIPE = "procedural-bed-v2"


class MusicLibraryError(ValueError):
    """The dimension's music library cannot give a track: missing, empty, or unlicensed."""


class LoudnessError(RuntimeError):
    """The mix could not be measured (silent, or loudnorm printed nothing)."""


def loudness_targets() -> dict[str, object]:
    """Every number that changes the mixed bytes: part of the render's input digest."""
    return {
        "target_lufs": TARGET_LUFS,
        "loudnorm_tp": LOUDNORM_TRUE_PEAK_DBTP,
        "loudnorm_lra": LOUDNORM_LRA_LU,
        "voice_lufs": VOICE_LUFS,
        "mix_peak_limit": MIX_PEAK_LIMIT_DBFS,
        "duck": [DUCK_THRESHOLD, DUCK_RATIO, DUCK_ATTACK_MS, DUCK_RELEASE_MS],
        "sample_rate": AUDIO_SAMPLE_RATE,
    }


# --- the music bed ----------------------------------------------------------------------------
@dataclass(frozen=True)
class MusicTrack:
    """The bed a render uses, with the license it is used under."""

    path: str
    sha256: str
    title: str
    source: str  # "library" or "procedural"
    license: Mapping[str, Any] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        """What the render's payload records about its music."""
        return {
            "title": self.title,
            "source": self.source,
            "sha256": self.sha256,
            "license": dict(self.license),
        }


def read_license(track: Path) -> dict[str, Any]:
    """The license sidecar of a library track; MusicLibraryError when absent or incomplete."""
    sidecar = track.with_name(track.name + LICENSE_SUFFIX)
    if not sidecar.is_file():
        raise MusicLibraryError(
            f"music track {track.name!r} has no license file {sidecar.name!r}: every library "
            f"track needs one naming its {' and '.join(REQUIRED_LICENSE_FIELDS)}"
        )
    try:
        data = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MusicLibraryError(f"license file {sidecar.name!r} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise MusicLibraryError(f"license file {sidecar.name!r} must hold a JSON object")
    missing = [
        name
        for name in REQUIRED_LICENSE_FIELDS
        if not isinstance(data.get(name), str) or not data[name].strip()
    ]
    if missing:
        raise MusicLibraryError(f"license file {sidecar.name!r} lacks {', '.join(missing)}")
    return data


def library_tracks(folder: str | Path) -> list[MusicTrack]:
    """Every track of a library folder, sorted by name; refuses the folder if any track lacks
    a license (a silent skip would change which track a seed picks)."""
    root = Path(folder)
    if not root.is_dir():
        raise MusicLibraryError(f"music library {str(root)!r} is not a folder")
    files = sorted(p for p in root.iterdir() if p.is_file() and p.suffix.lower() in AUDIO_SUFFIXES)
    if not files:
        raise MusicLibraryError(
            f"music library {str(root)!r} holds no audio ({', '.join(AUDIO_SUFFIXES)})"
        )
    return [MusicTrack(str(p), sha256_file(p), p.stem, "library", read_license(p)) for p in files]


def _seed_int(seed: str) -> int:
    return int.from_bytes(hashlib.sha256(seed.encode("utf-8")).digest()[:8], "big")


def choose_library_track(folder: str | Path, seed: str) -> MusicTrack:
    """The library track for a seed (e.g. dimension and script): stable while the folder is."""
    tracks = library_tracks(folder)
    return tracks[_seed_int(seed) % len(tracks)]


# Chord roots in semitones from the key's tonic, and each chord's quality (third: 4 or 3).
_PROGRESSIONS = (
    ((0, 4), (7, 4), (9, 3), (5, 4)),  # I V vi IV
    ((9, 3), (5, 4), (0, 4), (7, 4)),  # vi IV I V
    ((0, 4), (9, 3), (5, 4), (7, 4)),  # I vi IV V
    ((0, 4), (5, 4), (9, 3), (7, 4)),  # I IV vi V
)
_TONICS_HZ = (196.00, 220.00, 246.94, 261.63, 174.61)  # G3 A3 B3 C4 F3
_BAR_LENGTHS_S = (2.0, 2.4, 2.8)


def procedural_bed_expression(seed: str) -> tuple[str, str]:
    """aevalsrc expressions (left, right) of a pad for `seed`: four triads with a bass note,
    each swelling in and out over one bar; the chord changes where the swell is silent, so the
    phase jumps never click."""
    n = _seed_int(seed)
    progression = _PROGRESSIONS[n % len(_PROGRESSIONS)]
    tonic = _TONICS_HZ[(n // 7) % len(_TONICS_HZ)]
    bar = _BAR_LENGTHS_S[(n // 53) % len(_BAR_LENGTHS_S)]

    def hz(semitones: int) -> float:
        return tonic * 2 ** (semitones / 12)

    # Voices per chord: bass (an octave down), root, third, fifth.
    tones = [
        [hz(root - 12), hz(root), hz(root + third), hz(root + 7)] for root, third in progression
    ]

    def pick(values: list[float]) -> str:
        k = f"mod(floor(t/{bar}),{len(values)})"
        expr = f"{values[-1]:.3f}"
        for i in range(len(values) - 2, -1, -1):
            expr = f"if(eq({k},{i}),{values[i]:.3f},{expr})"
        return expr

    envelope = f"pow(sin(PI*mod(t,{bar})/{bar}),2)"
    gains = (0.22, 0.16, 0.12, 0.12)

    def channel(detune_hz: float) -> str:
        voices = [
            f"{gain}*sin(2*PI*t*({pick([chord[v] for chord in tones])}+{detune_hz}))"
            for v, gain in enumerate(gains)
        ]
        return f"{envelope}*({'+'.join(voices)})"

    return channel(0.0), channel(0.4)


def generate_procedural_bed(seed: str, duration_s: float, out_path: str) -> MusicTrack:
    """Write the seed's pad as a 48 kHz stereo WAV (bit-exact: same seed, same bytes)."""
    if not math.isfinite(duration_s) or duration_s <= 0:
        raise ValueError(f"bed duration must be positive, got {duration_s}")
    left, right = procedural_bed_expression(seed)
    # The pad's tones are pure sines under 700 Hz: 8 kHz samples them exactly, and evaluating
    # the expression six times less often makes the bed a fraction of a second, not seconds;
    # the WAV is resampled to the mix's rate.
    source = f"aevalsrc=exprs='{left}|{right}':s={BED_SYNTHESIS_RATE}:d={duration_s:.3f}"
    args = [
        *FFMPEG_BASE, "-loglevel", "error", "-f", "lavfi", "-i", source,
        "-af", f"aresample={AUDIO_SAMPLE_RATE}",
        "-fflags", "+bitexact", "-flags:a", "+bitexact", "-c:a", "pcm_s16le", out_path,
    ]  # fmt: skip
    with spent("encode"):  # the render's own ffmpeg work, like its two passes
        run_tool(args, timeout=60.0 + duration_s)
    return MusicTrack(
        path=out_path,
        sha256=sha256_file(out_path),
        title=f"procedural bed {hashlib.sha256(seed.encode()).hexdigest()[:12]}",
        source="procedural",
        license={
            "license": "royalty-free: generated by MD-AME at render time",
            "source": PROCEDURAL_RECIPE,
        },
    )


def music_bed(library: str, seed: str, duration_s: float, work_dir: str | Path) -> MusicTrack:
    """The dimension's bed: a licensed library track when `library` names a folder, else the
    procedural pad generated into work_dir."""
    if library:
        return choose_library_track(library, seed)
    return generate_procedural_bed(seed, duration_s, str(Path(work_dir) / "music_bed.wav"))


# --- the mix (ffmpeg-python streams) -------------------------------------------------------
def _pcm(stream: Any) -> Any:
    # loudnorm runs at 192 kHz; every chain comes back to one format so the mix negotiates.
    return stream.filter("aresample", AUDIO_SAMPLE_RATE).filter(
        "aformat",
        sample_fmts="fltp",
        sample_rates=AUDIO_SAMPLE_RATE,
        channel_layouts="stereo",
    )


def _fit(stream: Any, total_s: float) -> Any:
    return (
        stream.filter("apad", whole_dur=f"{total_s:.6f}")
        .filter("atrim", end=f"{total_s:.6f}")
        .filter("asetpts", "PTS-STARTPTS")
    )


@dataclass(frozen=True)
class SourceLoudness:
    """Integrated loudness of the voice and the bed as they come (pass 1's first reading)."""

    voice_lufs: float
    music_lufs: float | None = None

    def voice_gain_db(self) -> float:
        return _gain(VOICE_LUFS - self.voice_lufs, "voice")

    def music_gain_db(self, volume_db: float) -> float:
        low, high = MUSIC_VOLUME_RANGE_DB
        if not low <= volume_db <= high:
            raise ValueError(f"music volume {volume_db} dB outside {low}..{high} dB")
        if self.music_lufs is None:
            raise ValueError("no music was measured")
        return _gain(VOICE_LUFS + volume_db - self.music_lufs, "music bed")


def _gain(gain_db: float, what: str) -> float:
    if not math.isfinite(gain_db) or gain_db > MAX_SOURCE_GAIN_DB:
        raise LoudnessError(f"the {what} is (nearly) silent: it would need {gain_db:+.1f} dB")
    return gain_db


def normalized_voice(voice: Any, total_s: float, sources: SourceLoudness) -> Any:
    """The voice at VOICE_LUFS, padded or cut to total_s."""
    return _fit(_pcm(voice).filter("volume", f"{sources.voice_gain_db():.2f}dB"), total_s)


def levelled_music(music: Any, total_s: float, volume_db: float, sources: SourceLoudness) -> Any:
    """The bed at volume_db under the voice (loop the input with stream_loop=-1)."""
    gain = sources.music_gain_db(volume_db)
    return _fit(_pcm(music).filter("volume", f"{gain:.2f}dB"), total_s)


def ducked(music: Any, voice_key: Any) -> Any:
    """The bed compressed whenever the voice (the sidechain) speaks."""
    return ffmpeg.filter(
        [music, voice_key],
        "sidechaincompress",
        threshold=DUCK_THRESHOLD,
        ratio=DUCK_RATIO,
        attack=DUCK_ATTACK_MS,
        release=DUCK_RELEASE_MS,
    )


def mixed_audio(
    voice: Any, music: Any | None, total_s: float, volume_db: float, sources: SourceLoudness
) -> Any:
    """Voice over the ducked bed, peak-limited so pass 2's loudnorm can stay linear."""
    speech = normalized_voice(voice, total_s, sources)
    if music is None:
        mix = speech
    else:
        split = speech.filter_multi_output("asplit", 2)
        bed = ducked(levelled_music(music, total_s, volume_db, sources), split[1])
        mix = ffmpeg.filter([split[0], bed], "amix", inputs=2, normalize=0, duration="first")
    return mix.filter(
        "alimiter",
        limit=f"{10 ** (MIX_PEAK_LIMIT_DBFS / 20):.6f}",
        level="false",
        attack=5,
        release=50,
        latency="true",
    )


@dataclass(frozen=True)
class LoudnormMeasurement:
    """Pass 1's reading of the mix (loudnorm's input_* values)."""

    input_i: float
    input_tp: float
    input_lra: float
    input_thresh: float
    target_offset: float

    def linear_possible(self) -> bool:
        """Whether pass 2 can scale by one gain (loudnorm otherwise falls back to dynamic)."""
        gain = TARGET_LUFS - self.input_i
        return self.input_tp + gain <= LOUDNORM_TRUE_PEAK_DBTP and self.input_lra <= LOUDNORM_LRA_LU

    def as_dict(self) -> dict[str, float]:
        return {
            "input_i": self.input_i,
            "input_tp": self.input_tp,
            "input_lra": self.input_lra,
            "input_thresh": self.input_thresh,
            "target_offset": self.target_offset,
        }


_JSON_BLOCK = re.compile(r"\[Parsed_loudnorm_\d+ @ [^\]]*\]\s*(\{.*?\})", re.DOTALL)


def parse_loudnorm_json(stderr: str) -> LoudnormMeasurement:
    """The last loudnorm JSON block in ffmpeg's stderr."""
    blocks = _JSON_BLOCK.findall(stderr)
    if not blocks:
        raise LoudnessError(f"loudnorm printed no measurement: {stderr[-300:]}")
    data = json.loads(blocks[-1])
    try:
        values = {
            name: float(data[name])
            for name in ("input_i", "input_tp", "input_lra", "input_thresh", "target_offset")
        }
    except (KeyError, ValueError) as exc:
        raise LoudnessError(f"loudnorm measurement incomplete: {data}") from exc
    if not all(math.isfinite(v) for v in values.values()) or values["input_i"] < -70:
        raise LoudnessError(f"the mix is silent (integrated {data.get('input_i')} LUFS)")
    return LoudnormMeasurement(**values)


def _measuring_loudnorm(mix: Any) -> Any:
    return mix.filter(
        "loudnorm",
        I=TARGET_LUFS,
        TP=LOUDNORM_TRUE_PEAK_DBTP,
        LRA=LOUDNORM_LRA_LU,
        print_format="json",
    )


def final_loudnorm(mix: Any, measured: LoudnormMeasurement) -> Any:
    """Pass 2: the measured values applied with linear=true, back at 48 kHz."""
    normalized = mix.filter(
        "loudnorm",
        I=TARGET_LUFS,
        TP=LOUDNORM_TRUE_PEAK_DBTP,
        LRA=LOUDNORM_LRA_LU,
        measured_I=f"{max(-99.0, measured.input_i):.2f}",
        measured_TP=f"{min(99.0, max(-99.0, measured.input_tp)):.2f}",
        measured_LRA=f"{min(99.0, measured.input_lra):.2f}",
        measured_thresh=f"{max(-99.0, measured.input_thresh):.2f}",
        offset=f"{measured.target_offset:.2f}",
        linear="true",
    )
    return _pcm(normalized)


def audio_inputs(voice_wav: str, music_path: str | None) -> tuple[Any, Any | None]:
    """The voice and the (looped) bed as ffmpeg-python audio streams."""
    voice = ffmpeg.input(voice_wav).audio
    music = ffmpeg.input(music_path, stream_loop=-1).audio if music_path else None
    return voice, music


_EBUR128_I = re.compile(r"Integrated loudness:\s*\n\s*I:\s*(-?[\d.]+|-?inf) LUFS")


def integrated_lufs(path: str, duration_s: float) -> float:
    """Integrated loudness of a file's first audio stream over its first duration_s
    (ebur128 without true peak: a fraction of a loudnorm's cost)."""
    stream = ffmpeg.input(path, t=f"{duration_s:.6f}").audio.filter("ebur128", framelog="verbose")
    args = [
        *FFMPEG_BASE,
        "-loglevel",
        "info",
        *ffmpeg.output(stream, "-", format="null").get_args(),
    ]
    stderr = run_tool(args, timeout=60.0 + duration_s).stderr.decode("utf-8", "replace")
    found = _EBUR128_I.findall(stderr[stderr.rfind("Summary:") :])
    if not found:
        raise LoudnessError(f"ebur128 printed no summary for {path}: {stderr[-300:]}")
    value = float(found[-1])
    if value <= SILENCE_LUFS:
        raise LoudnessError(f"{path} is silent (integrated {value} LUFS)")
    return value


def measure_sources(voice_wav: str, music_path: str | None, total_s: float) -> SourceLoudness:
    return SourceLoudness(
        voice_lufs=integrated_lufs(voice_wav, total_s),
        music_lufs=integrated_lufs(music_path, total_s) if music_path else None,
    )


@dataclass(frozen=True)
class MixMeasurement:
    """Pass 1: the sources' loudness (their gains) and loudnorm's reading of the mix."""

    sources: SourceLoudness
    mix: LoudnormMeasurement


def measure_mix_args(
    voice_wav: str,
    music_path: str | None,
    total_s: float,
    volume_db: float,
    sources: SourceLoudness,
) -> list[str]:
    """Pass 1's command: the mix, measured, written nowhere (no video is decoded)."""
    voice, music = audio_inputs(voice_wav, music_path)
    measured = _measuring_loudnorm(mixed_audio(voice, music, total_s, volume_db, sources))
    out = ffmpeg.output(measured, "-", format="null")
    return [*FFMPEG_BASE, "-loglevel", "info", *out.get_args()]


def measure_mix(
    voice_wav: str, music_path: str | None, total_s: float, volume_db: float
) -> MixMeasurement:
    """Pass 1, audio only: each source's loudness, then the mix's (loudnorm, print_format)."""
    sources = measure_sources(voice_wav, music_path, total_s)
    args = measure_mix_args(voice_wav, music_path, total_s, volume_db, sources)
    completed = run_tool(args, timeout=60.0 + 2.0 * total_s)
    return MixMeasurement(sources, parse_loudnorm_json(completed.stderr.decode("utf-8", "replace")))
