"""Publishing channels, all through one resumable protocol (mdame_domain.channel).

`PublisherResource` holds the whole publishing logic: sessions committed before the first byte,
chunks sent once, resumes from what the session holds, reconciliation by a search of the
channel's own uploads, processing and thumbnails, every list call metered, every request to a
session ended before the holder's lease. Its implementations
differ only in the channel they open for an account: the local outbox offline
(`OutboxPublisher`), the YouTube Data API in production (`YouTubePublisher`). So the demo, the
pipeline tests and the crash matrix run the publishing code production runs.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from functools import partial
from pathlib import Path
from typing import Any

from mdame_core.settings import mdame_env, mdame_home, seconds_setting
from mdame_core.state import Account, StateStore
from mdame_domain.analytics import (
    VideoCounters,
    batches,
    parse_statistics,
    simulated_counters,
)
from mdame_domain.channel import (
    QUOTA_REASONS,
    ChannelApi,
    ChannelError,
    GrantRevoked,
    NotSent,
    TransferInterrupted,
)
from mdame_domain.credentials import (
    CredentialError,
    associated_data,
    key_grace_s,
    load_master_keys,
    open_stored_grant,
)
from mdame_domain.media_store import sha256_file
from mdame_domain.outbox import ContentMismatch, OutboxChannel
from mdame_resources.alerts import raise_environment_alert
from mdame_resources.providers.base import ProviderResource


class StatisticsUnavailable(Exception):
    """The channel did not answer a statistics read (quota exhausted, a refused grant, an API
    error): this account's counters wait for the next read."""


class AccountUnavailable(Exception):
    """The account may not be published to now (paused by the channel, its grant revoked or
    missing): nothing is half published, the publication waits."""


class UploadUnsettled(Exception):
    """The upload's session is gone and the channel's uploads do not list it (yet): it may have
    completed, its answer lost. Nothing more is sent; the attempt is left 'unknown' and a later
    run searches again before it is settled."""


# A finished upload is listed in the channel's uploads only after a while: a session found gone
# is settled as not published only by a second search at least this long after the first.
GONE_RECHECK_ENV = "MDAME_GONE_SESSION_RECHECK_S"
GONE_RECHECK_DEFAULT_S = 300.0
# A request to a session ends this long before the holder's lease (see request_margin_s).
REQUEST_MARGIN_ENV = "MDAME_UPLOAD_REQUEST_MARGIN_S"
REQUEST_MARGIN_DEFAULT_S = 10.0


@dataclass
class UploadJob:
    """One publication's upload, handed to the publisher by the publications stage.

    `state` is the stage's fenced store: every RPC the publisher makes goes through it.
    `attempt_id` is the attempt begin_bucket_upload just recorded ('submit'), or None to take
    over the publication's unsettled upload ('reconcile'). `settle_only`: take it over only to
    learn its outcome, never sending another byte (an account no longer published to).
    `progress(sent, total)` is called after every chunk the channel confirmed."""

    state: StateStore
    dimension_slug: str
    work_key: str
    publication_id: int
    account: Account
    attempt_id: int | None
    video: Path
    sha256: str
    body: dict[str, Any]  # the validated videos.insert resource (snippet, status)
    notify_subscribers: bool
    marker: str
    checkpoint: Callable[[], None]
    log: Callable[..., None]
    progress: Callable[[int, int], None] = lambda sent, total: None
    current_attempt: int | None = None  # the attempt this holder is driving
    thumbnail: Path | None = None  # the render's thumbnail JPEG, set once published
    settle_only: bool = False


