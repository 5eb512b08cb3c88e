"""Assets another code location materializes, here as specs for lineage only."""

import dagster as dg

from mdame_assets.defs.scenes.assets import scene_plan
from mdame_assets.partitions import content_partitions

# scene_clips is materialized by the GPU location (mdame_assets/gpu_defs/clips).
scene_clips_spec = dg.AssetSpec(
    "scene_clips",
    deps=[scene_plan],
    partitions_def=content_partitions,
    group_name="visuals",
    description="Every planned scene's clip, made by the GPU code location "
    "(mdame_assets/gpu_defs/clips); shown here for lineage. The publishing job starts once a "
    "partition's clips are ready.",
)
