"""The scene cache as the clip stages read it: an entry counts only while its file is intact."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mdame_core.state import CacheEntry, Job, StateStore
from mdame_domain.media_store import MediaStore

SCENE_JOB_TYPE = "scene_clip"
SCENE_JOB_MAX_ATTEMPTS = 3
CACHE_TTL_S = 30 * 24 * 3600
CLIP_SECONDS = 6.0  # every clip is generated this long; the render loops or trims it per scene


def scene_job(
    scene_hash: str,
    prompt: str,
    palette: Sequence[str],
    engine: str | None = None,
    chain: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What a GPU worker needs to make a scene's clip (scene_plan and healing queue the same).
    engine: the dimension's diffusers engine, for providers that have several; chain: the
    scene's visuals chain (scene_chain), absent on jobs queued before chains."""
    job: dict[str, Any] = {
        "scene_hash": scene_hash,
        "prompt": prompt,
        "palette": list(palette),
        "duration_s": CLIP_SECONDS,
    }
    if engine is not None:
        job["engine"] = engine
    if chain is not None:
        job["chain"] = dict(chain)
    return job


def scene_chain(
    engines: Sequence[str], dimension_slug: str, narration: str, queries: Sequence[str]
) -> dict[str, Any]:
    """What the chain needs besides the prompt: the engines in order, the dimension whose
    budget pays, the narration the gate judges against and the stock searches."""
    return {
        "engines": list(engines),
        "dimension": dimension_slug,
        "narration": narration,
        "queries": list(queries),
    }


def cached_clip(
    state: StateStore, store: MediaStore, scene_hash: str, job: Job | None = None
) -> CacheEntry | None:
    """The live cache entry for `scene_hash` whose file is present and unaltered, or None. An
    entry whose file vanished or rotted is invalidated (an event records why), so the scene is
    generated again instead of failing every rerun. A GPU worker passes the `job` it holds:
    its lease is what lets it drop the entry."""
    entry = state.lookup_scene_cache(scene_hash)
    if entry is None:
        return None
    problem = store.problem(entry.uri, entry.content_sha256)
    if problem is None:
        return entry
    state.invalidate_scene_cache(scene_hash, entry.uri, problem, job)
    return None