class PublisherResource(ProviderResource):
    """videos.insert through a resumable session that survives any crash.

    Commit points (each one RPC): begin_bucket_upload (insert quota, attempt 'submitted'),
    open_upload_session (the session URI, SHA-256 and size, before the first byte),
    finish_upload (the video id), record_video_processing, record_thumbnail. After any
    interruption the next run takes the upload over (resume_upload) and asks the session where
    it stands: it resumes from what the session holds, or takes the completed video. A session
    that is gone is never replaced before the channel's uploads were searched twice for this
    publication's marker (a match confirmed with videos.list), the second search at least
    gone_recheck_s after the first found it gone. Chunks are sent once each, never retried by a
    client; every list call is charged to the account's units bucket. The initiation's insert
    quota stays spent once the request may have reached the channel (initiation_counted).

    Each request to a session (and the token refresh before it) ends by a wall-clock deadline:
    this holder's lease on the attempt, read from the database before the request, less
    request_margin_s. Another holder takes the upload over only once that lease is over."""

    # The longest one upload request may still be in flight after its holder lost the lock (it
    # checks the fence between requests): another holder settles the upload only after this.
    upload_grace_s: int = 120
    # How long before its lease a request to a session must end: the network's delay and the
    # clocks' drift. At most a quarter of upload_grace_s: the margin comes out of the grace,
    # never out of the lock's own time. None: MDAME_UPLOAD_REQUEST_MARGIN_S, else 10.
    request_margin_s: float | None = None
    # A second search of the uploads settles a gone session as not published only this long
    # after the first found it gone. None: MDAME_GONE_SESSION_RECHECK_S, else 300.
    gone_recheck_s: float | None = None
    # Whether the channel counts an initiation once it receives it, answered or not (YouTube):
    # then its insert reservation stays spent whatever became of the session, unless its answer
    # proved otherwise. False: only a published video spends it.
    initiation_counted: bool = True
    chunk_size: int = 8 * 1024 * 1024
    search_pages: int = 20  # uploads pages searched for a lost upload (1 unit each)
    processing_polls: int = 6
    processing_poll_s: float = 10.0
    upload_quota_units: int = 1  # videos.insert: 1 call of the insert bucket
    thumbnail_quota_units: int = 50  # thumbnails.set, units bucket
    # A 5xx on thumbnails.set is the channel's hiccup, not a refusal: tried again, backing off
    # from thumbnail_retry_s, before it is recorded as failed (the publication stands).
    thumbnail_attempts: int = 3
    thumbnail_retry_s: float = 2.0
    mime_type: str = "video/mp4"

    @property
    def upload_quota_bucket(self) -> str:
        return "insert"

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
        return seconds_setting(GONE_RECHECK_ENV, GONE_RECHECK_DEFAULT_S)

    def _margin_s(self) -> float:
        margin = self.request_margin_s
        if margin is None:
            margin = seconds_setting(REQUEST_MARGIN_ENV, REQUEST_MARGIN_DEFAULT_S)
        return min(max(0.0, float(margin)), max(0.0, float(self.upload_grace_s)) / 4)

    def _bound(self, job: UploadJob, api: Any, attempt_id: int) -> datetime:
        """Bounds the next request to the session (and its token refresh) by this holder's lease
        on the attempt, read from the database (a fenced read: refused once the lock moved on),
        less the margin. The deadline runs on the wall clock, which, unlike time.monotonic,
        goes on while the machine is suspended. Returns the database's clock, read before the
        request (when the channel was asked)."""
        started = time.time()
        now, lease_end = job.state.upload_lease(attempt_id)
        self.set_deadline(api, started + (lease_end - now).total_seconds() - self._margin_s())
        return now

    def set_deadline(self, api: Any, deadline: float) -> None:
        """Makes the channel's client end its session requests by `deadline` (time.time()).
        The local outbox's requests are file operations: nothing to bound."""

    def upload(self, job: UploadJob) -> str | None:
        """The video id once published; None when the upload went back to pending (begin
        again: a new session). Raises AccountUnavailable (nothing half published), or, after an
        interruption or with a gone session not yet found (UploadUnsettled), with the attempt
        left 'unknown' for the next run to resume."""
        attempt_id = job.attempt_id
        # Set before anything can fail: whatever fails from here on is settled by _abandon,
        # never left 'uploading' with its attempt 'submitted' and its quota reserved.
        job.current_attempt = attempt_id
        try:
            api = self._api(job)
            self._settle_orphaned_list_calls(job)
            if attempt_id is None:
                return self._resume(job, api)
            return self._fresh(job, api, attempt_id)
        except AccountUnavailable as exc:
            # No grant, or one that cannot be opened: refused before any session, nothing sent.
            raise_environment_alert(job.state, job.dimension_slug, "reauth_needed", str(exc))
            self._abandon(job, attempt_id, "failed", "account unavailable")
            raise
        except GrantRevoked as exc:
            job.state.mark_needs_reauth(job.account.id, str(exc))
            job.log("needs_reauth", account_id=job.account.id)
            raise_environment_alert(
                job.state,
                job.dimension_slug,
                "reauth_needed",
                f"account {job.account.handle}: the grant was revoked; run `mdame accounts "
                f"connect {job.dimension_slug} --account {job.account.handle}`",
            )
            self._abandon(job, attempt_id, "failed" if attempt_id else "unknown", "invalid_grant")
            raise AccountUnavailable(f"account {job.account.handle}: {exc}") from None
        except ChannelError as exc:
            if exc.permanent:
                self._refused(job, exc)
                self._abandon(job, attempt_id, "failed", exc.reason)
                raise AccountUnavailable(f"account {job.account.handle}: {exc}") from None
            if exc.reason in QUOTA_REASONS:
                until = job.state.pause_account(job.account.id, exc.reason)
                job.log(
                    "account_paused",
                    account_id=job.account.id,
                    reason=exc.reason,
                    until=until.isoformat(),
                )
                raise_environment_alert(
                    job.state,
                    job.dimension_slug,
                    "quota_exhausted",
                    f"account {job.account.handle}: YouTube answered {exc.reason}; "
                    f"paused until {until.isoformat()}",
                )
                self._abandon(job, attempt_id, "failed" if attempt_id else "unknown", exc.reason)
                raise AccountUnavailable(f"account {job.account.handle}: {exc.reason}") from None
            self._abandon(job, attempt_id, "failed", exc.reason)
            raise
        except BaseException as exc:
            # 'failed' settles an attempt that has no session (nothing was sent); one with a
            # session becomes 'unknown', resumed from the session by the next run.
            self._abandon(job, attempt_id, "failed", f"interrupted: {type(exc).__name__}")
            raise

    def _refused(self, job: UploadJob, exc: ChannelError) -> None:
        """A refusal the same request would meet again: said once, with the channel's own
        words and the fix, instead of being retried. A channel that may not upload (401/403)
        waits for its account to be connected again; a refused request (400/404) for the
        metadata to be fixed (the dimension's YAML), its publication pending meanwhile."""
        handle, slug = job.account.handle, job.dimension_slug
        if exc.status in (401, 403):
            job.state.mark_needs_reauth(job.account.id, f"{exc.reason}: {exc.message}"[:500])
            fix = f"run `mdame accounts connect {slug} --account {handle}` once it may upload"
            cause = "reauth_needed"
        else:
            fix = f"fix the video's metadata in dimensions/{slug}.yaml (youtube: block)"
            cause = "provider_refused"
        job.log("channel_refused", account_id=job.account.id, reason=exc.reason)
        raise_environment_alert(job.state, slug, cause, f"account {handle}: {exc}; {fix}")

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

    def _abandon(self, job: UploadJob, attempt_id: int | None, status: str, why: str) -> None:
        """Leaves this holder's attempt settled enough for the next run: 'failed' when nothing
        can be out (refused before a session), 'unknown' otherwise (resume from the session)."""
        attempt = job.current_attempt
        if attempt is None:
            return
        try:
            if status == "failed" and job.state.has_upload_session(attempt):
                status = "unknown"  # a session exists: bytes may be out
            job.state.finish_upload(attempt, status, None, {"reason": why})
        except Exception:  # noqa: BLE001 - best effort; the lease lets the next run take it
            return

    def _fresh(self, job: UploadJob, api: Any, attempt_id: int) -> str | None:
        if (actual := sha256_file(job.video)) != job.sha256:
            # Refused before a session exists: not one byte is out, the attempt is over.
            job.state.finish_upload(attempt_id, "failed", None, {"reason": "content mismatch"})
            raise ContentMismatch(
                f"publication {job.publication_id}: the file to upload has SHA-256 "
                f"{actual[:12]}, not the approved {job.sha256[:12]}; nothing uploaded"
            )
        size = job.video.stat().st_size
        job.current_attempt = attempt_id
        job.checkpoint()
        self._bound(job, api, attempt_id)
        if self.initiation_counted:
            # From here the channel may count the call, whatever becomes of it.
            job.state.record_upload_initiation(attempt_id)
        try:
            uri = api.initiate(job.body, job.notify_subscribers, size, self.mime_type)
        except (TransferInterrupted, ChannelError, GrantRevoked) as exc:
            self._take_back_initiation(job, attempt_id, exc)
            if isinstance(exc, GrantRevoked) or (
                isinstance(exc, ChannelError) and (exc.reason in QUOTA_REASONS or exc.permanent)
            ):
                raise
            reason = "not sent" if isinstance(exc, NotSent) else getattr(exc, "reason", "no answer")
            # No session was committed, so no byte of the file was sent: nothing can exist (the
            # insert quota stays spent if the call may have been counted).
            job.state.finish_upload(attempt_id, "failed", None, {"reason": f"initiate: {reason}"})
            job.current_attempt = None
            job.log("initiate_failed", reason=reason)
            raise
        job.state.open_upload_session(attempt_id, uri, job.sha256, size)
        job.log("session_opened", attempt_id=attempt_id, size=size)
        return self._transfer(job, api, attempt_id, uri, size, 0)

    def _take_back_initiation(self, job: UploadJob, attempt_id: int, exc: BaseException) -> None:
        """Records the initiation as not counted when its failure proves the channel did not
        count it: it never left (no access token, no connection, past its deadline), or was
        answered quotaExceeded (nothing fits the bucket) or 401 (no credentials to charge)."""
        if not self.initiation_counted:
            return
        if isinstance(exc, NotSent | GrantRevoked):
            why = f"not sent: {exc}"
        elif isinstance(exc, ChannelError) and (exc.reason == "quotaExceeded" or exc.status == 401):
            why = f"refused before counting: HTTP {exc.status} {exc.reason}"
        else:
            return
        job.state.record_upload_initiation(attempt_id, counted=False, reason=why[:500])

    def _resume(self, job: UploadJob, api: Any) -> str | None:
        session = job.state.resume_upload(job.publication_id)
        job.current_attempt = session.attempt_id
        if session.session_uri is None or session.size_bytes is None:
            # Crashed before the session was committed: not one byte was sent.
            job.state.reconcile_upload(job.publication_id, None, job.state.db_now())
            job.current_attempt = None
            job.log("resume_nothing_sent", attempt_id=session.attempt_id)
            return None
        if (
            session.content_sha256 != job.sha256
            or job.video.stat().st_size != session.size_bytes
            or sha256_file(job.video) != session.content_sha256
        ):
            raise RuntimeError(
                f"publication {job.publication_id}: the file to resume is not the one the session "
                "was opened for"
            )
        job.checkpoint()
        asked_at = self._bound(job, api, session.attempt_id)
        answer = api.query(session.session_uri, session.size_bytes)
        if answer.gone:
            return self._after_gone(job, api, session.attempt_id, asked_at)
        if answer.video is not None:
            return self._finish(job, api, session.attempt_id, answer.video)
        if job.settle_only:
            # The session holds part of the file and nobody sends the rest (this holder has the
            # lease): no video can come of it. Settled as not published, its quota released.
            job.state.finish_upload(
                session.attempt_id, "failed", None, {"reason": "abandoned: not sending the rest"}
            )
            job.current_attempt = None
            job.log("upload_abandoned", attempt_id=session.attempt_id, held=answer.next_byte)
            return None
        job.log("resume", attempt_id=session.attempt_id, from_byte=answer.next_byte)
        return self._transfer(
            job,
            api,
            session.attempt_id,
            session.session_uri,
            session.size_bytes,
            answer.next_byte,
        )

    def _transfer(
        self, job: UploadJob, api: Any, attempt_id: int, uri: str, size: int, offset: int
    ) -> str | None:
        with job.video.open("rb") as f:
            while True:
                job.checkpoint()
                f.seek(offset)
                data = f.read(self.chunk_size)
                asked_at = self._bound(job, api, attempt_id)
                answer = api.send_chunk(uri, data, offset, size)
                if answer.gone:
                    return self._after_gone(job, api, attempt_id, asked_at)
                if answer.video is not None:
                    return self._finish(job, api, attempt_id, answer.video)
                offset = answer.next_byte
                job.progress(offset, size)
                job.log(
                    "upload_progress",
                    attempt_id=attempt_id,
                    sent=offset,
                    total=size,
                    percent=round(100 * offset / size, 1),
                )

    def _finish(self, job: UploadJob, api: Any, attempt_id: int, video: dict[str, Any]) -> str:
        video_id = str(video["id"])
        size = job.video.stat().st_size
        job.progress(size, size)
        job.state.finish_upload(attempt_id, "succeeded", video_id, {"session": "completed"})
        job.log("uploaded", video_id=video_id)
        job.current_attempt = None  # settled: nothing to abandon any more
        self._poll_processing(job, api, video_id)
        self._set_thumbnail(job, api, video_id)
        return video_id

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
                    f"channel's uploads do not list it; searched again from "
                    f"{settle_after.isoformat()} before a new session"
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
        return _metered_call(job.state, job.account.id, job.work_key, call, units)

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


