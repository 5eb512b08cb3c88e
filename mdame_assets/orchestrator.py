"""The orchestrator code location: every CPU stage, its checks, the schedule and sensors."""

from __future__ import annotations

import os

import dagster as dg

from mdame_assets.defs.adaptive.assets import adaptive_engine
from mdame_assets.defs.alerts import ALERT_SENSORS
from mdame_assets.defs.analytics.assets import video_stats
from mdame_assets.defs.analytics.schedules import analytics_job, daily_analytics_schedule
from mdame_assets.defs.auditor.assets import strategic_audit
from mdame_assets.defs.auditor.schedules import weekly_audit_schedule, weekly_operations_job
from mdame_assets.defs.content_retry import content_retry_sensor
from mdame_assets.defs.dimensions.sensors import dimension_registry_sensor
from mdame_assets.defs.housekeeping.assets import (
    housekeeping,
    housekeeping_job,
    housekeeping_schedule,
)
from mdame_assets.defs.publications.assets import publications
from mdame_assets.defs.publications.sensors import publishing_sensor
from mdame_assets.defs.renders.assets import renders
from mdame_assets.defs.renders.caption_checks import caption_layout
from mdame_assets.defs.renders.checks import render_quality
from mdame_assets.defs.run_sensors import RUN_SENSORS
from mdame_assets.defs.scenes.assets import scene_plan
from mdame_assets.defs.scenes.checks import scene_count
from mdame_assets.defs.schedules import daily_content_schedule
from mdame_assets.defs.scripts.assets import scripts
from mdame_assets.defs.scripts.checks import hook_score
from mdame_assets.defs.topics.assets import topics
from mdame_assets.defs.topics.checks import topics_safety
from mdame_assets.defs.trends.assets import trends
from mdame_assets.defs.voice.assets import voice_tracks
from mdame_assets.defs.voice.checks import voice_present
from mdame_assets.jobs import content_job, publishing_job
from mdame_assets.partitions import content_partitions
from mdame_assets.resources import shared_resources

ORCHESTRATOR_EXECUTOR_ENV = "MDAME_ORCHESTRATOR_EXECUTOR"


def orchestrator_executor() -> dg.ExecutorDefinition:
    """multiprocess (Dagster's default: a process per step) unless MDAME_ORCHESTRATOR_EXECUTOR
    is in_process: a partition's steps form one chain, so one process per run loses no
    parallelism and saves a process start per step (the UI browser test uses it)."""
    chosen = os.environ.get(ORCHESTRATOR_EXECUTOR_ENV) or "multiprocess"
    if chosen == "in_process":
        return dg.in_process_executor
    if chosen == "multiprocess":
        return dg.multiprocess_executor
    raise ValueError(
        f"{ORCHESTRATOR_EXECUTOR_ENV} must be in_process or multiprocess, not {chosen!r}"
    )


# scene_clips is materialized by the GPU location; here it is a spec, for lineage only.
scene_clips_spec = dg.AssetSpec(
    "scene_clips", deps=[scene_plan], partitions_def=content_partitions, group_name="visuals"
)

defs = dg.Definitions.merge(
    dg.Definitions(
        assets=[trends, topics, scripts, scene_plan],
        asset_checks=[topics_safety, hook_score, scene_count],
        jobs=[content_job],
        schedules=[daily_content_schedule],
        sensors=[dimension_registry_sensor, content_retry_sensor],
    ),
    dg.Definitions(assets=[scene_clips_spec]),
    dg.Definitions(
        assets=[voice_tracks, renders, publications],
        asset_checks=[voice_present, render_quality, caption_layout],
        jobs=[publishing_job],
        sensors=[publishing_sensor],
    ),
    dg.Definitions(sensors=RUN_SENSORS),
    dg.Definitions(sensors=ALERT_SENSORS),  # run failures of both locations, sweep
    # Daily analytics, the weekly Strategic Auditor and the Adaptive Engine after it.
    dg.Definitions(
        assets=[video_stats, strategic_audit, adaptive_engine],
        jobs=[analytics_job, weekly_operations_job],
        schedules=[daily_analytics_schedule, weekly_audit_schedule],
    ),
    # The daily housekeeping pass.
    dg.Definitions(
        assets=[housekeeping], jobs=[housekeeping_job], schedules=[housekeeping_schedule]
    ),
    dg.Definitions(resources=shared_resources()),
    dg.Definitions(executor=orchestrator_executor()),
)
