"""The media profile: the product's frame by default, the tiny one by name, a clear error else."""

from __future__ import annotations

from pathlib import Path

import pytest

from mdame_domain.media_profile import SHORTS, TINY, media_profile
from mdame_domain.probe import probe_media
from mdame_domain.render_quality import rules_for
from mdame_resources.providers.visuals import ProceduralVisuals


def test_the_default_is_the_products_frame_and_tiny_is_chosen_by_name() -> None:
    assert media_profile({}) == SHORTS == media_profile({"MDAME_MEDIA_PROFILE": ""})
    assert (SHORTS.width, SHORTS.height, SHORTS.clip_width, SHORTS.clip_height) == (
        1080,
        1920,
        360,
        640,
    )
    assert media_profile({"MDAME_MEDIA_PROFILE": " Tiny "}) == TINY


def test_an_unknown_profile_is_refused_naming_the_setting_and_the_choices() -> None:
    with pytest.raises(
        ValueError, match=r"MDAME_MEDIA_PROFILE='4k' is not allowed: it takes one of shorts, tiny"
    ):
        media_profile({"MDAME_MEDIA_PROFILE": "4k"})


def test_the_format_gate_expects_the_profiles_frame() -> None:
    assert (rules_for((15, 60)).width, rules_for((15, 60)).height) == (1080, 1920)
    tiny = rules_for((15, 60), TINY)
    assert (tiny.width, tiny.height, tiny.min_duration_s) == (216, 384, 15.0)


def test_the_offline_visuals_make_the_profiles_clip_and_keep_its_scene_hashes_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    visuals = ProceduralVisuals()
    monkeypatch.setenv("MDAME_MEDIA_PROFILE", "shorts")
    assert visuals.cache_key() is None  # the product's scene hashes are what they always were
    monkeypatch.setenv("MDAME_MEDIA_PROFILE", "tiny")
    assert visuals.cache_key() == "procedural:108x192"

    clip = visuals.generate("a" * 64, "a prompt", ["#112233"], 1.0, tmp_path / "clip.mp4")

    info = probe_media(str(clip))
    assert (info.width, info.height, info.fps) == (108, 192, 24.0)
