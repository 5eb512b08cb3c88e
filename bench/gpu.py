"""Generated visuals: clips per minute, seconds per clip and peak memory per engine, and how much
work the scene cache saves when a day repeats half of an earlier day's scene prompts.

On a CUDA device it runs DiffusersVisuals with the real models from MDAME_MODEL_DIR (fill it
with `mdame models pull`): SVD at 14 frames, 576x1024 (after a 1-step SDXL-Turbo init image)
and AnimateDiff at 16 frames, 512x512, and reports peak VRAM (torch.cuda.max_memory_allocated).
Without one it says so and runs the tiny random-weight pipelines of tests/gpu on the CPU
instead, printing the same figures for them (peak RSS in place of VRAM): the code path is the
product's, the numbers are not a GPU's.

The second figure drives the scene cache the way the clip step does (cached_clip, then
generate and put_scene_cache on a miss) against a fresh copy of the migrated database on the
local cluster (`make db`): day 1 plans N scenes, day 2 plans N scenes of which half repeat
day 1's prompts; it prints generations done against scenes planned for both days.

    PYTHONPATH=. ENV=dev python bench/gpu.py [--clips 3] [--scenes 6] [--engines svd,animatediff]
"""
# ruff: noqa: E402  (imports follow the sys.path fix below, on purpose)

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))

import argparse
import resource
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mdame_core.state import StateStore
from mdame_domain.media_store import LocalMediaStore
from mdame_domain.scenes import scene_hash
from mdame_pipeline.scene_cache import CACHE_TTL_S, CLIP_SECONDS, cached_clip
from mdame_resources.providers.visuals import DiffusersVisuals

PALETTE = ["#0d47a1", "#00e5ff"]
STYLE, SLUG = "neon circuit motion graphics", "bench"
SUBJECTS = (
    "a robot arm assembling a chip", "a city at night seen from above", "ocean waves at dawn",
    "a rocket lifting off", "a forest in autumn wind", "a laboratory with glowing vials",
    "a snowy mountain ridge", "a busy kitchen with steam", "a server room with blinking lights",
    "a hummingbird near a flower", "a desert road under stars", "rain on a window at dusk",
)  # fmt: skip


@dataclass
class EngineFigures:
    engine: str
    frames: int
    size: str
    load_s: float
    seconds_per_clip: float
    peak_memory: str

    @property
    def clips_per_minute(self) -> float:
        return 60.0 / self.seconds_per_clip


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _visuals(use_cuda: bool, model_dir: Path | None) -> DiffusersVisuals:
    if use_cuda:
        return DiffusersVisuals(device="cuda")  # the production defaults, real models
    from tests.gpu.tiny_pipelines import build_tiny_models, tiny_visuals_config

    assert model_dir is not None
    build_tiny_models(model_dir)
    return DiffusersVisuals(**tiny_visuals_config(model_dir))


def _peak(use_cuda: bool) -> str:
    if use_cuda:
        import torch

        return f"{torch.cuda.max_memory_allocated() / 2**30:.1f} GiB VRAM"
    return f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB RSS"


def measure_engine(
    visuals: DiffusersVisuals, engine: str, clips: int, scratch: Path, use_cuda: bool
) -> EngineFigures:
    if use_cuda:
        import torch

        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    # The first clip loads the pipelines (once per process); it is not counted per clip.
    visuals.generate("bench-warm", SUBJECTS[0], PALETTE, CLIP_SECONDS, scratch / "w.mp4", engine)
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    for i in range(clips):
        prompt = SUBJECTS[(i + 1) % len(SUBJECTS)]
        visuals.generate(f"bench-{engine}-{i}", prompt, PALETTE, CLIP_SECONDS,
                         scratch / f"{engine}-{i}.mp4", engine)  # fmt: skip
    per_clip = (time.perf_counter() - started) / clips
    if engine == "svd":
        frames, size = visuals.svd_frames, f"{visuals.svd_width}x{visuals.svd_height}"
    else:
        frames = visuals.animatediff_frames
        size = f"{visuals.animatediff_width}x{visuals.animatediff_height}"
    return EngineFigures(engine, frames, size, load_s, per_clip, _peak(use_cuda))


