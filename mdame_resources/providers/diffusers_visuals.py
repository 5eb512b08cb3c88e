"""The diffusers runtime behind DiffusersVisuals: load pipelines once per process, generate
frames, pipe them into ffmpeg.

Imported only when a clip is generated (DiffusersVisuals.generate), so the offline path and
every process that never generates pay neither torch's import time nor need it installed.
Models load only from the local model directory with local_files_only=True; the planning
(frames, segments, order, seeds, the ffmpeg command) is in mdame_domain.diffusion.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdame_domain.diffusion import (
    check_generation_size,
    encode_frames_args,
    join_segments,
    plan_clip,
    scene_seed,
)
from mdame_domain.mediatools import MediaToolError, summarize_args

if TYPE_CHECKING:
    import numpy as np

    from mdame_resources.providers.visuals import DiffusersVisuals

PULL_HINT = "run `mdame models pull` on a machine with network access, or set MDAME_MODEL_DIR"


class ModelMissing(FileNotFoundError):
    """A model the engine needs is not in the local model directory."""


def model_path(root: Path, model_id: str) -> Path:
    return root / model_id


def require_model(root: Path, model_id: str) -> Path:
    """The model's folder, or ModelMissing naming the folder and how to fill it."""
    path = model_path(root, model_id)
    if not ((path / "model_index.json").is_file() or (path / "config.json").is_file()):
        raise ModelMissing(
            f"model {model_id!r} is not in the model directory: {path} has no "
            f"model_index.json or config.json; {PULL_HINT}"
        )
    return path


def _variant(path: Path) -> str | None:
    # `mdame models pull` takes the fp16 weights where a repository has them.
    return "fp16" if any(path.rglob("*.fp16.safetensors")) else None


@dataclass
class Loaded:
    """The pipelines of one engine on one device, and the lock their use is serialised by."""

    engine: str
    device: str
    pipes: dict[str, Any]
    lock: threading.Lock = field(default_factory=threading.Lock)


# One entry per (engine, model folders, device, dtype, offload): each worker process loads a
# pipeline once and reuses it for every scene after.
_PIPELINES: dict[tuple[Any, ...], Loaded] = {}
_PIPELINES_LOCK = threading.Lock()


def _device_and_dtype(device: str) -> tuple[str, Any]:
    import torch

    chosen = device
    if device == "auto":
        chosen = "cuda" if torch.cuda.is_available() else "cpu"
    if chosen.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device {device!r} asked for, but torch sees no CUDA device")
    # fp16 halves VRAM and time on CUDA; CPUs run fp16 slowly or not at all.
    return chosen, (torch.float16 if chosen.startswith("cuda") else torch.float32)


def _place(pipe: Any, cfg: DiffusersVisuals, device: str) -> Any:
    pipe.set_progress_bar_config(disable=True)
    if cfg.vae_slicing and hasattr(getattr(pipe, "vae", None), "enable_slicing"):
        # SVD's temporal decoder has no slicing: decode_chunk_size bounds its memory instead.
        with contextlib.suppress(NotImplementedError):
            pipe.vae.enable_slicing()
    if cfg.cpu_offload and device.startswith("cuda"):
        pipe.enable_model_cpu_offload(device=device)
    else:
        pipe.to(device)
    return pipe


def _load(cfg: DiffusersVisuals, engine: str, paths: Sequence[Path], device: str, dtype: Any):
    import diffusers

    common: dict[str, Any] = {"dtype": dtype, "local_files_only": True}
    if engine == "svd":
        image_path, video_path = paths
        t2i = diffusers.AutoPipelineForText2Image.from_pretrained(
            image_path, variant=_variant(image_path), **common
        )
        svd = diffusers.StableVideoDiffusionPipeline.from_pretrained(
            video_path, variant=_variant(video_path), **common
        )
        return {"image": _place(t2i, cfg, device), "video": _place(svd, cfg, device)}
    base_path, adapter_path = paths
    adapter = diffusers.MotionAdapter.from_pretrained(
        adapter_path, variant=_variant(adapter_path), **common
    )
    pipe = diffusers.AnimateDiffPipeline.from_pretrained(
        base_path, motion_adapter=adapter, variant=_variant(base_path), **common
    )
    # AnimateDiff's recommended sampler, whatever scheduler the SD 1.5 base shipped with.
    pipe.scheduler = diffusers.DDIMScheduler.from_config(
        pipe.scheduler.config,
        clip_sample=False,
        timestep_spacing="linspace",
        beta_schedule="linear",
        steps_offset=1,
    )
    return {"video": _place(pipe, cfg, device)}


def load_pipelines(cfg: DiffusersVisuals, engine: str) -> Loaded:
    """The engine's pipelines for this process: loaded on first use, then the same objects."""
    root = cfg.model_root()
    paths = [require_model(root, model_id) for model_id in cfg.models_for(engine)]
    device, dtype = _device_and_dtype(cfg.device)
    key = (engine, tuple(str(p.resolve()) for p in paths), device, str(dtype), cfg.cpu_offload)
    with _PIPELINES_LOCK:
        loaded = _PIPELINES.get(key)
        if loaded is None:
            loaded = Loaded(engine, device, _load(cfg, engine, paths, device, dtype))
            _PIPELINES[key] = loaded
        return loaded


def loaded_count() -> int:
    """How many pipelines this process holds (tests: a second scene loads nothing)."""
    with _PIPELINES_LOCK:
        return len(_PIPELINES)


