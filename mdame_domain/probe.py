"""Measurements of media with ffprobe and ffmpeg's analysis filters.

analyze_media is what the render gate reads (one ffprobe and one decode; render_quality judges
it). The render measures its own picture as it encodes (PICTURE_ANALYSIS, parse_picture), so
a file just rendered is decoded for its sound only. mean_volume_db is the voice check's
reading; probe_media and the frame signatures are single-purpose probes (the tests read renders
with them)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from fractions import Fraction
from subprocess import CompletedProcess

from mdame_domain.mediatools import FFMPEG_BASE, MediaToolError, run_tool
from mdame_domain.timing import spent

SIGNATURE_SIZE = 32
_MEAN_VOLUME = re.compile(r"mean_volume:\s*(-?inf|-?\d+(?:\.\d+)?) dB")


@dataclass(frozen=True)
class MediaProbe:
    width: int
    height: int
    duration_s: float
    video_codec: str
    audio_codec: str | None
    fps: float
    size_bytes: int


def _analysis_timeout(duration_s: float) -> float:
    return 60.0 + 2.0 * duration_s


def _rate(text: str | None) -> float:
    try:
        return float(Fraction(text)) if text and text != "0/0" else 0.0
    except (ValueError, ZeroDivisionError):
        return 0.0


def _probe(args: list[str], timeout: float) -> CompletedProcess[bytes]:
    """run_tool, its time counted as a probe's (every ffprobe and decode pass here is one)."""
    with spent("probes"):
        return run_tool(args, timeout=timeout)


def probe_media(path: str) -> MediaProbe:
    """Geometry, duration, codecs and frame rate of the first video and audio streams."""
    args = [
        "ffprobe", "-v", "error", "-print_format", "json",
        "-show_format", "-show_streams", path,
    ]  # fmt: skip
    info = json.loads(_probe(args, timeout=60.0).stdout or b"{}")
    streams = info.get("streams", [])
    video = next((s for s in streams if s.get("codec_type") == "video"), None)
    audio = next((s for s in streams if s.get("codec_type") == "audio"), None)
    if video is None:
        raise MediaToolError("ffprobe", path, "no video stream", reason="found no video")
    duration = info.get("format", {}).get("duration") or video.get("duration") or 0.0
    return MediaProbe(
        width=int(video.get("width", 0)),
        height=int(video.get("height", 0)),
        duration_s=float(duration),
        video_codec=str(video.get("codec_name", "")),
        audio_codec=str(audio["codec_name"]) if audio else None,
        fps=_rate(video.get("avg_frame_rate")) or _rate(video.get("r_frame_rate")),
        size_bytes=os.path.getsize(path),
    )


def mean_volume_db(path: str) -> float:
    """Mean volume of the first audio stream in dBFS (-inf for digital silence)."""
    args = [*FFMPEG_BASE, "-loglevel", "info", "-i", path,
            "-map", "0:a:0", "-af", "volumedetect", "-f", "null", "-"]  # fmt: skip
    stderr = _probe(args, timeout=120.0).stderr.decode("utf-8", "replace")
    match = _MEAN_VOLUME.search(stderr)
    if not match:
        raise MediaToolError("ffmpeg", "volumedetect " + path, stderr[-500:], reason="no reading")
    return float(match.group(1))


def frame_signature(path: str, at_s: float) -> bytes:
    """One frame at at_s as 32x32 8-bit grey pixels: cheap to compare between frames."""
    args = [*FFMPEG_BASE, "-loglevel", "error", "-ss", f"{max(0.0, at_s):.3f}", "-i", path,
            "-frames:v", "1", "-vf", f"scale={SIGNATURE_SIZE}:{SIGNATURE_SIZE},format=gray",
            "-f", "rawvideo", "pipe:1"]  # fmt: skip
    data = _probe(args, timeout=60.0).stdout
    if len(data) != SIGNATURE_SIZE * SIGNATURE_SIZE:
        raise MediaToolError(
            "ffmpeg",
            f"frame at {at_s}s of {path}",
            f"got {len(data)} bytes",
            reason="returned no frame",
        )
    return data


