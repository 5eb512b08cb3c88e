"""The GPU code location: scene_clips (one step per scene), its check, and the hop sensor that
runs it for partitions whose scripts await their clips. Its executor comes from configuration
(MDAME_GPU_EXECUTOR, mdame_assets/executors.py)."""

from __future__ import annotations

import dagster as dg

from mdame_assets.defs.clips.assets import scene_clips
from mdame_assets.defs.clips.checks import clips_present
from mdame_assets.defs.clips.sensors import scene_jobs_sensor
from mdame_assets.executors import gpu_executor, gpu_io_manager
from mdame_assets.jobs import scene_clips_job
from mdame_assets.resources import shared_resources

defs = dg.Definitions(
    assets=[scene_clips],
    asset_checks=[clips_present],
    jobs=[scene_clips_job],
    sensors=[scene_jobs_sensor],
    # MDAME_GPU_EXECUTOR: in-process by default; celery or k8s on several hosts, whose steps
    # pass outputs through storage they all reach (MDAME_DAGSTER_IO_URL).
    executor=gpu_executor(),
    resources={**shared_resources(), "io_manager": gpu_io_manager()},
)
