"""Generated-clip planning without torch: frames and segments, frame order, seeds, the ffmpeg
command (run for real on a few raw frames), model file selection, the dimension's visuals block
and the scene_hash's engine part."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mdame_domain.diffusion import (
    GenerationPlanError,
    check_generation_size,
    check_model_id,
    encode_frames_args,
    frame_filter,
    join_segments,
    plan_clip,
    scene_seed,
    select_model_files,
)
from mdame_domain.dimensions import DimensionConfigError, dimension_from_json, parse_dimension
from mdame_domain.probe import probe_media
from mdame_domain.scenes import scene_hash
from mdame_resources.providers.visuals import DiffusersVisuals, ProceduralVisuals


def pix_fmt(path) -> str:
    return subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=pix_fmt",
         "-of", "csv=p=0", str(path)],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


BASE = {
    "slug": "demo",
    "title": "Demo",
    "visual_style": "flat",
    "palette": ["#000000", "#ffffff"],
    "feeds": ["feeds/tech.xml"],
    "accounts": [{"platform": "youtube", "handle": "h"}],
}


def test_a_short_clip_repeats_each_generated_frame_at_the_output_rate():
    plan = plan_clip(1.0, frames_per_segment=14, source_fps=6, out_fps=24, mode="pingpong")
    assert plan.segments == 1 and plan.generated_frames == 14
    assert len(plan.order) == 24 and plan.duration_s == 1.0
    assert plan.order[:8] == (0, 0, 0, 0, 1, 1, 1, 1)  # 24/6: each frame shown 4 times
    assert plan.order[-1] == 5


def test_loop_and_pingpong_fill_a_long_clip_from_one_segment():
    loop = plan_clip(2.0, frames_per_segment=4, source_fps=4, out_fps=4, mode="loop")
    assert loop.order == (0, 1, 2, 3, 0, 1, 2, 3)
    pong = plan_clip(2.5, frames_per_segment=4, source_fps=4, out_fps=4, mode="pingpong")
    assert pong.order == (0, 1, 2, 3, 2, 1, 0, 1, 2, 3)
    one = plan_clip(1.0, frames_per_segment=1, source_fps=4, out_fps=4, mode="pingpong")
    assert one.order == (0, 0, 0, 0)


def test_chain_adds_segments_up_to_the_cap_then_ping_pongs():
    # 6 s at 7 fps needs 42 source frames; 14-frame segments overlap by one frame.
    plan = plan_clip(6.0, frames_per_segment=14, source_fps=7, out_fps=24, mode="chain",
                     max_segments=4)  # fmt: skip
    assert plan.segments == 4 and plan.generated_frames == 14 + 3 * 13
    assert plan.order == tuple(sorted(plan.order))  # one pass forwards, no seam
    assert len(plan.order) == 144 and max(plan.order) == 41
    capped = plan_clip(6.0, 14, 7, 24, "chain", max_segments=2)
    assert capped.segments == 2 and capped.generated_frames == 27
    assert max(capped.order) == 26 and capped.order[-1] < 26  # then back down
    short = plan_clip(1.0, 14, 7, 24, "chain", max_segments=3)
    assert short.segments == 1  # one segment covers it: no extra generation


def test_join_segments_drops_each_chained_segments_repeated_init_frame():
    assert join_segments([[0, 1, 2], [2, 3, 4], [4, 5, 6]]) == [0, 1, 2, 3, 4, 5, 6]
    assert join_segments([["a"]]) == ["a"]


@pytest.mark.parametrize(
    "args",
    [
        (0.0, 14, 7, 24, "loop"),
        (float("nan"), 14, 7, 24, "loop"),
        (6.0, 0, 7, 24, "loop"),
        (6.0, 1, 7, 24, "chain"),
        (6.0, 14, 0, 24, "loop"),
        (6.0, 14, 7, 0, "loop"),
        (6.0, 14, 7, 24, "interpolate"),
    ],
)
def test_plans_refuse_bad_numbers(args):
    with pytest.raises(GenerationPlanError):
        plan_clip(*args)


def test_seeds_come_from_the_scene_hash():
    assert scene_seed("abc") == scene_seed("abc")
    assert scene_seed("abc") != scene_seed("abd")
    assert scene_seed("abc", 0) != scene_seed("abc", 1)
    assert all(0 <= scene_seed(h, c) < 2**63 for h in ("a", "b" * 64) for c in (0, 5))
    with pytest.raises(ValueError):
        scene_seed("")
    with pytest.raises(ValueError):
        scene_seed("abc", -1)


def test_generation_sizes_must_be_multiples_of_eight():
    check_generation_size(576, 1024)
    check_generation_size(512, 512)
    for w, h in ((500, 512), (512, 0), (4, 8)):
        with pytest.raises(GenerationPlanError, match="multiples of 8"):
            check_generation_size(w, h)


def test_the_encode_command_frames_piped_rgb_like_the_procedural_clips(tmp_path):
    out = tmp_path / "clip.mp4"
    args = encode_frames_args(32, 64, 24, str(out))
    assert args[args.index("-f") + 1] == "rawvideo" and args[args.index("-i") + 1] == "-"
    assert args[args.index("-s") + 1] == "32x64" and args[args.index("-pix_fmt") + 1] == "rgb24"
    assert "crop=540:960" in args[args.index("-vf") + 1]
    frames = bytes(range(256)) * (32 * 64 * 3 * 48 // 256)  # 48 frames = 2 s at 24 fps
    subprocess.run(args, input=frames, check=True, capture_output=True)
    info = probe_media(str(out))
    assert (info.width, info.height, info.fps) == (540, 960, 24.0)
    assert info.video_codec == "h264" and info.audio_codec is None
    assert abs(info.duration_s - 2.0) < 0.05
    assert pix_fmt(out) == "yuv420p"
    padded = frame_filter(540, 960, "pad")
    assert "pad=540:960" in padded and "format=yuv420p" in padded
    for bad in (lambda: frame_filter(540, 960, "stretch"), lambda: frame_filter(541, 960)):
        with pytest.raises(GenerationPlanError):
            bad()


def test_a_pull_takes_one_weight_file_per_component():
    files = [
        "model_index.json",
        "README.md",
        ".gitattributes",
        "v1-5-pruned.safetensors",  # single-file checkpoint at a pipeline's root
        "v1-5-pruned.ckpt",
        "unet/config.json",
        "unet/diffusion_pytorch_model.bin",
        "unet/diffusion_pytorch_model.safetensors",
        "unet/diffusion_pytorch_model.fp16.safetensors",
        "unet/diffusion_pytorch_model.non_ema.safetensors",
        "vae/diffusion_pytorch_model.bin",
        "vae/config.json",
        "text_encoder/model.safetensors",
        "tokenizer/vocab.json",
        "flax_model.msgpack",
    ]
    assert select_model_files(files) == [
        "README.md",
        "model_index.json",
        "text_encoder/model.safetensors",
        "tokenizer/vocab.json",
        "unet/config.json",
        "unet/diffusion_pytorch_model.fp16.safetensors",
        "vae/config.json",
        "vae/diffusion_pytorch_model.bin",
    ]
    adapter = ["config.json", "diffusion_pytorch_model.safetensors", "diffusion_pytorch_model.bin"]
    assert select_model_files(adapter) == ["config.json", "diffusion_pytorch_model.safetensors"]


def test_model_ids_are_folder_safe():
    assert check_model_id("stabilityai/sdxl-turbo") == "stabilityai/sdxl-turbo"
    for bad in ("sdxl-turbo", "../etc/passwd", "/abs/path", "a/b/c", "a/..", ""):
        with pytest.raises(ValueError, match="not a model id"):
            check_model_id(bad)


def test_the_dimension_visuals_block_defaults_and_is_validated():
    assert parse_dimension(BASE, "d.yaml").visuals.engine == "svd"
    config = parse_dimension({**BASE, "visuals": {"engine": "animatediff"}}, "d.yaml")
    assert config.visuals.engine == "animatediff"
    assert dimension_from_json(json.loads(json.dumps(config.to_json()))) == config
    old = config.to_json()
    del old["visuals"]  # stored before the field existed
    assert dimension_from_json(old).visuals.engine == "svd"
    for raw, field in (
        ({"engine": "sora"}, "visuals.engine"),
        ({"engine": 3}, "visuals.engine"),
        ({"steps": 4}, "visuals.steps"),
        ("svd", "visuals"),
    ):
        with pytest.raises(DimensionConfigError) as err:
            parse_dimension({**BASE, "visuals": raw}, "d.yaml")
        assert err.value.field_name == field


def test_the_scene_hash_names_a_diffusers_engine_but_not_the_procedural_clips(monkeypatch):
    monkeypatch.setenv("MDAME_MEDIA_PROFILE", "shorts")  # the product's procedural clips
    legacy = scene_hash("a prompt", "flat", "tech")
    assert scene_hash("a prompt", "flat", "tech", ProceduralVisuals().cache_key("svd")) == legacy
    diffusers = DiffusersVisuals()
    svd = scene_hash("a prompt", "flat", "tech", diffusers.cache_key("svd"))
    anim = scene_hash("a prompt", "flat", "tech", diffusers.cache_key("animatediff"))
    other_model = DiffusersVisuals(svd_model="someone/svd-xt").cache_key("svd")
    assert len({legacy, svd, anim, scene_hash("a prompt", "flat", "tech", other_model)}) == 4
    # Settings that do not change the picture do not change the key.
    assert DiffusersVisuals(device="cpu", cpu_offload=True).cache_key("svd") == (
        diffusers.cache_key("svd")
    )
    with pytest.raises(ValueError, match="unknown visuals engine 'sora'"):
        diffusers.cache_key("sora")


def test_importing_the_product_does_not_import_torch():
    code = (
        "import sys, mdame_assets.orchestrator, mdame_assets.gpu, mdame_cli.main;"
        "from mdame_resources.providers.visuals import DiffusersVisuals;"
        "DiffusersVisuals().cache_key('svd');"
        "bad = [m for m in ('torch', 'diffusers', 'transformers') if m in sys.modules];"
        "sys.exit(f'imported {bad}' if bad else 0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={"ENV": "dev", "PATH": ""})


def test_a_scene_job_carries_the_engine_only_when_given():
    from mdame_pipeline.scene_cache import scene_job

    assert "engine" not in scene_job("h", "p", ["#000000"])  # procedural-era payloads unchanged
    assert scene_job("h", "p", ["#000000"], "animatediff")["engine"] == "animatediff"
