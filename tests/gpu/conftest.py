"""Tiny diffusers pipelines for the GPU location's tests, on the CPU.

Fixtures (other tests may reuse them):
- `tiny_model_dir` (session): a model directory laid out like MDAME_MODEL_DIR holding the four
  tiny random-weight models of tests/gpu/tiny_pipelines.py (built once per session).
- `tiny_visuals`: a DiffusersVisuals whose fields point at them (CPU, tiny sizes, 2 steps).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gpu.tiny_pipelines import build_tiny_models, tiny_visuals_config

# Nothing here may reach the hub: the models are local, and loading uses local_files_only.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    import torch

    torch.set_num_threads(1)  # two shared cores: threads only contend
    folder = tmp_path_factory.mktemp("models")
    started = time.perf_counter()
    timings = build_tiny_models(folder)
    timings["total"] = time.perf_counter() - started
    print(f"\ntiny pipelines built in {timings['total']:.1f}s: {timings}")
    yield folder


@pytest.fixture
def tiny_visuals(tiny_model_dir: Path):
    from mdame_resources.providers.visuals import DiffusersVisuals

    return DiffusersVisuals(**tiny_visuals_config(tiny_model_dir))