def mean_abs_diff(a: bytes, b: bytes) -> float:
    if len(a) != len(b) or not a:
        raise ValueError(f"signatures differ in size: {len(a)} vs {len(b)}")
    return sum(abs(x - y) for x, y in zip(a, b, strict=True)) / len(a)


def frames_differ(a: bytes, b: bytes, min_mean_abs_diff: float = 8.0) -> bool:
    """True when two frame signatures differ visibly (mean absolute grey difference)."""
    return mean_abs_diff(a, b) >= min_mean_abs_diff


# ------------------------------------------------------------------------------------------
# Everything a render's quality gates need, from one ffprobe and ONE ffmpeg decode.
# ------------------------------------------------------------------------------------------
# Analysis settings: black is a near-black frame for >= 0.1 s; a freeze is <= -60 dB of change
# for >= 0.5 s; silence is under -50 dBFS for >= 0.3 s (the checks then compare the longest).
BLACK_MIN_S, BLACK_PIXEL_THRESHOLD = 0.1, 0.10
FREEZE_NOISE_DB, FREEZE_MIN_S = -60, 0.5
SILENCE_NOISE_DB, SILENCE_MIN_S = -50, 0.3
# Black and freeze are properties of the picture, not of its detail: a 270-wide copy decides
# them as well as the full frame, for a fraction of the filter cost.
ANALYSIS_WIDTH = 270

_NUM = r"(-?inf|-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)"
_BLACK = re.compile(rf"black_start:\s*{_NUM}\s+black_end:\s*{_NUM}")
_FREEZE_START = re.compile(rf"freezedetect\.freeze_start:\s*{_NUM}")
_FREEZE_END = re.compile(rf"freezedetect\.freeze_end:\s*{_NUM}")
_SILENCE_START = re.compile(rf"silence_start:\s*{_NUM}")
_SILENCE_END = re.compile(rf"silence_end:\s*{_NUM}")
_SUMMARY = "Summary:"
_INTEGRATED = re.compile(rf"Integrated loudness:\s*I:\s*{_NUM} LUFS")
_TRUE_PEAK = re.compile(rf"True peak:\s*Peak:\s*{_NUM} dBFS")


@dataclass(frozen=True)
class StreamInfo:
    """What ffprobe says about a file's first video and audio streams."""

    width: int
    height: int
    video_codec: str
    audio_codec: str | None
    fps: float
    pix_fmt: str
    sar: str  # "1:1"; ffprobe's "0:1"/absent (unspecified) reads as square pixels
    duration_s: float  # the container's
    video_duration_s: float
    audio_duration_s: float | None


@dataclass(frozen=True)
class PictureStats:
    """The picture's measurements: the longest black and frozen stretches."""

    longest_black_s: float
    longest_freeze_s: float


@dataclass(frozen=True)
class SignalStats:
    """What the one analysis decode measured."""

    integrated_lufs: float | None  # None: no audio stream
    true_peak_dbtp: float | None
    longest_black_s: float
    longest_freeze_s: float
    longest_silence_s: float


@dataclass(frozen=True)
class MediaAnalysis:
    """One file's streams and signal measurements: what every render check reads."""

    width: int
    height: int
    video_codec: str
    audio_codec: str | None
    fps: float
    pix_fmt: str
    sar: str
    duration_s: float
    video_duration_s: float
    audio_duration_s: float | None
    integrated_lufs: float | None
    true_peak_dbtp: float | None
    longest_black_s: float
    longest_freeze_s: float
    longest_silence_s: float

    @property
    def av_drift_s(self) -> float | None:
        """|video - audio| stream duration; None without an audio stream."""
        if self.audio_duration_s is None:
            return None
        return abs(self.video_duration_s - self.audio_duration_s)

    def to_json(self) -> dict[str, object]:
        """A JSON-safe form (rounded: stored in the render's payload)."""
        out: dict[str, object] = {}
        for name, value in self.__dict__.items():
            out[name] = round(value, 4) if isinstance(value, float) else value
        return out

    @classmethod
    def from_json(cls, data: dict[str, object]) -> MediaAnalysis:
        names = cls.__dataclass_fields__
        missing = [n for n in names if n not in data]
        if missing:
            raise ValueError(f"stored analysis lacks {', '.join(missing)}")
        return cls(**{n: data[n] for n in names})  # type: ignore[arg-type]


