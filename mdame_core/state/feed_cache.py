"""The trend sources' conditional-GET cache. Shared by dimensions: not fenced."""

from __future__ import annotations

from collections.abc import Sequence

from mdame_core.state.client import ClientBase, JsonObject, _json
from mdame_core.state.records import FeedCacheEntry


class FeedCache(ClientBase):
    """The feed-cache RPCs."""

    def get_feed_cache(self, source_url: str) -> FeedCacheEntry | None:
        rows = self.call("get_feed_cache", source_url)
        return FeedCacheEntry(*rows[0]) if rows else None

    def record_feed_fetch(
        self,
        source_url: str,
        etag: str | None,
        last_modified: str | None,
        items: Sequence[JsonObject] | None,
    ) -> int:
        """A full response (items) replaces the cache; items None records a 304."""
        return self._scalar(
            "record_feed_fetch",
            source_url,
            etag,
            last_modified,
            None if items is None else _json(list(items)),
        )

    def record_feed_failure(
        self, source_url: str, reason: str, execution_id: str | None = None
    ) -> int:
        """Counts a failed fetch on the source and records a `fetch_failed` event."""
        return self._scalar("record_feed_failure", source_url, reason, execution_id)
