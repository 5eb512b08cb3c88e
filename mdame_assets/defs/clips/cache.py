"""The scene cache as the clip stages read it: an entry counts only while its file is intact."""

from __future__ import annotations

from mdame_core.state import CacheEntry, StateStore
from mdame_domain.media_store import LocalMediaStore

SCENE_JOB_TYPE = "scene_clip"
CACHE_TTL_S = 30 * 24 * 3600


def cached_clip(state: StateStore, store: LocalMediaStore, scene_hash: str) -> CacheEntry | None:
    """The live cache entry for `scene_hash` whose file is present and unaltered, or None. An
    entry whose file vanished or rotted is invalidated (an event records why), so the scene is
    generated again instead of failing every rerun."""
    entry = state.lookup_scene_cache(scene_hash)
    if entry is None:
        return None
    problem = store.problem(entry.uri, entry.content_sha256)
    if problem is None:
        return entry
    state.invalidate_scene_cache(scene_hash, entry.uri, problem)
    return None
