"""Final render: scene clips + voice over a music bed + burned-in captions -> one 1080x1920
H.264/AAC MP4.

The video is encoded ONCE (no intermediate re-encodes): each clip is looped and cut to its
scene's frame count, scaled and cropped to the frame, the scenes are concatenated and the
captions burned in with libass; the voice, normalised and mixed over the ducked bed, gets the
second pass of a two-pass loudnorm in the same encode (mdame_domain/audio_mix.py). The graph
is built with ffmpeg-python, which does the filtergraph quoting.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

import ffmpeg

from mdame_domain.audio_mix import (
    AUDIO_BITRATE,
    AUDIO_SAMPLE_RATE,
    DEFAULT_MUSIC_VOLUME_DB,
    MUSIC_VOLUME_RANGE_DB,
    MixMeasurement,
    audio_inputs,
    final_loudnorm,
    loudness_targets,
    measure_mix,
    mixed_audio,
)
from mdame_domain.encoders import LIBX264, EncoderPreset
from mdame_domain.mediatools import FFMPEG_BASE, run_tool
from mdame_domain.probe import PICTURE_ANALYSIS, PictureStats, parse_picture
from mdame_domain.scene_cuts import THUMB_H, THUMB_W
from mdame_domain.timing import spent

__all__ = ["AUDIO_SAMPLE_RATE", "RenderInput", "RenderOutcome", "render_media"]


@dataclass(frozen=True)
class RenderInput:
    clip_paths: Sequence[str]
    scene_durations_s: Sequence[float]
    voice_wav: str
    subtitles_ass: str
    out_path: str
    width: int = 1080
    height: int = 1920
    fps: int = 24
    # The bed (None: the voice alone), its level under the voice,
    # and the encoder preset (mdame_domain/encoders.py; video_encoder() picks it per host).
    music_path: str | None = None
    music_volume_db: float = DEFAULT_MUSIC_VOLUME_DB
    encoder: EncoderPreset = LIBX264
    # Frames (first, last: inclusive ranges) written as small RGB thumbnails to thumbs_path
    # as they are handed to the encoder: the scene_timing measurement's reading of the cuts
    # (mdame_domain/scene_cuts.py). None: nothing written.
    thumb_ranges: Sequence[tuple[int, int]] = ()
    thumbs_path: str | None = None

    def __post_init__(self) -> None:
        if not self.clip_paths:
            raise ValueError("a render needs at least one clip")
        if len(self.clip_paths) != len(self.scene_durations_s):
            raise ValueError(
                f"{len(self.clip_paths)} clips but {len(self.scene_durations_s)} scene durations"
            )
        if any(d <= 0 for d in self.scene_durations_s):
            raise ValueError(f"scene durations must be positive: {list(self.scene_durations_s)}")
        if self.width % 2 or self.height % 2 or self.fps < 1:
            raise ValueError(f"bad output geometry {self.width}x{self.height}@{self.fps}")
        low, high = MUSIC_VOLUME_RANGE_DB
        if not low <= self.music_volume_db <= high:
            raise ValueError(f"music volume {self.music_volume_db} dB outside {low}..{high} dB")

    @property
    def total_s(self) -> float:
        return math.fsum(self.scene_durations_s)


def scene_durations(weights: Sequence[float], total_s: float, min_s: float = 1.5) -> list[float]:
    """Split total_s over scenes by weight, each at least min_s; the parts sum to total_s."""
    if not weights:
        raise ValueError("need at least one scene weight")
    if any(w < 0 or not math.isfinite(w) for w in weights) or math.fsum(weights) <= 0:
        raise ValueError(f"weights must be finite, non-negative and not all zero: {weights}")
    if total_s < min_s * len(weights):
        raise ValueError(f"{total_s:.2f}s cannot give {len(weights)} scenes {min_s}s each")
    # Water-filling: scenes whose share falls under min_s are pinned there, the rest re-shared.
    pinned: set[int] = set()
    while True:
        free_total = total_s - min_s * len(pinned)
        free_weight = math.fsum(w for i, w in enumerate(weights) if i not in pinned)
        shares = [
            min_s if i in pinned or free_weight == 0 else free_total * w / free_weight
            for i, w in enumerate(weights)
        ]
        newly_pinned = {i for i, share in enumerate(shares) if share < min_s} - pinned
        if not newly_pinned:
            break
        pinned |= newly_pinned
    # The last scene absorbs rounding so the sum is total_s.
    shares[-1] = total_s - math.fsum(shares[:-1])
    return shares


def scene_frame_counts(durations_s: Sequence[float], fps: int) -> list[int]:
    """Frames per scene, cut at rounded cumulative times so rounding never drifts."""
    counts: list[int] = []
    elapsed, previous_frame = 0.0, 0
    for duration in durations_s:
        elapsed += duration
        frame = round(elapsed * fps)
        counts.append(max(1, frame - previous_frame))
        previous_frame += counts[-1]
    return counts


def _scene_streams(inp: RenderInput) -> list:
    counts = scene_frame_counts(inp.scene_durations_s, inp.fps)
    scenes = []
    for path, frames in zip(inp.clip_paths, counts, strict=True):
        # Loop forever; trim decides how much of each clip is used. fps first: every scene
        # must share one frame rate before trim counts frames and concat joins them.
        clip = ffmpeg.input(path, stream_loop=-1).video
        scenes.append(
            clip.filter("fps", fps=inp.fps)
            .filter("trim", end_frame=frames)
            .filter("setpts", "PTS-STARTPTS")
            .filter("scale", inp.width, inp.height, force_original_aspect_ratio="increase")
            .filter("crop", inp.width, inp.height)
            .filter("setsar", 1)
            .filter("format", "yuv420p")
        )
    return scenes


def output_seconds(inp: RenderInput) -> float:
    """The video's exact length: whole frames."""
    return sum(scene_frame_counts(inp.scene_durations_s, inp.fps)) / inp.fps


