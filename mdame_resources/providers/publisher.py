"""Publishing channels: the local outbox offline, YouTube Data API in production."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mdame_core.settings import mdame_home
from mdame_domain.outbox import OutboxEntry, outbox_video_id, publish_to_outbox
from mdame_resources.providers.base import ProviderResource, not_built


class PublisherResource(ProviderResource):
    # YouTube charges 1,600 quota units per videos.insert; the outbox mirrors that accounting.
    upload_quota_units: int = 1600
    # The longest one upload request may still be in flight after its holder lost the lock (it
    # checks the fence between requests): another holder settles the upload only after this.
    upload_grace_s: int = 120

    def publish(
        self, dimension_slug: str, work_key: str, video: Path, metadata: dict[str, Any]
    ) -> str:
        """Publishes once per work_key and returns the channel's video id."""
        raise NotImplementedError

    def find(self, dimension_slug: str, work_key: str) -> str | None:
        """The video id already published for work_key, if any: reconciles an unknown outcome."""
        raise NotImplementedError


class OutboxPublisher(PublisherResource):
    root: str = ""  # empty: $MDAME_HOME/outbox

    @property
    def offline(self) -> bool:
        return True

    def folder(self) -> Path:
        return Path(self.root) if self.root else mdame_home() / "outbox"

    def publish(
        self, dimension_slug: str, work_key: str, video: Path, metadata: dict[str, Any]
    ) -> str:
        video_id = outbox_video_id(work_key)
        entry: OutboxEntry = publish_to_outbox(
            self.folder(), dimension_slug, video_id, video, metadata
        )
        return entry.video_id

    def find(self, dimension_slug: str, work_key: str) -> str | None:
        video_id = outbox_video_id(work_key)
        done = (self.folder() / dimension_slug / video_id / "metadata.json").exists()
        return video_id if done else None


class YouTubePublisher(PublisherResource):
    client_secrets_file: str = ""

    def publish(
        self, dimension_slug: str, work_key: str, video: Path, metadata: dict[str, Any]
    ) -> str:
        raise not_built(self.provider_name, "resumable upload to the YouTube Data API")

    def find(self, dimension_slug: str, work_key: str) -> str | None:
        raise not_built(self.provider_name, "YouTube upload reconciliation")
