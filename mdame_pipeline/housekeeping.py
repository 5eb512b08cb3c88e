"""Collecting stored media by the retention policy, one object at a time, crash-safe.

For each object the database lists (mdame.collectable_media), begin_media_collection decides
again under the object's lock and marks it 'collecting' (rows can no longer start naming it),
the bytes are deleted from the store, and finish_media_collection records it collected. A run
stopped between the steps leaves the mark; the next run lists marked objects first and
finishes them (deleting twice is harmless). A delete that fails leaves the object marked
unless its bytes are verifiably still there, in which case the mark is abandoned.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mdame_core.state import StateStore
from mdame_domain.dimensions import dimension_from_json
from mdame_domain.media_store import MediaStore
from mdame_domain.retention import RetentionPolicy, RetentionSettings, retention_policy

Log = Callable[..., None]


@dataclass
class CollectionReport:
    collected: list[dict[str, Any]] = field(default_factory=list)  # uri, kind, bytes, reason
    kept: list[dict[str, Any]] = field(default_factory=list)  # needed again by the time asked
    failed: list[dict[str, Any]] = field(default_factory=list)  # delete failed: next run

    @property
    def freed_bytes(self) -> int:
        return sum(int(item["bytes"]) for item in self.collected)

    def freed_by_kind(self) -> dict[str, int]:
        by_kind: dict[str, int] = {}
        for item in self.collected:
            by_kind[item["kind"]] = by_kind.get(item["kind"], 0) + int(item["bytes"])
        return by_kind


def policy_from_registry(state: StateStore) -> RetentionPolicy:
    """The environment's defaults with every registered dimension's `retention:` block."""
    settings: list[tuple[str, RetentionSettings]] = []
    for row in state.list_dimensions():
        try:
            settings.append((row.slug, dimension_from_json(row.config).retention))
        except (TypeError, ValueError):  # a stored config of another version: defaults
            continue
    return retention_policy(settings)


def collect_media(
    state: StateStore,
    store: MediaStore,
    policy: RetentionPolicy,
    holder: str,
    limit: int = 10_000,
    log: Log | None = None,
) -> CollectionReport:
    """Collects what the policy lets go (at most `limit` objects this run)."""
    report, policy_json = CollectionReport(), policy.to_json()
    for item in state.collectable_media(policy_json, limit):
        start = state.begin_media_collection(item.uri, policy_json, holder)
        if not start.collect:
            report.kept.append({"uri": item.uri, "reason": start.reason})
            continue
        try:
            freed = store.delete(item.uri)
        except Exception as exc:  # noqa: BLE001 - one object's failure must not stop the rest
            still_there = False
            with contextlib.suppress(Exception):
                still_there = store.problem(item.uri) is None
            if still_there:
                state.abandon_media_collection(item.uri)
            report.failed.append({"uri": item.uri, "error": f"{type(exc).__name__}: {exc}"})
            if log is not None:
                log("media_collect_failed", uri=item.uri, error=str(exc)[:300])
            continue
        state.finish_media_collection(item.uri, freed or 0)
        entry = {
            "uri": item.uri,
            "kind": start.kind or item.kind,
            "bytes": freed or 0,
            "reason": start.reason[:300],
        }
        report.collected.append(entry)
        if log is not None:
            log("media_collected", **entry)
    return report
