"""Where media bytes live: a content-addressed store, and the folder the outbox channel uses."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from mdame_core.settings import mdame_home
from mdame_domain.media_store import LocalMediaStore


class MediaStoreResource(dg.ConfigurableResource):
    """Local content-addressed media store; rows hold its URI and the SHA-256."""

    root: str = ""  # empty: $MDAME_MEDIA_ROOT, else $MDAME_HOME/media

    def store(self) -> LocalMediaStore:
        return LocalMediaStore(media_root(self.root))

    def scratch_dir(self, name: str) -> Path:
        """A per-step work folder for intermediate files (never a source of truth)."""
        path = mdame_home() / "scratch" / name
        path.mkdir(parents=True, exist_ok=True)
        return path


MEDIA_ROOT_ENV = "MDAME_MEDIA_ROOT"


def media_root(configured: str = "") -> Path:
    """The store's folder. MDAME_MEDIA_ROOT lets several homes share one store (the crash
    harness: content-addressed files and derived-output memos are valid across databases)."""
    return Path(configured or os.environ.get(MEDIA_ROOT_ENV) or mdame_home() / "media")