def run_day(
    state: StateStore,
    admin: StateStore,
    store: LocalMediaStore,
    visuals: DiffusersVisuals,
    engine: str,
    prompts: list[str],
    scratch: Path,
) -> tuple[int, int, float]:
    """(scenes planned, clips generated, seconds) for one day's scene prompts."""
    key, generated, started = visuals.cache_key(engine), 0, time.perf_counter()
    for prompt in prompts:
        h = scene_hash(prompt, STYLE, SLUG, key)
        if cached_clip(state, store, h) is not None:
            continue
        out = visuals.generate(h, prompt, PALETTE, CLIP_SECONDS, scratch / f"{h}.mp4", engine)
        stored = store.put_file(out, ".mp4")
        admin.put_scene_cache(h, stored.uri, stored.sha256, CACHE_TTL_S)
        generated += 1
    return len(prompts), generated, time.perf_counter() - started


def measure_cache(visuals: DiffusersVisuals, engine: str, scenes: int, scratch: Path) -> str:
    from tests import scratch_db

    db = scratch_db.create_database(scratch_db.ensure_template(), "_benchgpu")
    try:
        store = LocalMediaStore(scratch / "media")
        stamp = f"{time.time_ns()}"  # prompts of this run only
        day1 = [f"{SUBJECTS[i % len(SUBJECTS)]}, take {i} ({stamp})" for i in range(scenes)]
        half = scenes // 2
        day2 = day1[:half] + [f"{p}, day two" for p in day1[half:]]
        # A GPU worker reads the cache as the app role; filling it directly, outside a claimed
        # scene job, is the admin role's (put_scene_cache), so each call goes as its role.
        with (
            StateStore(db.app, env="dev", pool_max=1) as state,
            StateStore(db.owner, role="admin", env="dev", pool_max=1) as admin,
        ):
            p1, g1, s1 = run_day(state, admin, store, visuals, engine, day1, scratch)
            p2, g2, s2 = run_day(state, admin, store, visuals, engine, day2, scratch)
        return (
            f"scene cache ({engine}): day 1 planned {p1} scenes, generated {g1} in {s1:.1f}s; "
            f"day 2 (half of day 1's prompts again) planned {p2}, generated {g2} in {s2:.1f}s "
            f"({p2 - g2} from the cache): {g2 / p2:.0%} of the work"
        )
    finally:
        scratch_db.drop_database(db.name)


def _quiet_loaders() -> None:
    """No progress bars or advice from the loaders between the figures."""
    import diffusers
    import transformers

    diffusers.utils.logging.disable_progress_bar()
    diffusers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clips", type=int, default=3, help="timed clips per engine")
    parser.add_argument("--scenes", type=int, default=6, help="scenes per day (cache figure)")
    parser.add_argument("--engines", default="svd,animatediff")
    args = parser.parse_args(argv)
    os.environ.setdefault("ENV", "dev")
    _quiet_loaders()
    use_cuda = _cuda()
    if use_cuda:
        import torch

        print(f"device: {torch.cuda.get_device_name(0)} (CUDA), the real models from "
              f"{DiffusersVisuals().model_root()}")  # fmt: skip
    else:
        import torch

        # One thread, as in the tests: on a small shared host more OpenMP threads only contend.
        torch.set_num_threads(1)
        print("no CUDA device: these figures are for the tiny random-weight pipelines of "
              "tests/gpu on the CPU, not for SVD or AnimateDiff")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        scratch = Path(tmp)
        visuals = _visuals(use_cuda, None if use_cuda else scratch / "models")
        engines = [e.strip() for e in args.engines.split(",") if e.strip()]
        rows: list[Any] = [measure_engine(visuals, e, args.clips, scratch, use_cuda)
                           for e in engines]  # fmt: skip
        print(f"{'engine':<12} {'frames':>6} {'size':>9} {'load+1st s':>10} {'s/clip':>7} "
              f"{'clips/min':>9}  peak")  # fmt: skip
        for r in rows:
            print(
                f"{r.engine:<12} {r.frames:>6} {r.size:>9} {r.load_s:>10.1f} "
                f"{r.seconds_per_clip:>7.2f} {r.clips_per_minute:>9.1f}  {r.peak_memory}"
            )
        print(f"clip: {CLIP_SECONDS:.0f} s at {visuals.out_fps} fps, "
              f"{visuals.out_width}x{visuals.out_height} H.264 (encode included)")  # fmt: skip
        print(measure_cache(visuals, engines[0], args.scenes, scratch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