def _float(text: str | None) -> float:
    if text is None:
        return 0.0
    try:
        return float(text)
    except ValueError:
        return 0.0


def _sar(text: str | None) -> str:
    if not text or text in ("0:1", "N/A"):
        return "1:1"  # unspecified means square
    num, _, den = text.partition(":")
    try:
        ratio = Fraction(int(num), int(den))
    except (ValueError, ZeroDivisionError):
        return text
    return f"{ratio.numerator}:{ratio.denominator}"


def parse_ffprobe(info: dict[str, object], path: str = "") -> StreamInfo:
    """Streams and durations from `ffprobe -print_format json -show_format -show_streams`."""
    streams = info.get("streams") or []
    assert isinstance(streams, list)
    video = next((s for s in streams if s.get("codec_type") == "video"), None)
    audio = next((s for s in streams if s.get("codec_type") == "audio"), None)
    if video is None:
        raise MediaToolError("ffprobe", path, "no video stream", reason="found no video")
    fmt = info.get("format") or {}
    assert isinstance(fmt, dict)
    container = _float(fmt.get("duration")) or _float(video.get("duration"))
    return StreamInfo(
        width=int(video.get("width", 0)),
        height=int(video.get("height", 0)),
        video_codec=str(video.get("codec_name", "")),
        audio_codec=str(audio["codec_name"]) if audio else None,
        fps=_rate(video.get("avg_frame_rate")) or _rate(video.get("r_frame_rate")),
        pix_fmt=str(video.get("pix_fmt", "")),
        sar=_sar(video.get("sample_aspect_ratio")),
        duration_s=container,
        video_duration_s=_float(video.get("duration")) or container,
        audio_duration_s=(_float(audio.get("duration")) or container) if audio else None,
    )


def _longest(starts: list[float], ends: list[float], until_s: float) -> float:
    """The longest [start, end) stretch; a start with no end runs to the end of the file
    (ffmpeg 5 prints no end for a freeze or silence that lasts to the end)."""
    longest = 0.0
    for i, start in enumerate(starts):
        end = ends[i] if i < len(ends) else until_s
        longest = max(longest, end - start)
    return max(0.0, longest)


def _number(text: str) -> float:
    return float(text)  # "-inf" parses as -inf


def parse_picture(stderr: str, duration_s: float) -> PictureStats:
    """The picture's stretches in the stderr of a graph that ran picture_analysis_filter."""
    blacks = [_number(e) - _number(s) for s, e in _BLACK.findall(stderr)]
    freeze = _longest(
        [_number(x) for x in _FREEZE_START.findall(stderr)],
        [_number(x) for x in _FREEZE_END.findall(stderr)],
        duration_s,
    )
    return PictureStats(longest_black_s=max(blacks, default=0.0), longest_freeze_s=freeze)


