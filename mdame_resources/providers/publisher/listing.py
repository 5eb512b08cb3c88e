"""The channel's list calls, each metered: a lost upload searched for in the channel's uploads
(reconciliation of a session found gone), processing polled, the thumbnail set."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from datetime import date, datetime
from functools import partial
from typing import Any

from mdame_core import settings
from mdame_core.state import Account, StateStore
from mdame_domain.analytics import VideoCounters
from mdame_domain.channel import ChannelApi, ChannelError, GrantRevoked, NotSent
from mdame_resources.providers.base import ProviderResource
from mdame_resources.providers.publisher.job import UploadJob, UploadUnsettled

# A finished upload is listed in the channel's uploads only after a while: a session found gone
# is settled as not published only by a second search at least this long after the first.
GONE_RECHECK_ENV = "MDAME_GONE_SESSION_RECHECK_S"


# thumbnails.set's cost in the units bucket (YouTube's quota table); a list call costs 1.
THUMBNAIL_SET_UNITS = 50


class ChannelListing(ProviderResource):
    """What a publisher asks the channel besides the upload itself: a gone session's upload
    searched for by its marker, processing polls and thumbnails.set. Every call is charged to
    the account's units bucket (reserved before, committed once it may have been charged)."""

    # A second search of the uploads settles a gone session as not published only this long
    # after the first found it gone. None: MDAME_GONE_SESSION_RECHECK_S, else 300.
    gone_recheck_s: float | None = None
    search_pages: int = 20  # uploads pages searched for a lost upload (1 unit each)
    processing_polls: int = 6
    processing_poll_s: float = 10.0
    thumbnail_quota_units: int = THUMBNAIL_SET_UNITS
    # A 5xx on thumbnails.set is the channel's hiccup, not a refusal: tried again, backing off
    # from thumbnail_retry_s, before it is recorded as failed (the publication stands).
    thumbnail_attempts: int = 3
    thumbnail_retry_s: float = 2.0

    def channel(self, state: StateStore, account: Account, dimension_slug: str) -> ChannelApi:
        """The account's channel. Raises AccountUnavailable when it cannot be opened."""
        raise NotImplementedError(f"{self.provider_name} opens no channel")

    def video_statistics(
        self,
        state: StateStore,
        account: Account,
        dimension_slug: str,
        videos: Mapping[str, date],
        day: date,
    ) -> dict[str, VideoCounters]:
        """The channel's counters of `videos` (video id -> the day it was published) as read on
        `day`; a video the channel no longer has is left out. `state` is an unfenced client:
        list calls are charged to the account's quota ledger."""
        raise NotImplementedError(f"{self.provider_name} has no statistics")

    def _api(self, job: UploadJob) -> ChannelApi:
        return self.channel(job.state, job.account, job.dimension_slug)

    def _recheck_s(self) -> float:
        if self.gone_recheck_s is not None:
            return max(0.0, float(self.gone_recheck_s))
        return float(settings.get(GONE_RECHECK_ENV))

    def check_processing(self, job: UploadJob, video_id: str) -> None:
        """Polls a published video's processing that no run recorded (a crash after
        finish_upload), and records it."""
        api = self._api(job)
        self._settle_orphaned_list_calls(job)
        self._poll_processing(job, api, video_id)

    def set_thumbnail(self, job: UploadJob, video_id: str) -> None:
        """Sets the thumbnail of a video a crashed run published without one recorded."""
        api = self._api(job)
        self._settle_orphaned_list_calls(job)
        self._set_thumbnail(job, api, video_id)

    def _set_thumbnail(self, job: UploadJob, api: Any, video_id: str) -> None:
        """thumbnails.set once per publication: skipped when an outcome is recorded. Its 50
        units are metered like a list call (reserved under a key of this publication, committed
        once it may have been charged, so a run killed mid-call leaves no open reservation and
        the ledger never counts less than the channel charged). A channel that refuses custom
        thumbnails is recorded as 'refused': the publication stands."""
        if job.thumbnail is None:
            return
        pub = job.state.get_work_unit("publication", job.publication_id)
        if pub is not None and "thumbnail" in pub.result:
            return
        attempts = max(1, self.thumbnail_attempts)
        for attempt in range(1, attempts + 1):
            job.checkpoint()
            try:
                self._metered(
                    job,
                    partial(api.set_thumbnail, video_id, job.thumbnail),
                    units=self.thumbnail_quota_units,
                )
                break
            except ChannelError as exc:
                if exc.status >= 500 and attempt < attempts:
                    job.log(
                        "thumbnail_retry",
                        video_id=video_id,
                        http_status=exc.status,
                        attempt=attempt,
                    )
                    time.sleep(self.thumbnail_retry_s * 2 ** (attempt - 1))
                    continue
                refused = exc.status == 403 and exc.reason != "quotaExceeded"
                status = "refused" if refused else "failed"
                job.state.record_thumbnail(job.publication_id, status, {"reason": exc.reason})
                job.log("thumbnail_" + status, video_id=video_id, reason=exc.reason)
                return
        job.state.record_thumbnail(job.publication_id, "set", {"video_id": video_id})
        job.log("thumbnail_set", video_id=video_id)

    def _settle_orphaned_list_calls(self, job: UploadJob) -> None:
        """A list call's reservation left open by a run that was killed around the call: the
        channel may have charged it (the request may have gone out) or not, and cannot be
        asked. It is committed, so the ledger never counts less than the channel charged
        (at most one unit more per such kill) and no reservation stays open for good."""
        for key in job.state.open_quota_keys(f"{job.work_key}:units:"):
            job.state.commit_quota(key)

    def _after_gone(
        self, job: UploadJob, api: Any, attempt_id: int, asked_at: datetime
    ) -> str | None:
        """The session no longer exists: the upload may have completed (its answer lost), and
        the channel lists a finished upload only after a while. Search the uploads for our
        marker (a match confirmed with videos.list): found, it is published. Not found, it is
        settled as not published (pending: a new session next) only by a second search asked at
        least the recheck delay after the session was first found gone; a search that is due
        already is made at once. Until then the attempt is left 'unknown' (UploadUnsettled; with
        settle_only, None) and a later run searches again."""
        recheck = self._recheck_s()
        for _ in range(3):  # with no recheck delay, the second search follows the first
            found = self._search(job, api)
            if found is not None:
                break
            seen, settle_after = job.state.record_session_gone(attempt_id, asked_at, recheck)
            if seen < asked_at and settle_after <= asked_at:
                break
            now = job.state.db_now()
            if now < settle_after:
                job.state.finish_upload(
                    attempt_id, "unknown", None, {"reason": "session gone, not listed yet"}
                )
                job.current_attempt = None
                job.log("session_gone_unsettled", found=None, search_again=settle_after.isoformat())
                if job.settle_only:
                    return None
                raise UploadUnsettled(
                    f"publication {job.publication_id}: its upload session is gone and the "
                    "channel's uploads do not list it yet; searched again before a new session",
                    settle_after,
                )
            asked_at = now
        job.state.reconcile_upload(job.publication_id, found, asked_at)
        job.current_attempt = None
        job.log("session_gone", found=found)
        if found is None:
            return None
        size = job.video.stat().st_size
        job.progress(size, size)
        self._poll_processing(job, api, found)
        self._set_thumbnail(job, api, found)
        return found

    def _search(self, job: UploadJob, api: Any) -> str | None:
        playlist = self._metered(job, api.uploads_playlist)
        token: str | None = None
        for _ in range(self.search_pages):
            page: dict[str, Any] = self._metered(job, partial(api.playlist_page, playlist, token))
            candidates = [
                item["contentDetails"]["videoId"]
                for item in page.get("items", [])
                if job.marker in item.get("snippet", {}).get("description", "")
            ]
            if candidates:
                videos = self._metered(job, partial(api.videos, candidates, "snippet,status"))
                for v in videos:
                    if job.marker in v.get("snippet", {}).get("description", ""):
                        return str(v["id"])
            token = page.get("nextPageToken")
            if not token:
                return None
        raise RuntimeError(f"the marker was not found in {self.search_pages} pages: search on")

    def _metered(self, job: UploadJob, call: Callable[[], Any], units: int = 1) -> Any:
        """One call (a list call: 1 unit), charged to the account's units bucket."""
        return metered_call(job.state, job.account.id, job.work_key, call, units)

    def _poll_processing(self, job: UploadJob, api: Any, video_id: str) -> None:
        status, polls = "processing", 0
        for polls in range(1, self.processing_polls + 1):
            found = self._metered(job, lambda: api.videos([video_id], "processingDetails"))
            if not found:
                # Removed from the channel (by its owner or the platform): the publication
                # stands as published, its video recorded gone, and the partition carries on.
                status = "removed"
                break
            status = found[0].get("processingDetails", {}).get("processingStatus", "processing")
            if status != "processing":
                break
            if polls < self.processing_polls:
                time.sleep(self.processing_poll_s)
        job.state.record_video_processing(job.publication_id, status, {"polls": polls})
        if status in ("failed", "terminated", "removed"):
            job.log("processing_failed", video_id=video_id, processing=status)


def metered_call(
    state: StateStore, account_id: int, key_prefix: str, call: Callable[[], Any], units: int = 1
) -> Any:
    """One call, charged to the account's units bucket: reserved before, committed after (also
    when no answer came: it may have been charged), released when it never left or was refused
    for quota."""
    key = f"{key_prefix}:units:{uuid.uuid4().hex}"
    if state.reserve_bucket_quota(account_id, "units", units, key) is None:
        raise ChannelError("quota ledger", 403, "quotaExceeded")
    try:
        result = call()
    except (ChannelError, GrantRevoked, NotSent) as exc:
        # Not charged: never sent (no access token, no connection), or the bucket was full.
        refused = not isinstance(exc, ChannelError) or exc.reason == "quotaExceeded"
        (state.release_quota if refused else state.commit_quota)(key)
        raise
    except BaseException:
        state.commit_quota(key)
        raise
    state.commit_quota(key)
    return result
