"""Where media bytes live: a content-addressed store, and the folder the outbox channel uses."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from mdame_core.settings import mdame_home
from mdame_domain.media_store import LocalMediaStore


class MediaStoreResource(dg.ConfigurableResource):
    """Local content-addressed media store; rows hold its URI and the SHA-256."""

    root: str = ""  # empty: $MDAME_HOME/media

    def store(self) -> LocalMediaStore:
        return LocalMediaStore(Path(self.root) if self.root else mdame_home() / "media")

    def scratch_dir(self, name: str) -> Path:
        """A per-step work folder for intermediate files (never a source of truth)."""
        path = mdame_home() / "scratch" / name
        path.mkdir(parents=True, exist_ok=True)
        return path