class OutboxPublisher(PublisherResource):
    """The local outbox: $MDAME_HOME/outbox/<dimension>/<video_id>/ (video.mp4, metadata.json,
    thumbnail.jpg), reached through the same protocol as YouTube (OutboxChannel)."""

    root: str = ""  # empty: $MDAME_HOME/outbox
    processing_poll_s: float = 0.0  # the outbox has processed a video once it holds it
    gone_recheck_s: float | None = 0.0  # it lists a video the moment it holds it
    initiation_counted: bool = False  # a session costs nothing: only a published video does

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


class YouTubePublisher(PublisherResource):
    """The YouTube Data API: each account's channel is opened with its sealed grant."""

    client_secrets_file: str = ""  # Google's installed-app client JSON (client id and secret)
    root_url: str = ""  # empty: MDAME_YOUTUBE_ROOT_URL, else Google's
    token_uri: str = ""  # empty: MDAME_GOOGLE_TOKEN_URI, else Google's
    master_key_file: str = ""  # empty: MDAME_MASTER_KEY, else $MDAME_HOME/master.key
    timeout_s: float = 60.0

    def _client(self) -> tuple[str, str]:
        if not self.client_secrets_file:
            raise RuntimeError("YouTubePublisher needs client_secrets_file")
        raw = json.loads(Path(self.client_secrets_file).read_text())
        app = raw.get("installed") or raw.get("web") or {}
        return str(app["client_id"]), str(app["client_secret"])

    def channel(self, state: StateStore, account: Account, dimension_slug: str) -> ChannelApi:
        """The account's API client; its refresh token is decrypted here, in memory only."""
        from mdame_resources.providers.youtube_api import YouTubeApi

        stored = state.account_grant(account.id)
        if stored is None:
            raise AccountUnavailable(
                f"account {account.handle} has no stored grant: run "
                f"`mdame accounts connect {dimension_slug} --account {account.handle}`"
            )
        try:
            # The current key and the one a rotation replaced: a reader not yet redeployed after
            # a rotation keeps working for the grace period.
            keys = load_master_keys(
                Path(self.master_key_file) if self.master_key_file else mdame_home() / "master.key"
            )
            grant = open_stored_grant(
                keys,
                associated_data(mdame_env(), account.platform, account.handle),
                stored.grant(),
                key_grace_s(),
            )
        except CredentialError as exc:
            raise AccountUnavailable(
                f"account {account.handle}: its stored grant cannot be opened ({exc}); check "
                "MDAME_MASTER_KEY / MDAME_MASTER_KEY_FILE, or run `mdame accounts connect "
                f"{dimension_slug} --account {account.handle}` again"
            ) from None
        client_id, client_secret = self._client()
        return YouTubeApi(
            str(grant["refresh_token"]),
            client_id,
            client_secret,
            root_url=self.root_url or None,
            token_uri=self.token_uri or None,
            timeout_s=self.timeout_s,
        )

    def set_deadline(self, api: Any, deadline: float) -> None:
        api.deadline = deadline  # a YouTubeApi: its session requests and their token refresh

    def video_statistics(
        self,
        state: StateStore,
        account: Account,
        dimension_slug: str,
        videos: Mapping[str, date],
        day: date,
    ) -> dict[str, VideoCounters]:
        """videos.list(part="statistics") in calls of up to 50 ids, 1 unit each, charged to the
        account's units bucket through the ledger before each call. Raises
        StatisticsUnavailable (the ledger or the channel refused: quota, grant, API error) or
        AccountUnavailable (no stored grant)."""
        api = self.channel(state, account, dimension_slug)
        out: dict[str, VideoCounters] = {}
        for ids in batches(list(videos)):
            try:
                items = _metered_call(
                    state,
                    account.id,
                    f"analytics:{dimension_slug}:{day.isoformat()}",
                    partial(api.videos, ids, "statistics"),
                )
            except (ChannelError, GrantRevoked) as exc:
                raise StatisticsUnavailable(f"account {account.handle}: {exc}") from None
            out.update(parse_statistics(items))
        return out


def _metered_call(
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
