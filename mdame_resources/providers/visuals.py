"""Scene visuals: procedural ffmpeg clips offline, diffusers (SVD / AnimateDiff) on CUDA."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from mdame_core import settings
from mdame_core.settings import mdame_home
from mdame_domain.diffusion import DEFAULT_ENGINE, ENGINES, check_model_id
from mdame_domain.media_profile import SHORTS, media_profile
from mdame_domain.visuals import render_procedural_clip
from mdame_domain.visuals_chain import DIFFUSERS, GENERATED, PROCEDURAL, STOCK
from mdame_resources.providers.base import ProviderResource

if TYPE_CHECKING:
    from mdame_resources.health import Health, HealthScope


class VisualsResource(ProviderResource):
    """The engine a scene step runs on its own host (procedural, or diffusers on CUDA), and
    which engines of a dimension's visuals chain this deployment runs (`offers`)."""

    # The engines of a chain this deployment runs (mdame_domain.visuals_chain.effective_chain).
    offers: list[str] = [PROCEDURAL]

    def generate(
        self,
        scene_hash: str,
        prompt: str,
        palette: Sequence[str],
        duration_s: float,
        out: Path,
        engine: str | None = None,
    ) -> Path:
        """Writes the scene's clip (H.264 MP4, no audio) to `out`. engine: the dimension's
        visuals engine (svd, animatediff); providers that have one engine ignore it."""
        raise NotImplementedError

    def cache_key(self, engine: str | None = None) -> str | None:
        """What of this provider's set-up changes the picture besides the prompt, folded into
        the scene_hash (mdame_domain.scenes.scene_hash); None: nothing (today's keys)."""
        return None


class ProceduralVisuals(VisualsResource):
    """Offline: a moving clip coloured from the palette, different per scene_hash."""

    no_health_check: ClassVar[str] = "offline: it calls no service"

    @property
    def offline(self) -> bool:
        return True

    def generate(
        self,
        scene_hash: str,
        prompt: str,
        palette: Sequence[str],
        duration_s: float,
        out: Path,
        engine: str | None = None,
    ) -> Path:
        profile = media_profile()
        return Path(
            render_procedural_clip(
                scene_hash,
                palette,
                duration_s,
                str(out),
                width=profile.clip_width,
                height=profile.clip_height,
            )
        )

    def cache_key(self, engine: str | None = None) -> str | None:
        # The product's clips keep the keys they always had; another profile's are apart.
        profile = media_profile()
        return (
            None if profile == SHORTS else f"procedural:{profile.clip_width}x{profile.clip_height}"
        )


# --- generated visuals -----------------------------------------

# Where the weights live (hub ids as folders: $MDAME_MODEL_DIR/stabilityai/sdxl-turbo); filled by
# `mdame models pull`, read with local_files_only: loading never touches the network.
MODEL_DIR_VAR = "MDAME_MODEL_DIR"


def resolve_model_dir(configured: str = "") -> Path:
    """The configured folder, else $MDAME_MODEL_DIR, else $MDAME_HOME/models."""
    chosen = configured or settings.raw(MODEL_DIR_VAR)
    return Path(chosen).expanduser() if chosen else mdame_home() / "models"


