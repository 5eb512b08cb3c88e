"""What publishers of one-caption posts share (TikTok's, Instagram's): the publication's
marker rides in the caption, a post is listed only once it is published (so finding it ends
its processing), and the cover comes from the video (no thumbnail call)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from functools import partial
from typing import Any, Protocol

from mdame_core.state import Account, StateStore
from mdame_domain.analytics import VideoCounters
from mdame_domain.channel import ChannelApi, ChannelError, GrantRevoked, NotSent
from mdame_resources.providers.publisher.job import StatisticsUnavailable, UploadJob
from mdame_resources.providers.publisher.listing import metered_call
from mdame_resources.providers.publisher.resource import PublisherResource


class PostListing:
    """The listing half of the channel protocol for a one-caption platform: pages of posts as
    (id, caption), a listed post already published (so processed), no thumbnail call."""

    platform = ""  # as an error names it

    def __init__(self) -> None:
        self._listed: dict[str, str] = {}

    def _page(self, posts: list[tuple[str, str]], next_token: str | None) -> dict[str, Any]:
        """A page of posts in the protocol's (playlistItems) shape; the posts are remembered
        for `videos`."""
        self._listed.update(posts)
        items = [
            {"contentDetails": {"videoId": pid}, "snippet": {"description": text}}
            for pid, text in posts
        ]
        return {"items": items, "nextPageToken": next_token}

    def videos(self, video_ids: list[str], part: str) -> list[dict[str, Any]]:
        """The listed posts among `video_ids` (the list already holds what is asked)."""
        return [
            {
                "id": pid,
                "snippet": {"description": self._listed[pid]},
                "processingDetails": {"processingStatus": "succeeded"},
            }
            for pid in video_ids
            if pid in self._listed
        ]

    def set_thumbnail(self, video_id: str, jpeg: Any) -> dict[str, Any]:
        why = f"{self.platform} takes the cover from the video"
        raise ChannelError("thumbnail", 403, "forbidden", why)


class PostChannel(ChannelApi, Protocol):
    """A one-caption platform's channel: the upload protocol, and its posts' counts."""

    def statistics_batches(self, video_ids: list[str]) -> list[list[str]]:
        """The ids in the batches one call takes (those the platform can be asked about)."""
        ...

    def statistics(self, video_ids: list[str]) -> dict[str, VideoCounters]:
        """One call: the counts of the listed posts among `video_ids`."""
        ...


class MarkedPostPublisher(PublisherResource):
    """The publisher protocol for platforms whose list call is the only search."""

    def channel(self, state: StateStore, account: Account, dimension_slug: str) -> PostChannel:
        raise NotImplementedError(f"{self.provider_name} opens no channel")

    def _search(self, job: UploadJob, api: Any) -> str | None:
        """The account's posts, page by page (each call metered), for the marker. Naming the
        list makes no request, and a listed post needs no second read to confirm it."""
        listing, token = api.uploads_playlist(), None
        for _ in range(self.search_pages):
            page: dict[str, Any] = self._metered(job, partial(api.playlist_page, listing, token))
            for item in page.get("items", []):
                if job.marker in item.get("snippet", {}).get("description", ""):
                    return str(item["contentDetails"]["videoId"])
            token = page.get("nextPageToken")
            if not token:
                return None
        raise RuntimeError(f"the marker was not found in {self.search_pages} pages: search on")

    def video_statistics(
        self,
        state: StateStore,
        account: Account,
        dimension_slug: str,
        videos: Mapping[str, date],
        day: date,
    ) -> dict[str, VideoCounters]:
        """The platform's counts in the batches its API takes, each call charged to the
        account's units bucket through the ledger. A post the platform does not list (deleted,
        or private) is left out. Raises StatisticsUnavailable (the ledger or the platform
        refused) or AccountUnavailable (no stored grant)."""
        api = self.channel(state, account, dimension_slug)
        out: dict[str, VideoCounters] = {}
        for ids in api.statistics_batches(list(videos)):
            try:
                out.update(
                    metered_call(
                        state,
                        account.id,
                        f"analytics:{dimension_slug}:{day.isoformat()}",
                        partial(api.statistics, ids),
                    )
                )
            except (ChannelError, GrantRevoked, NotSent) as exc:
                raise StatisticsUnavailable(f"account {account.handle}: {exc}") from None
        return out

    def _poll_processing(self, job: UploadJob, api: Any, video_id: str) -> None:
        # A post is published (how it was found) only once the platform has processed it.
        job.state.record_video_processing(job.publication_id, "succeeded", {"polls": 0})

    def _set_thumbnail(self, job: UploadJob, api: Any, video_id: str) -> None:
        if job.thumbnail is None:
            return
        pub = job.state.get_work_unit("publication", job.publication_id)
        if pub is not None and "thumbnail" not in pub.result:
            job.state.record_thumbnail(
                job.publication_id,
                "refused",
                {"reason": f"{job.account.platform} takes the cover from the video"},
            )
