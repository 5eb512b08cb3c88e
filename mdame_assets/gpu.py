"""The GPU code location: scene_clips (one step per scene), its check, and the hop sensor that
runs it for partitions whose scripts await their clips, all loaded from mdame_assets/gpu_defs/.
Its executor comes from configuration (MDAME_GPU_EXECUTOR, mdame_runtime/executors.py).

The definitions are built by `defs()`, which Dagster calls as the location loads: the settings
are read then, not when this module is imported (mdame_assets/orchestrator.py says more)."""

from __future__ import annotations

import dagster as dg

import mdame_assets.gpu_defs
from mdame_assets.folders import load_location
from mdame_assets.resources import shared_resources
from mdame_runtime.executors import gpu_executor, step_io_manager


def _finish(folder: dg.Definitions) -> dg.Definitions:
    return dg.Definitions.merge(
        folder,
        dg.Definitions(
            # MDAME_GPU_EXECUTOR: in-process by default; celery or k8s on several hosts, whose
            # steps pass outputs through storage they all reach (MDAME_DAGSTER_IO_URL).
            executor=gpu_executor(),
            resources={**shared_resources(), "io_manager": step_io_manager()},
        ),
    )


@dg.definitions
def defs() -> dg.Definitions:
    return load_location(mdame_assets.gpu_defs, _finish)
