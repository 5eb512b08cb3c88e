"""Tiny random-weight diffusers pipelines, built from configs the way diffusers' own tests build
theirs (`get_dummy_components` of the SVD, AnimateDiff and Stable Diffusion tests), saved with
save_pretrained into a folder laid out like MDAME_MODEL_DIR (one folder per "hub id"), so that
DiffusersVisuals loads them through its real path (from_pretrained, local_files_only).

No hub download: the CLIP tokenizer is built here from a byte-level vocabulary written to disk.
Test machinery (bench/gpu.py and other tests reuse it); never imported by the product.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

# Hub-id-shaped folder names under the model directory.
TINY_IMAGE = "tiny/sd-image"  # text-to-image for the svd path's init image
TINY_SVD = "tiny/svd"
TINY_SD_BASE = "tiny/sd-base"  # AnimateDiff's SD 1.5-shaped base
TINY_ADAPTER = "tiny/motion-adapter"
TINY_MODELS = (TINY_IMAGE, TINY_SVD, TINY_SD_BASE, TINY_ADAPTER)


def tiny_visuals_config(model_dir: Path, **overrides: Any) -> dict[str, Any]:
    """DiffusersVisuals fields that point at the tiny models, small sizes, CPU, few steps."""
    fields: dict[str, Any] = {
        "model_dir": str(model_dir),
        "device": "cpu",
        "image_model": TINY_IMAGE,
        "image_steps": 2,
        "svd_model": TINY_SVD,
        "svd_width": 32,
        "svd_height": 64,
        "svd_frames": 3,
        "svd_steps": 2,
        "svd_fps": 6,
        "decode_chunk_size": 2,
        "svd_extend": "chain",
        "max_segments": 2,
        "animatediff_model": TINY_SD_BASE,
        "motion_adapter": TINY_ADAPTER,
        "animatediff_width": 32,
        "animatediff_height": 64,
        "animatediff_frames": 4,
        "animatediff_steps": 2,
        "animatediff_fps": 8,
    }
    fields.update(overrides)
    return fields


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2/CLIP's byte-level alphabet: every byte as a printable character."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(c) for c in chars), strict=True))


def build_tokenizer(folder: Path) -> Any:
    """A CLIPTokenizer over the bare byte alphabet (no merges): 515 tokens, fits the tiny text
    encoders' vocab_size of 1000, loaded from vocab.json + merges.txt like a real one."""
    from transformers import CLIPTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1, "<|pad|>": 2}
    for ch in _bytes_to_unicode().values():
        vocab.setdefault(ch, len(vocab))
        vocab.setdefault(ch + "</w>", len(vocab))
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (folder / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    return CLIPTokenizer(
        vocab=str(folder / "vocab.json"), merges=str(folder / "merges.txt"), model_max_length=77
    )


def _text_encoder(hidden: int, intermediate: int, heads: int, layers: int) -> Any:
    import torch
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(0)
    return CLIPTextModel(
        CLIPTextConfig(
            bos_token_id=0,
            eos_token_id=1,
            hidden_size=hidden,
            intermediate_size=intermediate,
            layer_norm_eps=1e-05,
            num_attention_heads=heads,
            num_hidden_layers=layers,
            pad_token_id=1,
            vocab_size=1000,
        )
    )


def _sd_components(tokenizer: Any) -> dict[str, Any]:
    """diffusers' StableDiffusionPipeline test components (tests/pipelines/stable_diffusion)."""
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, UNet2DConditionModel

    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        block_out_channels=(4, 8),
        layers_per_block=1,
        sample_size=32,
        in_channels=4,
        out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=8,
        norm_num_groups=2,
    )
    scheduler = DDIMScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        clip_sample=False,
        set_alpha_to_one=False,
        steps_offset=1,  # diffusers' tests leave 0, which only earns a deprecation warning
    )
    torch.manual_seed(0)
    vae = AutoencoderKL(
        block_out_channels=[4, 8],
        in_channels=3,
        out_channels=3,
        down_block_types=["DownEncoderBlock2D", "DownEncoderBlock2D"],
        up_block_types=["UpDecoderBlock2D", "UpDecoderBlock2D"],
        latent_channels=4,
        norm_num_groups=2,
    )
    return {
        "unet": unet,
        "scheduler": scheduler,
        "vae": vae,
        "text_encoder": _text_encoder(8, 16, 2, 2),
        "tokenizer": tokenizer,
        "safety_checker": None,
        "feature_extractor": None,
        "image_encoder": None,
    }


