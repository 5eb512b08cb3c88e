"""Final render: scene clips + voice + burned-in captions -> one 1080x1920 H.264/AAC MP4.

Everything happens in ONE ffmpeg invocation (no intermediate re-encodes): each clip is looped
and cut to its scene's frame count, scaled and cropped to the frame, the scenes are
concatenated, the captions are burned in with libass, and the voice is loudness-normalised and
padded or cut to the video's exact length.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from mdame_domain.mediatools import FFMPEG_BASE, run_tool

AUDIO_SAMPLE_RATE = 48000
# Stopgap (issue 11, slice "probe"), until slice "audio"'s two-pass mix replaces it: this
# single pass lands espeak speech at -16.2 to -17.1 LUFS / -3.8 to -4.2 dBTP whatever its
# target, so a fixed +2.5 dB brings it into the -14 +-1 LUFS, <= -1 dBTP the checks gate on.
LOUDNORM = "loudnorm=I=-16:TP=-1.5:LRA=11,volume=2.5dB"


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


def escape_filter_path(path: str) -> str:
    """Escape a path for a filter option inside a filtergraph (two quoting levels)."""
    # Level 1: the option value (':' separates options, '\\' and "'" quote).
    value = "".join("\\" + ch if ch in "\\':" else ch for ch in path)
    # Level 2: the filtergraph (',', ';', '[' and ']' separate filters and pads).
    return "".join("\\" + ch if ch in "\\'[],;" else ch for ch in value)


def _scene_chain(index: int, frames: int, inp: RenderInput) -> str:
    # fps first: every scene must share one frame rate before trim counts frames and concat.
    return (
        f"[{index}:v]fps={inp.fps},trim=end_frame={frames},setpts=PTS-STARTPTS,"
        f"scale={inp.width}:{inp.height}:force_original_aspect_ratio=increase,"
        f"crop={inp.width}:{inp.height},setsar=1,format=yuv420p[v{index}]"
    )


def build_filtergraph(inp: RenderInput) -> str:
    """The -filter_complex graph; outputs [vout] and [aout]."""
    counts = scene_frame_counts(inp.scene_durations_s, inp.fps)
    total_s = sum(counts) / inp.fps
    scenes = [_scene_chain(i, frames, inp) for i, frames in enumerate(counts)]
    labels = "".join(f"[v{i}]" for i in range(len(counts)))
    audio_index = len(inp.clip_paths)
    video = (
        f"{labels}concat=n={len(counts)}:v=1:a=0,"
        f"subtitles=filename={escape_filter_path(inp.subtitles_ass)},"
        f"fps={inp.fps},format=yuv420p[vout]"
    )
    # loudnorm resamples to 192 kHz internally; aresample brings it back for AAC. espeak's WAV
    # has no channel layout, so aformat pins one (stereo, the safest for every player).
    audio = (
        f"[{audio_index}:a]{LOUDNORM},aresample={AUDIO_SAMPLE_RATE},"
        f"aformat=sample_fmts=fltp:sample_rates={AUDIO_SAMPLE_RATE}:channel_layouts=stereo,"
        f"apad=whole_dur={total_s:.6f},atrim=end={total_s:.6f},asetpts=PTS-STARTPTS[aout]"
    )
    return ";".join([*scenes, video, audio])


def build_render_args(inp: RenderInput) -> list[str]:
    """ffmpeg arguments for the whole render, one invocation."""
    total_s = sum(scene_frame_counts(inp.scene_durations_s, inp.fps)) / inp.fps
    clip_inputs: list[str] = []
    for path in inp.clip_paths:
        # Loop forever; trim in the graph decides how much of each clip is used.
        clip_inputs += ["-stream_loop", "-1", "-i", path]
    return [
        *FFMPEG_BASE,
        "-loglevel", "error",
        *clip_inputs,
        "-i", inp.voice_wav,
        "-filter_complex", build_filtergraph(inp),
        "-map", "[vout]",
        "-map", "[aout]",
        "-c:v", "libx264",
        "-preset", "veryfast",
        "-crf", "23",
        "-r", str(inp.fps),
        "-pix_fmt", "yuv420p",
        "-c:a", "aac",
        "-b:a", "128k",
        "-ar", str(AUDIO_SAMPLE_RATE),
        "-t", f"{total_s:.6f}",
        "-movflags", "+faststart",
        inp.out_path,
    ]  # fmt: skip


def render_timeout_s(total_s: float) -> float:
    # About 1x real time on two cores; generous headroom for a loaded host.
    return 120.0 + 6.0 * total_s


def render_video(inp: RenderInput) -> str:
    """Render the final video to inp.out_path and return that path."""
    run_tool(build_render_args(inp), timeout=render_timeout_s(inp.total_s))
    return inp.out_path


# Bump when build_render_args changes what it makes from the same inputs.
RENDER_RECIPE_VERSION = "render-v1"


def render_inputs_digest(
    clip_sha256s: Sequence[str],
    scene_durations_s: Sequence[float],
    voice_sha256: str,
    subtitles_ass: str,
    width: int = 1080,
    height: int = 1920,
    fps: int = 24,
) -> str:
    """SHA-256 naming everything a render is made from (content hashes, not paths)."""
    recipe = {
        "recipe": RENDER_RECIPE_VERSION,
        "clips": list(clip_sha256s),
        "durations": [round(d, 6) for d in scene_durations_s],
        "voice": voice_sha256,
        "subtitles": subtitles_ass,
        "size": [width, height, fps],
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()
