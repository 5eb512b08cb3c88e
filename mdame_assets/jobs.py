"""The jobs that schedules and sensors launch; the run hops code locations at scene_clips."""

from __future__ import annotations

import dagster as dg

CONTENT_ASSETS = ["trends", "topics", "scripts", "scene_plan"]
PUBLISHING_ASSETS = ["voice_tracks", "renders", "publications"]

content_job = dg.define_asset_job(
    "content_job",
    selection=dg.AssetSelection.assets(*CONTENT_ASSETS),
    description="trends -> topics -> scripts -> scene_plan; the GPU location takes it from there.",
)
publishing_job = dg.define_asset_job(
    "publishing_job",
    selection=dg.AssetSelection.assets(*PUBLISHING_ASSETS),
    description="voice_tracks -> renders -> publications, once the scene clips are ready.",
)
scene_clips_job = dg.define_asset_job(
    "scene_clips_job",
    selection=dg.AssetSelection.assets("scene_clips"),
    executor_def=dg.in_process_executor,
    description="GPU pull worker for one partition's scene jobs.",
)


def partition_tags(key: str) -> dict[str, str]:
    """The run queue allows one run per partition at a time (dagster.yaml)."""
    return {"mdame/partition": key.replace("|", "_")}
