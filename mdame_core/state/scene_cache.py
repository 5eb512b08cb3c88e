"""The scene cache: a generated clip by the hash of what made it."""

from __future__ import annotations

from mdame_core.state.client import ClientBase, JsonObject, _json
from mdame_core.state.records import CacheEntry, Job


class SceneCache(ClientBase):
    """The scene-cache RPCs."""

    def lookup_scene_cache(self, scene_hash: str) -> CacheEntry | None:
        rows = self.call("lookup_scene_cache", scene_hash)
        return CacheEntry(*rows[0]) if rows else None

    def put_scene_cache(
        self,
        scene_hash: str,
        uri: str,
        content_sha256: str,
        ttl_seconds: int,
        detail: JsonObject | None = None,
    ) -> CacheEntry:
        """Returns the entry in effect (a live entry of another writer wins)."""
        rows = self.call(
            "put_scene_cache", scene_hash, uri, content_sha256, ttl_seconds, _json(detail or {})
        )
        return CacheEntry(*rows[0])

    def invalidate_scene_cache(
        self, scene_hash: str, uri: str, reason: str, job: Job | None = None
    ) -> bool:
        """Drops the entry naming `uri` (its file is missing or corrupt); True if dropped.
        The pipeline calls it on a fenced view, a GPU worker under the lease of the `job` that
        makes the scene; unfenced and without a job, it is the admin's."""
        if job is not None:
            return self._scalar("invalidate_scene_cache", scene_hash, uri, reason, *job.lease)
        return self._scalar("invalidate_scene_cache", scene_hash, uri, reason, *self._fenced_tail())
