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

# The resource key of each platform's publisher. Offline, the outbox is bound under every one
# of them: it stands in for each platform, never a platform of its own.
PUBLISHER_KEYS = {
    "youtube": "youtube_publisher",
    "tiktok": "tiktok_publisher",
    "instagram": "instagram_publisher",
}


def publisher_for(platform: str, by_platform: Mapping[str, PublisherResource]) -> PublisherResource:
    """The publisher an account of `platform` is published through (`by_platform`: each
    platform's own, keyed by platform)."""
    try:
        return by_platform[platform]
    except KeyError:
        raise ValueError(
            f"no publisher for platform {platform!r}: the platforms are {', '.join(PUBLISHER_KEYS)}"
        ) from None


__all__ = [
    "AccountUnavailable",
    "InstagramPublisher",
    "OutboxPublisher",
    "PUBLISHER_KEYS",
    "PublisherResource",
    "TikTokPublisher",
    "StatisticsUnavailable",
    "UploadJob",
    "UploadInFlight",
    "UploadUnsettled",
    "YouTubePublisher",
    "publisher_for",
]
