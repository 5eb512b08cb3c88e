"""Media retention: which stored media nothing needs, and the marks that keep a row from naming
an object while, and after, its bytes are collected. And which Dagster runs the state still
references (housekeeping keeps them)."""

from __future__ import annotations

from collections.abc import Sequence
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

    def referenced_run_ids(self, run_ids: Sequence[str]) -> set[str]:
        """Of these Dagster run ids, those MD-AME's state still points at, work that is not
        over yet: a `pipeline_runs` row still 'running' (the liveness sweep and the run status
        sensors finish it from the run), an unreleased pipeline lock the run holds (its holder
        is `<run id>:<stage>`), media a housekeeping run left 'collecting' (`housekeeping:<run
        id>`), and an alert not delivered yet whose text names the run. Finished rows and the
        events journal name runs too, as history: they need no Dagster run to stay correct."""
        if not run_ids:
            return set()
        rows = self._select(  # a read; the app role may SELECT
            """SELECT r FROM unnest(%(ids)s::text[]) AS r
                WHERE EXISTS (SELECT 1 FROM mdame.pipeline_runs p
                               WHERE p.status = 'running' AND p.execution_id::text = r)
                   OR EXISTS (SELECT 1 FROM mdame.system_locks l
                               WHERE l.released_at IS NULL AND split_part(l.holder, ':', 1) = r)
                   OR EXISTS (SELECT 1 FROM mdame.media_collections m
                               WHERE m.state = 'collecting' AND m.holder = 'housekeeping:' || r)
                   OR EXISTS (SELECT 1 FROM mdame.alerts a
                               WHERE a.delivered_at IS NULL AND strpos(a.text, r) > 0)""",
            {"ids": list(run_ids)},
        )
        return {row[0] for row in rows}
