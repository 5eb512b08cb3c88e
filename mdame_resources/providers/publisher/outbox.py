"""The offline publisher: the local outbox, reached through the same protocol as YouTube."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import ClassVar

from mdame_core.settings import mdame_home
from mdame_core.state import Account, StateStore
from mdame_domain.analytics import VideoCounters, simulated_counters
from mdame_domain.channel import ChannelApi
from mdame_domain.outbox import OutboxChannel
from mdame_resources.providers.publisher.resource import PublisherResource


class OutboxPublisher(PublisherResource):
    """The local outbox: $MDAME_HOME/outbox/<dimension>/<video_id>/ (video.mp4, metadata.json,
    thumbnail.jpg), reached through the same protocol as YouTube (OutboxChannel)."""

    root: str = ""  # empty: $MDAME_HOME/outbox
    processing_poll_s: float = 0.0  # the outbox has processed a video once it holds it
    gone_recheck_s: float | None = 0.0  # it lists a video the moment it holds it
    initiation_counted: bool = False  # a session costs nothing: only a published video does

    no_health_check: ClassVar[str] = "offline: it calls no service"

    @property
    def offline(self) -> bool:
        return True

    def folder(self) -> Path:
        return Path(self.root) if self.root else mdame_home() / "outbox"

    def channel(self, state: StateStore, account: Account, dimension_slug: str) -> ChannelApi:
        return OutboxChannel(self.folder(), dimension_slug)

    def video_statistics(
        self,
        state: StateStore,
        account: Account,
        dimension_slug: str,
        videos: Mapping[str, date],
        day: date,
    ) -> dict[str, VideoCounters]:
        """Simulated viewers: a seeded model, deterministic from the video id and the day (no
        quota: the outbox is not a metered channel)."""
        return {vid: simulated_counters(vid, published, day) for vid, published in videos.items()}