def _measured(frames):  # ffmpeg Stream -> the null muxer's OutputStream
    """The render gate's picture measurements, taken of the frames handed to the encoder: the
    same filters the analysis decode runs (mdame_domain.probe), without decoding the file."""
    for name, args, named in PICTURE_ANALYSIS:
        frames = frames.filter(name, *args, **named)
    return ffmpeg.output(frames, "-", f="null")


def _thumbnails(frames, inp: RenderInput):  # ffmpeg Stream -> the rawvideo OutputStream
    """The thumb_ranges' frames, fitted to THUMB_W x THUMB_H as scene_cuts reads a file's."""
    select = "+".join(f"between(n,{first},{last})" for first, last in inp.thumb_ranges)
    small = (
        frames.filter("select", select)
        .filter("scale", THUMB_W, THUMB_H, force_original_aspect_ratio="increase", flags="area")
        .filter("crop", THUMB_W, THUMB_H)
        .filter("setsar", 1)
        .filter("format", "rgb24")
    )
    return ffmpeg.output(small, inp.thumbs_path, f="rawvideo", fps_mode="passthrough")


def _render_output(inp: RenderInput, loudness: MixMeasurement):  # -> ffmpeg OutputStream
    total_s = output_seconds(inp)
    frames = (
        ffmpeg.concat(*_scene_streams(inp), v=1, a=0)
        .filter("subtitles", filename=inp.subtitles_ass)
        .filter("fps", fps=inp.fps)
        .filter("format", "yuv420p")
        .split()
    )
    extra = [_thumbnails(frames[2], inp)] if inp.thumbs_path and inp.thumb_ranges else []
    video = frames[0]
    voice, music = audio_inputs(inp.voice_wav, inp.music_path)
    mix = mixed_audio(voice, music, total_s, inp.music_volume_db, loudness.sources)
    audio = final_loudnorm(mix, loudness.mix)
    audio = audio.filter("atrim", end=f"{total_s:.6f}").filter("asetpts", "PTS-STARTPTS")
    encoded = ffmpeg.output(
        video,
        audio,
        inp.out_path,
        **inp.encoder.output_options(),
        r=inp.fps,
        **{"c:a": "aac", "b:a": AUDIO_BITRATE},
        ar=AUDIO_SAMPLE_RATE,
        t=f"{total_s:.6f}",
        movflags="+faststart",
    )
    return ffmpeg.merge_outputs(encoded, _measured(frames[1]), *extra)


def build_filtergraph(inp: RenderInput, loudness: MixMeasurement) -> str:
    """The -filter_complex graph of the render (ffmpeg-python names the pads)."""
    args = _render_output(inp, loudness).get_args()
    return args[args.index("-filter_complex") + 1]


def build_render_args(inp: RenderInput, loudness: MixMeasurement) -> list[str]:
    """ffmpeg arguments for the whole render, one invocation; `loudness` is pass 1's reading
    of the same mix (audio_mix.measure_mix). Log level info: the picture measurements are
    logged there (parse_picture)."""
    return [*FFMPEG_BASE, "-loglevel", "info", *_render_output(inp, loudness).get_args()]


def render_timeout_s(total_s: float) -> float:
    # About 1x real time on two cores; generous headroom for a loaded host.
    return 120.0 + 6.0 * total_s


@dataclass(frozen=True)
class RenderOutcome:
    path: str
    loudness: MixMeasurement  # pass 1: the sources' and the mix's loudness
    picture: PictureStats  # pass 2: black and frozen stretches of the encoded frames


def render_media(inp: RenderInput) -> RenderOutcome:
    """Pass 1 measures the mix (audio only), pass 2 encodes the video with it applied and
    measures the picture it encodes."""
    with spent("encode"):  # both passes: the loudness measurement is an encode's share
        total_s = output_seconds(inp)
        loudness = measure_mix(inp.voice_wav, inp.music_path, total_s, inp.music_volume_db)
        done = run_tool(build_render_args(inp, loudness), timeout=render_timeout_s(inp.total_s))
    picture = parse_picture(done.stderr.decode("utf-8", "replace"), total_s)
    return RenderOutcome(inp.out_path, loudness, picture)


# Bump when build_render_args changes what it makes from the same inputs.
RENDER_RECIPE_VERSION = "render-v2"


def render_inputs_digest(
    clip_sha256s: Sequence[str],
    scene_durations_s: Sequence[float],
    voice_sha256: str,
    subtitles_ass: str,
    width: int = 1080,
    height: int = 1920,
    fps: int = 24,
    *,
    music_sha256: str | None = None,
    music_volume_db: float = DEFAULT_MUSIC_VOLUME_DB,
    encoder: EncoderPreset = LIBX264,
) -> str:
    """SHA-256 naming everything a render is made from (content hashes, not paths): the bed,
    its level, the loudness targets and the encoder preset change the bytes too."""
    recipe = {
        "recipe": RENDER_RECIPE_VERSION,
        "clips": list(clip_sha256s),
        "durations": [round(d, 6) for d in scene_durations_s],
        "voice": voice_sha256,
        "subtitles": subtitles_ass,
        "size": [width, height, fps],
        "music": [music_sha256, round(music_volume_db, 3)],
        "loudness": loudness_targets(),
        "encoder": encoder.as_json(),
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()
