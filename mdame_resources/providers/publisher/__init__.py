"""Publishing channels, all through one resumable protocol (mdame_domain.channel).

`PublisherResource` holds the whole publishing logic: sessions committed before the first byte,
chunks sent once, resumes from what the session holds, reconciliation by a search of the
channel's own uploads, processing and thumbnails, every list call metered, every request to a
session ended before the holder's lease. Its implementations
differ only in the channel they open for an account: the local outbox offline
(`OutboxPublisher`), the YouTube Data API in production (`YouTubePublisher`). So the demo, the
pipeline tests and the crash matrix run the publishing code production runs.

By concern: the upload job and what a publisher raises (job.py), the channel's metered list
calls and the reconciliation of a gone session (listing.py), resumable sessions (sessions.py),
the resource itself (resource.py), account grants (grants.py), and its channels (outbox.py,
youtube.py, tiktok.py). What callers
use is exported here.
"""

from mdame_resources.providers.publisher.job import (
    AccountUnavailable,
    StatisticsUnavailable,
    UploadJob,
    UploadUnsettled,
)
from mdame_resources.providers.publisher.outbox import OutboxPublisher
from mdame_resources.providers.publisher.resource import PublisherResource
from mdame_resources.providers.publisher.tiktok import TikTokPublisher
from mdame_resources.providers.publisher.youtube import YouTubePublisher


def publisher_for(
    platform: str, publisher: PublisherResource, tiktok_publisher: PublisherResource
) -> PublisherResource:
    """The publisher an account of `platform` is published through: TikTok's own, or the
    deployment's publisher (YouTube, or the outbox offline) for every other platform."""
    return tiktok_publisher if platform == "tiktok" else publisher


__all__ = [
    "AccountUnavailable",
    "OutboxPublisher",
    "PublisherResource",
    "TikTokPublisher",
    "StatisticsUnavailable",
    "UploadJob",
    "UploadUnsettled",
    "YouTubePublisher",
    "publisher_for",
]
