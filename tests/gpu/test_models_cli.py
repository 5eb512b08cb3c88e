"""`mdame models check` against real model folders, `mdame models pull` as far as it goes
without a network: it names what it would pull and fails clearly (the hub is off limits)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mdame_cli.main import main
from mdame_cli.ui import free_port
from tests.gpu.tiny_pipelines import TINY_ADAPTER, TINY_IMAGE, TINY_SD_BASE, TINY_SVD

# The default models, filled with the tiny ones (real files, real configs) under their ids.
AS_DEFAULT = {
    "stabilityai/sdxl-turbo": TINY_IMAGE,
    "stabilityai/stable-video-diffusion-img2vid": TINY_SVD,
    "stable-diffusion-v1-5/stable-diffusion-v1-5": TINY_SD_BASE,
    "guoyww/animatediff-motion-adapter-v1-5-2": TINY_ADAPTER,
}
DIMENSION = """slug: {slug}
title: T
visual_style: flat
palette: ["#000000", "#ffffff"]
feeds: [feeds/tech.xml]
accounts: [{{platform: youtube, handle: h}}]
visuals: {{engine: {engine}}}
active: {active}
"""


def _dimensions(folder: Path, *specs: tuple[str, str, bool]) -> Path:
    folder.mkdir()
    for slug, engine, active in specs:
        text = DIMENSION.format(slug=slug, engine=engine, active=str(active).lower())
        (folder / f"{slug}.yaml").write_text(text)
    return folder


@pytest.fixture
def model_dir(tiny_model_dir, tmp_path, monkeypatch):
    folder = tmp_path / "models"
    for model_id, tiny in AS_DEFAULT.items():
        shutil.copytree(tiny_model_dir / tiny, folder / model_id)
    monkeypatch.setenv("MDAME_MODEL_DIR", str(folder))
    return folder


def test_check_lists_presence_size_and_users_and_fails_on_a_missing_needed_model(
    model_dir, tmp_path, capsys
):
    dims = _dimensions(
        tmp_path / "dims", ("alpha", "svd", True), ("beta", "animatediff", True),
        ("gamma", "animatediff", False),
    )  # fmt: skip
    assert main(["models", "check", "--dimensions", str(dims)]) == 0
    out = capsys.readouterr().out
    assert f"model directory: {model_dir}" in out
    rows = {line.split()[0]: line for line in out.splitlines() if "/" in line.split()[0]}
    assert set(rows) == set(AS_DEFAULT)
    assert "present" in rows["stabilityai/sdxl-turbo"] and "alpha" in rows["stabilityai/sdxl-turbo"]
    adapter = rows["guoyww/animatediff-motion-adapter-v1-5-2"]
    assert adapter.split()[1] == "animatediff" and adapter.rstrip().endswith("beta")  # not gamma
    assert " KB" in adapter or " MB" in adapter  # its size on disk

    # A needed model goes missing, another loses its weights: non-zero, both named.
    shutil.rmtree(model_dir / "stabilityai/stable-video-diffusion-img2vid")
    for weights in (model_dir / "guoyww/animatediff-motion-adapter-v1-5-2").glob("*.safetensors"):
        weights.unlink()
    assert main(["models", "check", "--dimensions", str(dims)]) == 1
    out = capsys.readouterr().out
    assert "missing: stabilityai/stable-video-diffusion-img2vid, guoyww/" in out
    assert "incomplete" in out and "mdame models pull" in out


def test_check_passes_when_no_active_dimension_needs_the_missing_model(model_dir, tmp_path, capsys):
    dims = _dimensions(tmp_path / "dims", ("alpha", "svd", True), ("gamma", "animatediff", False))
    shutil.rmtree(model_dir / "stable-diffusion-v1-5")
    assert main(["models", "check", "--dimensions", str(dims)]) == 0
    assert "missing" in capsys.readouterr().out  # listed as missing, but nobody needs it


@pytest.mark.parametrize("offline", [True, False])
def test_pull_names_what_it_would_pull_and_fails_clearly_without_the_hub(tmp_path, offline):
    env = {
        **os.environ,
        "MDAME_MODEL_DIR": str(tmp_path / "models"),
        # Either way the hub is unreachable: offline mode, or an endpoint on a closed port.
        "HF_HUB_OFFLINE": "1" if offline else "0",
        "HF_ENDPOINT": f"http://127.0.0.1:{free_port()}",
        "NO_PROXY": "127.0.0.1",
    }
    env.pop("HF_TOKEN", None)
    done = subprocess.run(
        [sys.executable, "-m", "mdame_cli.main", "models", "pull", "--engine", "animatediff"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    target = tmp_path / "models" / "stable-diffusion-v1-5" / "stable-diffusion-v1-5"
    assert f"pulling stable-diffusion-v1-5/stable-diffusion-v1-5 -> {target}" in done.stdout
    reason = "HF_HUB_OFFLINE is set" if offline else f"the Hugging Face hub at {env['HF_ENDPOINT']}"
    assert done.stderr.startswith(
        f"mdame: error: cannot pull 'stable-diffusion-v1-5/stable-diffusion-v1-5': {reason}"
    )
    assert not any(target.rglob("*.safetensors"))


def test_pull_refuses_a_model_id_that_is_not_a_folder_name(capsys):
    assert main(["models", "pull", "--model", "../../etc"]) == 1
    assert "not a model id" in capsys.readouterr().err