def _generator(seed: int) -> Any:
    import torch

    # A CPU generator: diffusers draws the noise on the CPU and moves it, so a seed gives the
    # same noise on any device.
    return torch.Generator(device="cpu").manual_seed(seed)


def _to_uint8(frames: Any) -> list[np.ndarray]:
    import numpy as np

    array = np.asarray(frames, dtype=np.float32)
    return list((np.clip(array, 0.0, 1.0) * 255.0).round().astype(np.uint8))


def _svd_frames(
    cfg: DiffusersVisuals, loaded: Loaded, scene_hash: str, prompt: str, segments: int
) -> list[np.ndarray]:
    from PIL import Image

    w, h = cfg.svd_width, cfg.svd_height
    image = (
        loaded.pipes["image"](
            prompt=prompt,
            num_inference_steps=cfg.image_steps,
            guidance_scale=cfg.image_guidance,
            width=w,
            height=h,
            generator=_generator(scene_seed(scene_hash, 0)),
        )
        .images[0]
        .convert("RGB")
    )
    parts: list[list[np.ndarray]] = []
    for segment in range(segments):
        result = loaded.pipes["video"](
            image,
            width=w,
            height=h,
            num_frames=cfg.svd_frames,
            num_inference_steps=cfg.svd_steps,
            decode_chunk_size=cfg.decode_chunk_size,
            motion_bucket_id=cfg.motion_bucket_id,
            fps=cfg.svd_fps,
            noise_aug_strength=cfg.noise_aug_strength,
            generator=_generator(scene_seed(scene_hash, 1 + segment)),
            output_type="np",
        )
        parts.append(_to_uint8(result.frames[0]))
        # Chaining: the next segment starts from where this one ended.
        image = Image.fromarray(parts[-1][-1])
    return join_segments(parts)


def _animatediff_frames(
    cfg: DiffusersVisuals, loaded: Loaded, scene_hash: str, prompt: str
) -> list[np.ndarray]:
    result = loaded.pipes["video"](
        prompt=prompt,
        negative_prompt=cfg.negative_prompt or None,
        num_frames=cfg.animatediff_frames,
        num_inference_steps=cfg.animatediff_steps,
        guidance_scale=cfg.animatediff_guidance,
        width=cfg.animatediff_width,
        height=cfg.animatediff_height,
        generator=_generator(scene_seed(scene_hash, 0)),
        output_type="np",
    )
    return _to_uint8(result.frames[0])


def encode_frames(
    frames: Sequence[np.ndarray],
    order: Iterable[int],
    fps: int,
    out: Path,
    out_width: int,
    out_height: int,
    fit: str,
    timeout_s: float = 600.0,
) -> Path:
    """Pipes frames[i] for i in order, raw RGB, into ffmpeg, which frames and encodes them."""
    height, width = frames[0].shape[:2]
    args = encode_frames_args(width, height, fps, str(out), out_width, out_height, fit)
    proc = subprocess.Popen(
        args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None
    try:
        for index in order:
            proc.stdin.write(frames[index].tobytes())
        # communicate() flushes and closes stdin, then reads stderr (ffmpeg at -loglevel error
        # writes little, so stderr cannot fill up while the frames are written).
        _, stderr = proc.communicate(timeout=timeout_s)
    except (BrokenPipeError, subprocess.TimeoutExpired) as exc:
        proc.kill()
        _, stderr = proc.communicate()
        raise MediaToolError(
            "ffmpeg", summarize_args(args), stderr.decode("utf-8", "replace")[-1500:], str(exc)
        ) from None
    if proc.returncode != 0:
        raise MediaToolError(
            "ffmpeg",
            summarize_args(args),
            stderr.decode("utf-8", "replace")[-1500:],
            f"exited {proc.returncode}",
        )
    return out


def generate_clip(
    cfg: DiffusersVisuals, engine: str, scene_hash: str, prompt: str, duration_s: float, out: Path
) -> Path:
    """One scene's clip at `out`: plan, load (once per process), generate, encode."""
    if engine == "svd":
        check_generation_size(cfg.svd_width, cfg.svd_height)
        plan = plan_clip(
            duration_s, cfg.svd_frames, cfg.svd_fps, cfg.out_fps, cfg.svd_extend, cfg.max_segments
        )
    else:
        check_generation_size(cfg.animatediff_width, cfg.animatediff_height)
        if cfg.animatediff_extend == "chain":
            raise ValueError("animatediff_extend must be loop or pingpong (chain is svd only)")
        plan = plan_clip(
            duration_s,
            cfg.animatediff_frames,
            cfg.animatediff_fps,
            cfg.out_fps,
            cfg.animatediff_extend,
        )
    loaded = load_pipelines(cfg, engine)
    with loaded.lock:
        if engine == "svd":
            frames = _svd_frames(cfg, loaded, scene_hash, prompt, plan.segments)
        else:
            frames = _animatediff_frames(cfg, loaded, scene_hash, prompt)
    if len(frames) != plan.generated_frames:
        raise RuntimeError(f"{engine} gave {len(frames)} frames, expected {plan.generated_frames}")
    out.parent.mkdir(parents=True, exist_ok=True)
    return encode_frames(
        frames, plan.order, cfg.out_fps, out, cfg.out_width, cfg.out_height, cfg.fit
    )
