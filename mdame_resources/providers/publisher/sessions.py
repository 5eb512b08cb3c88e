"""Resumable upload sessions: committed before the first byte, chunks sent once, resumed from
what the session holds, every request ended before the holder's lease."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from mdame_core import settings
from mdame_domain.channel import (
    QUOTA_REASONS,
    ChannelError,
    GrantRevoked,
    NotSent,
    TransferInterrupted,
)
from mdame_domain.media_store import sha256_file
from mdame_domain.outbox import ContentMismatch
from mdame_resources.providers.publisher.job import UploadJob
from mdame_resources.providers.publisher.listing import ChannelListing

# A request to a session ends this long before the holder's lease (see request_margin_s).
REQUEST_MARGIN_ENV = "MDAME_UPLOAD_REQUEST_MARGIN_S"


class UploadSessions(ChannelListing):
    """videos.insert's resumable session: opened (its URI committed before the first byte),
    fed chunk by chunk, asked where it stands after an interruption, and settled; a session
    found gone is reconciled through the channel's listing (ChannelListing)."""

    # The longest one upload request may still be in flight after its holder lost the lock (it
    # checks the fence between requests): another holder settles the upload only after this.
    upload_grace_s: int = 120
    # How long before its lease a request to a session must end: the network's delay and the
    # clocks' drift. At most a quarter of upload_grace_s: the margin comes out of the grace,
    # never out of the lock's own time. None: MDAME_UPLOAD_REQUEST_MARGIN_S, else 10.
    request_margin_s: float | None = None
    # Whether the channel counts an initiation once it receives it, answered or not (YouTube):
    # then its insert reservation stays spent whatever became of the session, unless its answer
    # proved otherwise. False: only a published video spends it.
    initiation_counted: bool = True
    chunk_size: int = 8 * 1024 * 1024
    mime_type: str = "video/mp4"

    def _margin_s(self) -> float:
        margin = self.request_margin_s
        if margin is None:
            margin = settings.get(REQUEST_MARGIN_ENV)
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

    def chunk_length(self, session_uri: str, offset: int, size: int) -> int:
        """How many bytes the chunk at `offset` carries: chunk_size, unless the channel cuts
        the file its own way (TikTok's chunks are declared when the upload is initialized)."""
        return self.chunk_size

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
        why = self._uncounted_initiation(exc)
        if why is not None:
            job.state.record_upload_initiation(attempt_id, counted=False, reason=why[:500])

    def _uncounted_initiation(self, exc: BaseException) -> str | None:
        """Why the failed initiation cannot have been counted by the channel, or None (it may
        have been: its quota stays spent). A client sends an initiation refused for its token
        once more with a fresh one: the failure is the second request's (a 401 here is both
        refused; no answer to the second may have been counted; GrantRevoked or NotSent, the
        second never left), and the first, refused, cost nothing."""
        if isinstance(exc, NotSent | GrantRevoked):
            return f"not sent: {exc}"
        if isinstance(exc, ChannelError) and (exc.reason == "quotaExceeded" or exc.status == 401):
            return f"refused before counting: HTTP {exc.status} {exc.reason}"
        return None

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
                data = f.read(self.chunk_length(uri, offset, size))
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
