"""What publishers of one-caption posts share (TikTok's, Instagram's): the publication's
marker rides in the caption, a post is listed only once it is published (so finding it ends
its processing), and the cover comes from the video (no thumbnail call)."""

from __future__ import annotations

from functools import partial
from typing import Any

from mdame_resources.providers.publisher.job import UploadJob
from mdame_resources.providers.publisher.resource import PublisherResource


class MarkedPostPublisher(PublisherResource):
    """The publisher protocol for platforms whose list call is the only search."""

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