class DiffusersVisuals(VisualsResource):
    """Generated clips on CUDA (CPU works, slowly): per dimension `visuals.engine`, either
    text-to-image (SDXL-Turbo) then Stable Video Diffusion img2vid, or AnimateDiff (a motion
    adapter on an SD 1.5 base). torch and diffusers are imported on the first generation only
    (mdame_resources/providers/diffusers_visuals.py), and each process loads a pipeline once."""

    model_dir: str = ""  # "" -> $MDAME_MODEL_DIR, else $MDAME_HOME/models
    offers: list[str] = [DIFFUSERS, GENERATED, STOCK]
    default_engine: str = DEFAULT_ENGINE  # for callers that pass no engine
    device: str = "auto"  # auto (cuda when available), cpu, cuda, cuda:N
    cpu_offload: bool = False  # enable_model_cpu_offload: less VRAM, slower (CUDA only)
    vae_slicing: bool = True  # pipe.vae.enable_slicing() where the VAE has it
    decode_chunk_size: int = 4  # SVD: frames decoded at once (VRAM against speed)
    # The clip handed to the render: the procedural clips' size and rate (it scales anyway).
    out_width: int = 540
    out_height: int = 960
    out_fps: int = 24
    fit: str = "crop"  # crop (cover, centre-crop) or pad
    max_segments: int = 3  # chain: generation calls per clip at most
    negative_prompt: str = "text, watermark, logo, blurry, low quality, deformed"
    # svd: text-to-image for the init image, then img2vid.
    image_model: str = "stabilityai/sdxl-turbo"
    image_steps: int = 1  # turbo models: 1 step, guidance 0
    image_guidance: float = 0.0
    svd_model: str = "stabilityai/stable-video-diffusion-img2vid"
    svd_width: int = 576
    svd_height: int = 1024
    svd_frames: int = 14
    svd_steps: int = 25
    svd_fps: int = 7  # the fps micro-condition, and the rate the frames are played at
    motion_bucket_id: int = 127
    noise_aug_strength: float = 0.02
    svd_extend: str = "pingpong"  # loop, pingpong or chain (last frame -> next init image)
    # animatediff: motion adapter on an SD 1.5 base, text to video.
    animatediff_model: str = "stable-diffusion-v1-5/stable-diffusion-v1-5"
    motion_adapter: str = "guoyww/animatediff-motion-adapter-v1-5-2"
    animatediff_width: int = 512
    animatediff_height: int = 512
    animatediff_frames: int = 16
    animatediff_steps: int = 25
    animatediff_guidance: float = 7.5
    animatediff_fps: int = 8
    animatediff_extend: str = "pingpong"  # loop or pingpong

    def engine_for(self, engine: str | None) -> str:
        chosen = engine or self.default_engine
        if chosen not in ENGINES:
            raise ValueError(
                f"{self.provider_name}: unknown visuals engine {chosen!r} "
                f"(expected one of {', '.join(ENGINES)})"
            )
        return chosen

    def models_for(self, engine: str | None = None) -> tuple[str, ...]:
        """The hub ids an engine loads, in load order."""
        if self.engine_for(engine) == "svd":
            return (check_model_id(self.image_model), check_model_id(self.svd_model))
        return (check_model_id(self.animatediff_model), check_model_id(self.motion_adapter))

    def model_root(self) -> Path:
        return resolve_model_dir(self.model_dir)

    def health_check(self, timeout: float, scope: HealthScope | None = None) -> list[Health]:
        """The model folders the active dimensions' engines need, where their chain has
        diffusers: present and loadable offline (diffusers_health.py); no network call, so
        `timeout` bounds nothing."""
        from mdame_resources.providers.diffusers_health import diffusers_health

        return diffusers_health(self, scope)

    def cache_key(self, engine: str | None = None) -> str | None:
        chosen = self.engine_for(engine)
        prefix = "svd" if chosen == "svd" else "animatediff"
        picture = {
            name: value
            for name, value in self.model_dump().items()
            if name.startswith(prefix)
            or name in ("out_width", "out_height", "out_fps", "fit", "max_segments")
        }
        if chosen == "svd":
            picture.update(
                image_model=self.image_model,
                image_steps=self.image_steps,
                image_guidance=self.image_guidance,
                motion_bucket_id=self.motion_bucket_id,
                noise_aug_strength=self.noise_aug_strength,
            )
        else:
            picture.update(motion_adapter=self.motion_adapter, negative=self.negative_prompt)
        return f"diffusers:{chosen}:{json.dumps(picture, sort_keys=True)}"

    def generate(
        self,
        scene_hash: str,
        prompt: str,
        palette: Sequence[str],
        duration_s: float,
        out: Path,
        engine: str | None = None,
    ) -> Path:
        chosen = self.engine_for(engine)
        # Imported here: torch and diffusers load only in processes that generate.
        from mdame_resources.providers.diffusers_visuals import generate_clip

        return generate_clip(self, chosen, scene_hash, prompt, duration_s, out)
