"""Generated clips (the diffusers provider), the parts that need no torch.

How many frames and segments a clip of a given length needs and in which order the generated
frames are shown, the seed of each generation call, and the ffmpeg command that frames the
piped raw frames for the render and encodes them like the procedural clips. The provider
(mdame_resources/providers/diffusers_visuals.py) runs the models; everything it decides is here.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from mdame_domain.mediatools import FFMPEG_BASE

# The two generation paths: text-to-image then Stable Video Diffusion img2vid, or AnimateDiff
# (a motion adapter on an SD 1.5 base), text to video.
ENGINES = ("svd", "animatediff")
DEFAULT_ENGINE = "svd"
# How a clip longer than one generated segment is filled: repeat the segment, play it forwards
# then backwards (no jump at the seam), or chain segments (SVD: the last frame of one segment
# is the next one's init image; anything still missing is filled by ping-pong).
EXTEND_MODES = ("loop", "pingpong", "chain")
FIT_MODES = ("crop", "pad")
# VAE and UNet downsampling: a generation size must be a multiple of this (64 for full models
# is safer; the engine's own size is configured per engine).
SIZE_MULTIPLE = 8

T = TypeVar("T")


class GenerationPlanError(ValueError):
    """A clip that cannot be planned from the given numbers."""


@dataclass(frozen=True)
class ClipPlan:
    """What one clip takes: `segments` generation calls of `frames_per_segment` frames each,
    and for every output frame (at out_fps) the index into the joined generated frames."""

    frames_per_segment: int
    segments: int
    source_fps: float
    out_fps: int
    mode: str
    order: tuple[int, ...]

    @property
    def generated_frames(self) -> int:
        """Frames in the joined sequence (a chained segment's first frame repeats its init)."""
        return self.frames_per_segment + (self.segments - 1) * (self.frames_per_segment - 1)

    @property
    def duration_s(self) -> float:
        return len(self.order) / self.out_fps


def _pingpong(position: int, length: int) -> int:
    if length == 1:
        return 0
    period = 2 * (length - 1)
    step = position % period
    return step if step < length else period - step


def plan_clip(
    duration_s: float,
    frames_per_segment: int,
    source_fps: float,
    out_fps: int,
    mode: str,
    max_segments: int = 1,
) -> ClipPlan:
    """The generated frames play at source_fps; the clip is `duration_s` long at out_fps, each
    output frame showing the generated frame due at its time (frames repeat when out_fps is
    higher). Past the generated frames the mode decides: loop, pingpong, or chain more
    segments (at most max_segments, then ping-pong over the chained sequence)."""
    if mode not in EXTEND_MODES:
        raise GenerationPlanError(f"extend mode must be one of {', '.join(EXTEND_MODES)}")
    if not math.isfinite(duration_s) or duration_s <= 0:
        raise GenerationPlanError(f"duration_s must be positive, got {duration_s}")
    if frames_per_segment < 1 or (mode == "chain" and frames_per_segment < 2):
        raise GenerationPlanError(f"frames_per_segment too small: {frames_per_segment}")
    if source_fps <= 0 or out_fps < 1 or max_segments < 1:
        raise GenerationPlanError(
            f"bad rates: source_fps={source_fps}, out_fps={out_fps}, max_segments={max_segments}"
        )
    out_count = max(1, round(duration_s * out_fps))
    # The source position each output frame shows (time k/out_fps, at source_fps).
    positions = [math.floor(k * source_fps / out_fps + 1e-9) for k in range(out_count)]
    needed = positions[-1] + 1
    segments = 1
    if mode == "chain" and needed > frames_per_segment:
        extra = math.ceil((needed - frames_per_segment) / (frames_per_segment - 1))
        segments = min(max_segments, 1 + extra)
    length = frames_per_segment + (segments - 1) * (frames_per_segment - 1)
    if mode == "loop":
        order = tuple(p % length for p in positions)
    else:
        order = tuple(p if p < length else _pingpong(p, length) for p in positions)
    return ClipPlan(frames_per_segment, segments, float(source_fps), out_fps, mode, order)


def join_segments(segments: Sequence[Sequence[T]]) -> list[T]:
    """Chained segments as one sequence: each later segment starts from the previous one's last
    frame (its init image), so its own first frame is dropped."""
    joined: list[T] = []
    for i, segment in enumerate(segments):
        joined.extend(segment if i == 0 else segment[1:])
    return joined


def scene_seed(scene_hash: str, call: int = 0) -> int:
    """The seed of a scene's `call`-th generation call (0: the first), 63 bits so every torch
    generator accepts it. The same scene always gets the same seeds; another scene others."""
    if not scene_hash or call < 0:
        raise ValueError("scene_seed needs a scene_hash and a call number >= 0")
    digest = hashlib.sha256(f"mdame-diffusers:{scene_hash}:{call}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)


def check_generation_size(width: int, height: int, multiple: int = SIZE_MULTIPLE) -> None:
    if width < multiple or height < multiple or width % multiple or height % multiple:
        raise GenerationPlanError(
            f"generation size {width}x{height} must be positive multiples of {multiple}"
        )


def frame_filter(out_width: int, out_height: int, fit: str = "crop") -> str:
    """Frames a generated picture of any size for the render: scale to cover and centre-crop,
    or scale to fit and pad (dark, not black: black frames are a defect the checks look for)."""
    if fit not in FIT_MODES:
        raise GenerationPlanError(f"fit must be one of {', '.join(FIT_MODES)}")
    if out_width < 16 or out_height < 16 or out_width % 2 or out_height % 2:
        raise GenerationPlanError(f"bad output size {out_width}x{out_height}")
    size = f"{out_width}:{out_height}"
    if fit == "crop":
        framed = f"scale={size}:force_original_aspect_ratio=increase:flags=lanczos,crop={size}"
    else:
        framed = (
            f"scale={size}:force_original_aspect_ratio=decrease:flags=lanczos,"
            f"pad={size}:(ow-iw)/2:(oh-ih)/2:color=0x101010"
        )
    return f"{framed},setsar=1,format=yuv420p"


def encode_frames_args(
    width: int,
    height: int,
    fps: int,
    out_path: str,
    out_width: int = 540,
    out_height: int = 960,
    fit: str = "crop",
) -> list[str]:
    """ffmpeg arguments that read raw RGB frames of width x height from stdin at fps and write
    an H.264 clip without audio, framed to out_width x out_height: the procedural clips'
    codec, pixel format and container flags, so the render treats both alike."""
    if width < 1 or height < 1 or fps < 1:
        raise GenerationPlanError(f"bad frame geometry {width}x{height}@{fps}")
    return [
        *FFMPEG_BASE,
        "-loglevel", "error",
        "-f", "rawvideo",
        "-pix_fmt", "rgb24",
        "-s", f"{width}x{height}",
        "-r", str(fps),
        "-i", "-",
        "-vf", frame_filter(out_width, out_height, fit),
        "-r", str(fps),
        "-an",
        "-c:v", "libx264",
        "-preset", "ultrafast",
        "-pix_fmt", "yuv420p",
        "-movflags", "+faststart",
        out_path,
    ]  # fmt: skip


# --- models: which ones each engine needs, where they live, which files a pull takes --------

MODEL_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
# Formats diffusers does not load here, and media: never pulled.
_SKIPPED_SUFFIXES = (
    ".ckpt", ".onnx", ".onnx_data", ".msgpack", ".h5", ".ot", ".pb", ".pt", ".pth", ".tflite",
    ".png", ".jpg", ".jpeg", ".gif", ".mp4", ".webp",
)  # fmt: skip
_WEIGHT_SUFFIXES = (".safetensors", ".bin")


def check_model_id(model_id: str) -> str:
    """A hub id like 'stabilityai/sdxl-turbo': also the folder under the model directory, so
    nothing else (no '..', no absolute path) is accepted."""
    if not MODEL_ID_PATTERN.match(model_id) or ".." in model_id:
        raise ValueError(f"not a model id like 'stabilityai/sdxl-turbo': {model_id!r}")
    return model_id


def _weight_parts(path: str) -> tuple[str, str, str | None] | None:
    """(folder/stem, suffix, variant) of a weight file, or None for any other file."""
    folder, _, name = path.rpartition("/")
    for suffix in _WEIGHT_SUFFIXES:
        if name.endswith(suffix):
            parts = name[: -len(suffix)].split(".")
            variant = parts[-1] if len(parts) > 1 else None
            stem = ".".join(parts[:-1]) if variant else parts[0]
            return f"{folder}/{stem}", suffix, variant
    return None


def select_model_files(files: Sequence[str], variant: str = "fp16") -> list[str]:
    """The files of a hub repository a pull takes: a diffusers pipeline's folders, one weight
    file per component (safetensors over bin, the `variant` over full precision, no other
    variants such as non_ema), and none of the single-file checkpoints at a pipeline's root."""
    is_pipeline = "model_index.json" in files
    weights: dict[str, list[tuple[str, str, str | None]]] = {}
    chosen: list[str] = []
    for path in files:
        if path.endswith(_SKIPPED_SUFFIXES) or path.startswith("."):
            continue
        parts = _weight_parts(path)
        if parts is None:
            chosen.append(path)
        elif not (is_pipeline and "/" not in path) and parts[2] in (None, variant):
            weights.setdefault(parts[0], []).append((path, parts[1], parts[2]))
    for candidates in weights.values():
        best = min(candidates, key=lambda c: (c[1] != ".safetensors", c[2] != variant))
        chosen.append(best[0])
    return sorted(chosen)
