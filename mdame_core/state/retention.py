"""Media retention: which stored media nothing needs, and the marks that keep a row from naming
an object while, and after, its bytes are collected."""

from __future__ import annotations

from datetime import datetime

from mdame_core.state.client import ClientBase, JsonObject, _json
from mdame_core.state.records import CollectableMedia, CollectionStart, MediaCollectionMark


class Retention(ClientBase):
    """The media-collection RPCs."""

    def collectable_media(self, policy: JsonObject, limit: int = 10_000) -> list[CollectableMedia]:
        """Media nothing needs under `policy` (RetentionPolicy.to_json()); ones left
        'collecting' by a stopped run first. Read-only: begin_media_collection decides."""
        rows = self.call("collectable_media", _json(dict(policy)), limit)
        return [CollectableMedia(*row) for row in rows]

    def begin_media_collection(self, uri: str, policy: JsonObject, holder: str) -> CollectionStart:
        """Marks `uri` 'collecting' if nothing needs it now (no row can start naming it until
        it is finished or abandoned)."""
        rows = self.call("begin_media_collection", uri, _json(dict(policy)), holder)
        return CollectionStart(*rows[0])

    def finish_media_collection(self, uri: str, freed_bytes: int) -> bool:
        """The bytes are gone: 'collected', and the expired cache entries naming it dropped.
        False when it was already collected; NotFound when it was never begun."""
        return bool(self._scalar("finish_media_collection", uri, freed_bytes))

    def media_collection_mark(self, uri: str) -> MediaCollectionMark | None:
        """The object's collection record, or None when it has none (rows may name it)."""
        rows = self.call("media_collection_mark", uri)
        return MediaCollectionMark(*rows[0]) if rows else None

    def media_stored_again(self, uri: str, collected_at: datetime) -> bool:
        """The bytes were stored again after the collection `media_collection_mark` showed
        (collected at `collected_at`): rows may name the object again. False when it was
        collected again since (store it again); StateConflict while it is being collected."""
        return bool(self._scalar("media_stored_again", uri, collected_at))

    def abandon_media_collection(self, uri: str) -> bool:
        """The bytes could not be deleted and are still there: the mark goes."""
        return bool(self._scalar("abandon_media_collection", uri))
