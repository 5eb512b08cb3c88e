"""Scene visuals: procedural ffmpeg clips offline, diffusers (SVD / AnimateDiff) on CUDA."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mdame_domain.visuals import render_procedural_clip
from mdame_resources.providers.base import ProviderResource, not_built


class VisualsResource(ProviderResource):
    def generate(
        self, scene_hash: str, prompt: str, palette: Sequence[str], duration_s: float, out: Path
    ) -> Path:
        raise NotImplementedError


class ProceduralVisuals(VisualsResource):
    """Offline: a moving clip coloured from the palette, different per scene_hash."""

    @property
    def offline(self) -> bool:
        return True

    def generate(
        self, scene_hash: str, prompt: str, palette: Sequence[str], duration_s: float, out: Path
    ) -> Path:
        return Path(render_procedural_clip(scene_hash, palette, duration_s, str(out)))


class DiffusersVisuals(VisualsResource):
    model_dir: str
    pipeline: str = "svd"  # or "animatediff"

    def generate(
        self, scene_hash: str, prompt: str, palette: Sequence[str], duration_s: float, out: Path
    ) -> Path:
        raise not_built(self.provider_name, "diffusers video generation on CUDA")
