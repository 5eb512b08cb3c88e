"""The scene-clip worker as a standalone process, for a CUDA host outside Dagster."""

from __future__ import annotations

from mdame_assets.defs.clips.worker import run_worker
from mdame_resources.media import MediaStoreResource
from mdame_resources.providers.selection import providers_for_environment
from mdame_resources.state import StateStoreResource


def run_standalone_worker(max_idle_s: float | None = None) -> int:
    media = MediaStoreResource()
    stats = run_worker(
        StateStoreResource().get_client(),
        providers_for_environment()["visuals"],
        media.store(),
        media.scratch_dir("clips"),
        done=lambda: False,
        max_idle_s=max_idle_s,
    )
    print(f"worker stopped: {stats.as_metadata()}")
    return 0
