"""Publishing channels, all through one resumable protocol (mdame_domain.channel).

`PublisherResource` holds the whole publishing logic: sessions committed before the first byte,
chunks sent once, resumes from what the session holds, reconciliation by a search of the
channel's own uploads, processing and thumbnails, every list call metered, every request to a
session ended before the holder's lease. Its implementations
differ only in the channel they open for an account: the local outbox offline
(`OutboxPublisher`), the YouTube Data API (`YouTubePublisher`), TikTok's Content Posting API
(`TikTokPublisher`) and the Instagram API (`InstagramPublisher`) in production. So the demo,
the pipeline tests and the crash matrix run the publishing code production runs.

By concern: the upload job and what a publisher raises (job.py), the channel's metered list
calls and the reconciliation of a gone session (listing.py), resumable sessions (sessions.py),
the resource itself (resource.py), account grants (grants.py), what one-caption platforms share
(marked.py), and its channels (outbox.py, youtube.py, tiktok.py, instagram.py). What callers use
is exported here.
"""

from collections.abc import Mapping

from mdame_resources.providers.publisher.instagram import InstagramPublisher
from mdame_resources.providers.publisher.job import (
    AccountUnavailable,
    StatisticsUnavailable,
    UploadInFlight,
    UploadJob,
    UploadUnsettled,
)
from mdame_resources.providers.publisher.outbox import OutboxPublisher
from mdame_resources.providers.publisher.resource import PublisherResource
from mdame_resources.providers.publisher.tiktok import TikTokPublisher
from mdame_resources.providers.publisher.youtube import YouTubePublisher


def publisher_for(
    platform: str, publisher: PublisherResource, by_platform: Mapping[str, PublisherResource]
) -> PublisherResource:
    """The publisher an account of `platform` is published through: its platform's own
    (`by_platform`: TikTok's, Instagram's), or the deployment's publisher (YouTube, or the
    outbox offline) for every other platform."""
    return by_platform.get(platform, publisher)


__all__ = [
    "AccountUnavailable",
    "InstagramPublisher",
    "OutboxPublisher",
    "PublisherResource",
    "TikTokPublisher",
    "StatisticsUnavailable",
    "UploadJob",
    "UploadInFlight",
    "UploadUnsettled",
    "YouTubePublisher",
    "publisher_for",
]