def _animatediff_base(tokenizer: Any) -> tuple[dict[str, Any], Any]:
    """diffusers' AnimateDiffPipeline test components (tests/pipelines/animatediff): the SD
    base (saved as a StableDiffusionPipeline, like the real SD 1.5 base) and the adapter."""
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, MotionAdapter, UNet2DConditionModel

    block_out_channels = (8, 8)
    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        block_out_channels=block_out_channels,
        layers_per_block=2,
        sample_size=8,
        in_channels=4,
        out_channels=4,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=8,
        norm_num_groups=2,
    )
    scheduler = DDIMScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="linear",
        clip_sample=False,
        steps_offset=1,
    )
    torch.manual_seed(0)
    vae = AutoencoderKL(
        block_out_channels=block_out_channels,
        in_channels=3,
        out_channels=3,
        down_block_types=["DownEncoderBlock2D", "DownEncoderBlock2D"],
        up_block_types=["UpDecoderBlock2D", "UpDecoderBlock2D"],
        latent_channels=4,
        norm_num_groups=2,
    )
    torch.manual_seed(0)
    adapter = MotionAdapter(
        block_out_channels=block_out_channels,
        motion_layers_per_block=2,
        motion_norm_num_groups=2,
        motion_num_attention_heads=4,
    )
    base = {
        "unet": unet,
        "scheduler": scheduler,
        "vae": vae,
        "text_encoder": _text_encoder(8, 37, 4, 5),
        "tokenizer": tokenizer,
        "safety_checker": None,
        "feature_extractor": None,
        "image_encoder": None,
    }
    return base, adapter


def _svd_components() -> dict[str, Any]:
    """diffusers' StableVideoDiffusionPipeline test components."""
    import torch
    from diffusers import (
        AutoencoderKLTemporalDecoder,
        EulerDiscreteScheduler,
        UNetSpatioTemporalConditionModel,
    )
    from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModelWithProjection

    torch.manual_seed(0)
    unet = UNetSpatioTemporalConditionModel(
        block_out_channels=(32, 64),
        layers_per_block=2,
        sample_size=32,
        in_channels=8,
        out_channels=4,
        down_block_types=("CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"),
        up_block_types=("UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"),
        cross_attention_dim=32,
        num_attention_heads=8,
        projection_class_embeddings_input_dim=96,
        addition_time_embed_dim=32,
    )
    scheduler = EulerDiscreteScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        interpolation_type="linear",
        num_train_timesteps=1000,
        prediction_type="v_prediction",
        sigma_max=700.0,
        sigma_min=0.002,
        steps_offset=1,
        timestep_spacing="leading",
        timestep_type="continuous",
        trained_betas=None,
        use_karras_sigmas=True,
    )
    torch.manual_seed(0)
    vae = AutoencoderKLTemporalDecoder(
        block_out_channels=[32, 64],
        in_channels=3,
        out_channels=3,
        down_block_types=["DownEncoderBlock2D", "DownEncoderBlock2D"],
        latent_channels=4,
    )
    torch.manual_seed(0)
    image_encoder = CLIPVisionModelWithProjection(
        CLIPVisionConfig(
            hidden_size=32,
            projection_dim=32,
            num_hidden_layers=5,
            num_attention_heads=4,
            # diffusers' test uses 32 and patch 1 because it feeds a tensor; the product passes
            # a PIL init image, which the pipeline resizes to 224 for CLIP, as with the real
            # model: 224 with patch 14 keeps the tower tiny (256 patches).
            image_size=224,
            intermediate_size=37,
            patch_size=14,
        )
    )
    return {
        "unet": unet,
        "image_encoder": image_encoder,
        "scheduler": scheduler,
        "vae": vae,
        "feature_extractor": CLIPImageProcessor(crop_size=32, size=32),
    }


def build_tiny_models(model_dir: Path) -> dict[str, float]:
    """Saves the four tiny models under model_dir; returns seconds spent per model."""
    from diffusers import StableDiffusionPipeline, StableVideoDiffusionPipeline

    timings: dict[str, float] = {}
    started = time.perf_counter()
    tokenizer = build_tokenizer(model_dir / "_tokenizer")
    image = StableDiffusionPipeline(**_sd_components(tokenizer), requires_safety_checker=False)
    image.save_pretrained(model_dir / TINY_IMAGE)
    timings[TINY_IMAGE] = time.perf_counter() - started

    started = time.perf_counter()
    StableVideoDiffusionPipeline(**_svd_components()).save_pretrained(model_dir / TINY_SVD)
    timings[TINY_SVD] = time.perf_counter() - started

    started = time.perf_counter()
    base, adapter = _animatediff_base(tokenizer)
    StableDiffusionPipeline(**base, requires_safety_checker=False).save_pretrained(
        model_dir / TINY_SD_BASE
    )
    adapter.save_pretrained(model_dir / TINY_ADAPTER)
    timings[TINY_SD_BASE] = time.perf_counter() - started
    return timings
