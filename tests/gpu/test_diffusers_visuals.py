"""DiffusersVisuals on the CPU with tiny random-weight pipelines, loaded through its real path
(from_pretrained, local_files_only): a real scene clip per engine, as the render expects it,
deterministic per scene_hash; one load per process; clear errors for bad engines and models."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from mdame_domain.probe import probe_media
from mdame_resources.providers.diffusers_visuals import ModelMissing, loaded_count
from mdame_resources.providers.visuals import DiffusersVisuals
from tests.gpu.tiny_pipelines import TINY_ADAPTER, tiny_visuals_config

PALETTE = ["#0d47a1", "#00e5ff"]
CLIP_SECONDS = 6.0  # what scene jobs ask for (mdame_pipeline/scene_cache.py)


def _frames_md5(path: Path) -> str:
    """The decoded frames' digest: equal pictures even where container bytes could differ."""
    return subprocess.run(
        ["ffmpeg", "-v", "error", "-i", str(path), "-f", "md5", "-"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


def _pix_fmt(path: Path) -> str:
    return subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=pix_fmt",
         "-of", "csv=p=0", str(path)],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


@pytest.mark.parametrize("engine", ["svd", "animatediff"])
def test_a_scene_clip_is_what_the_render_expects_and_depends_only_on_the_scene(
    tiny_visuals, tmp_path, engine
):
    started = time.perf_counter()
    first = tiny_visuals.generate(
        "scene-a", "a fox in snow", PALETTE, CLIP_SECONDS, tmp_path / "a.mp4", engine=engine
    )
    took_first = time.perf_counter() - started
    info = probe_media(str(first))
    # The procedural clips' shape: 540x960 at 24 fps, H.264 yuv420p, no audio, 6 s.
    assert (info.width, info.height, info.fps) == (540, 960, 24.0)
    assert info.video_codec == "h264" and info.audio_codec is None
    assert _pix_fmt(first) == "yuv420p"
    assert abs(info.duration_s - CLIP_SECONDS) < 0.05

    loaded = loaded_count()
    started = time.perf_counter()
    again = tiny_visuals.generate(
        "scene-a", "a fox in snow", PALETTE, CLIP_SECONDS, tmp_path / "b.mp4", engine=engine
    )
    took_again = time.perf_counter() - started
    assert loaded_count() == loaded  # the pipeline was reused, not loaded again
    # Seeds from the scene_hash and noise drawn on the CPU: the same frames, and x264 encodes
    # them to the same bytes (checked here, not assumed).
    assert again.read_bytes() == first.read_bytes()
    other = tiny_visuals.generate(
        "scene-b", "a fox in snow", PALETTE, CLIP_SECONDS, tmp_path / "c.mp4", engine=engine
    )
    assert _frames_md5(other) != _frames_md5(first)
    print(f"\n{engine}: first clip {took_first:.1f}s (with load), next {took_again:.1f}s")


def test_the_clip_length_follows_the_requested_duration(tiny_visuals, tmp_path):
    clip = tiny_visuals.generate(
        "scene-a", "a fox", PALETTE, 2.5, tmp_path / "short.mp4", engine="animatediff"
    )
    assert abs(probe_media(str(clip)).duration_s - 2.5) < 0.05


def test_an_unknown_engine_is_refused_before_anything_loads(tiny_visuals, tmp_path):
    with pytest.raises(ValueError, match="unknown visuals engine 'sora'"):
        tiny_visuals.generate("s", "p", PALETTE, 1.0, tmp_path / "x.mp4", engine="sora")
    assert not (tmp_path / "x.mp4").exists()


def test_a_missing_model_names_the_folder_and_the_pull_command(tiny_model_dir, tmp_path):
    empty = DiffusersVisuals(**tiny_visuals_config(tmp_path / "no-models"))
    with pytest.raises(ModelMissing) as err:
        empty.generate("s", "p", PALETTE, 1.0, tmp_path / "x.mp4", engine="svd")
    message = str(err.value)
    assert str(tmp_path / "no-models" / "tiny" / "sd-image") in message
    assert "mdame models pull" in message

    # One of the engine's two models gone (a half-copied model directory): the same.
    partial = tmp_path / "partial"
    shutil.copytree(tiny_model_dir, partial)
    shutil.rmtree(partial / TINY_ADAPTER)
    half = DiffusersVisuals(**tiny_visuals_config(partial))
    with pytest.raises(ModelMissing, match="'tiny/motion-adapter' is not in the model directory"):
        half.generate("s", "p", PALETTE, 1.0, tmp_path / "y.mp4", engine="animatediff")


def test_the_model_directory_defaults_under_mdame_home(monkeypatch, tmp_path):
    monkeypatch.delenv("MDAME_MODEL_DIR", raising=False)
    monkeypatch.setenv("MDAME_HOME", str(tmp_path))
    assert DiffusersVisuals().model_root() == tmp_path / "models"
    monkeypatch.setenv("MDAME_MODEL_DIR", str(tmp_path / "elsewhere"))
    assert DiffusersVisuals().model_root() == tmp_path / "elsewhere"
    assert DiffusersVisuals(model_dir="/configured").model_root() == Path("/configured")
