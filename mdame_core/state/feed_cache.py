"""The trend sources' conditional-GET cache. A source's row is shared by every dimension that
lists it; it is written by one dimension's trends stage at a time, fenced by that dimension's
pipeline lock (record_feed_fetch on a fenced view, through `for_dimension`)."""

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
        dimension_slug: str,
        source_url: str,
        etag: str | None,
        last_modified: str | None,
        items: Sequence[JsonObject] | None,
    ) -> int:
        """A full response (items) replaces the cache; items None records a 304. Written by
        `dimension_slug`'s trends stage, under its lock (Fenced otherwise)."""
        return self._scalar(
            "record_feed_fetch",
            source_url,
            etag,
            last_modified,
            None if items is None else _json(list(items)),
            dimension_slug,
            self._token(),
        )

    def record_feed_failure(
        self, source_url: str, reason: str, execution_id: str | None = None
    ) -> int:
        """Counts a failed fetch on the source and records a `fetch_failed` event."""
        return self._scalar("record_feed_failure", source_url, reason, execution_id)

    def for_dimension(self, dimension_slug: str) -> DimensionFeedCache:
        """The cache as `dimension_slug`'s trends stage reads and writes it (a fenced view)."""
        return DimensionFeedCache(self, dimension_slug)


class DimensionFeedCache:
    """One dimension's access to the shared feed cache: what a trend source's fetch needs."""

    def __init__(self, store: FeedCache, dimension_slug: str) -> None:
        self._store, self.dimension_slug = store, dimension_slug

    def get_feed_cache(self, source_url: str) -> FeedCacheEntry | None:
        return self._store.get_feed_cache(source_url)

    def record_feed_fetch(
        self,
        source_url: str,
        etag: str | None,
        last_modified: str | None,
        items: Sequence[JsonObject] | None,
    ) -> int:
        return self._store.record_feed_fetch(
            self.dimension_slug, source_url, etag, last_modified, items
        )
