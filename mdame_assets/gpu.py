"""The GPU code location: scene_clips and the sensor that feeds it from the scene-job queue."""

from __future__ import annotations

import dagster as dg

from mdame_assets.defs.clips.assets import scene_clips
from mdame_assets.defs.clips.checks import clips_present
from mdame_assets.defs.clips.sensors import scene_jobs_sensor
from mdame_assets.jobs import scene_clips_job
from mdame_assets.resources import shared_resources

defs = dg.Definitions(
    assets=[scene_clips],
    asset_checks=[clips_present],
    jobs=[scene_clips_job],
    sensors=[scene_jobs_sensor],
    executor=dg.in_process_executor,
    resources=shared_resources(),
)