def parse_analysis(
    stderr: str, duration_s: float, has_audio: bool, picture: PictureStats | None = None
) -> SignalStats:
    """The measurements in one analysis decode's stderr (see analysis_args); `picture`: the
    picture's, measured elsewhere (the decode then measured the sound only)."""
    if picture is None:
        picture = parse_picture(stderr, duration_s)
    silence = _longest(
        [_number(x) for x in _SILENCE_START.findall(stderr)],
        [_number(x) for x in _SILENCE_END.findall(stderr)],
        duration_s,
    )
    lufs = peak = None
    if has_audio:
        # ffmpeg 5 logs a summary for a first, empty configuration of the graph too: the last
        # summary is the file's.
        summary = stderr[stderr.rfind(_SUMMARY) :] if _SUMMARY in stderr else ""
        found_i, found_tp = _INTEGRATED.search(summary), _TRUE_PEAK.search(summary)
        if not found_i or not found_tp:
            raise MediaToolError("ffmpeg", "ebur128", stderr[-500:], reason="no loudness summary")
        lufs, peak = _number(found_i.group(1)), _number(found_tp.group(1))
    return SignalStats(
        integrated_lufs=lufs,
        true_peak_dbtp=peak,
        longest_black_s=picture.longest_black_s,
        longest_freeze_s=picture.longest_freeze_s,
        longest_silence_s=silence,
    )


# The filter chains the measurements come from; they log at info level, which parse_picture and
# parse_analysis read.
# (filter, positional args, named args): blackdetect and freezedetect on a copy ANALYSIS_WIDTH
# wide. The render applies the same chain to the frames it encodes (ffmpeg-python filters).
PICTURE_ANALYSIS: tuple[tuple[str, tuple[object, ...], dict[str, object]], ...] = (
    ("scale", (ANALYSIS_WIDTH, -2), {}),
    ("blackdetect", (), {"d": BLACK_MIN_S, "pix_th": BLACK_PIXEL_THRESHOLD}),
    ("freezedetect", (), {"n": f"{FREEZE_NOISE_DB}dB", "d": FREEZE_MIN_S}),
)


def picture_analysis_filter() -> str:
    """PICTURE_ANALYSIS as a filtergraph chain (it logs at level info)."""
    return ",".join(
        name + "=" + ":".join([*(str(a) for a in args), *(f"{k}={v}" for k, v in named.items())])
        for name, args, named in PICTURE_ANALYSIS
    )


def sound_analysis_filter() -> str:
    """ebur128 (integrated loudness, true peak) and silencedetect (log level info)."""
    return (
        f"ebur128=peak=true:framelog=verbose,silencedetect=n={SILENCE_NOISE_DB}dB:d={SILENCE_MIN_S}"
    )


def analysis_args(path: str, has_audio: bool, picture: bool = True) -> list[str]:
    """One decode: the picture (unless `picture` is False) through picture_analysis_filter, the
    sound through sound_analysis_filter, both discarded by the null muxer."""
    chains, maps = [], []
    if picture:
        chains.append(f"[0:v:0]{picture_analysis_filter()}[v]")
        maps += ["-map", "[v]"]
    if has_audio:
        chains.append(f"[0:a:0]{sound_analysis_filter()}[a]")
        maps += ["-map", "[a]"]
    if not chains:
        raise ValueError("an analysis decode needs the picture or the sound")
    return [*FFMPEG_BASE, "-loglevel", "info", "-i", path, "-filter_complex", ";".join(chains),
            *maps, "-f", "null", "-"]  # fmt: skip


def analyze_media(path: str, picture: PictureStats | None = None) -> MediaAnalysis:
    """ffprobe for the streams, then one ffmpeg decode for every signal measurement. `picture`:
    the picture's measurements taken as these bytes were encoded (the render's own, see
    mdame_domain.render); the decode then reads the sound only, and none is needed without one."""
    args = [
        "ffprobe", "-v", "error", "-print_format", "json",
        "-show_format", "-show_streams", path,
    ]  # fmt: skip
    streams = parse_ffprobe(json.loads(_probe(args, timeout=60.0).stdout or b"{}"), path)
    has_audio = streams.audio_codec is not None
    stderr = ""
    if picture is None or has_audio:
        decode = analysis_args(path, has_audio, picture=picture is None)
        run = _probe(decode, timeout=_analysis_timeout(streams.duration_s))
        stderr = run.stderr.decode("utf-8", "replace")
    stats = parse_analysis(stderr, streams.duration_s, has_audio, picture)
    return MediaAnalysis(**streams.__dict__, **stats.__dict__)
