"""The pipeline's plain application code, below the Dagster definitions that call it: the
script's lifecycle, the dimension lock, the recovery pass, the scene cache and the clip worker,
housekeeping, the Adaptive Engine pass and the dimension registry. It may import mdame_domain,
mdame_core and mdame_resources, never mdame_runtime, mdame_assets or mdame_cli."""
