"""Publishing: an upload's recovery point and outcome, YouTube's bucket-charged uploads and
resumable sessions, thumbnails, and the account states (paused, needing
re-authorisation) that a channel's answers set."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from mdame_core.state.client import ClientBase, JsonObject, _json, _obj
from mdame_core.state.errors import NotFound
from mdame_core.state.records import AccountStatus, UploadSession, UploadStart


class Publishing(ClientBase):
    """The publishing RPCs and reads."""

    def begin_upload(
        self,
        idempotency_key: str,
        payload: JsonObject,
        units: int,
        provider: str,
        required_reviews: Sequence[str],
        grace_seconds: int,
    ) -> UploadStart:
        """The recovery point before an upload (see UploadStart)."""
        rows = self.call(
            "begin_upload",
            idempotency_key,
            _json(payload),
            units,
            provider,
            list(required_reviews),
            grace_seconds,
            self._token(),
        )
        return UploadStart(*rows[0])

    def finish_upload(
        self,
        attempt_id: int,
        status: str,
        video_id: str | None = None,
        detail: JsonObject | None = None,
    ) -> str:
        """This holder's upload outcome: succeeded, failed or unknown; the publication's state."""
        return self._scalar(
            "finish_upload", attempt_id, status, video_id, _obj(detail), self._token()
        )

    def reconcile_upload(
        self, publication_id: int, video_id: str | None, asked_at: datetime
    ) -> str:
        """Settles an unsettled upload from the channel's answer asked at `asked_at`."""
        return self._scalar("reconcile_upload", publication_id, video_id, asked_at, self._token())

    def retire_publication(self, publication_id: int, reason: str) -> str:
        """Ends a pending publication of an inactive account ('failed', its quota released);
        one with an upload in flight is refused (settle it with the channel first)."""
        return self._scalar("retire_publication", publication_id, reason, self._token())

    def begin_bucket_upload(
        self,
        idempotency_key: str,
        payload: JsonObject,
        bucket: str,
        units: int,
        provider: str,
        required_reviews: Sequence[str],
        grace_seconds: int,
    ) -> UploadStart:
        """begin_upload charged to a quota bucket ('insert', 'search', 'units'); also answers
        'skipped' for an account that is paused or needs re-authorisation."""
        rows = self.call(
            "begin_bucket_upload",
            idempotency_key,
            _json(payload),
            bucket,
            units,
            provider,
            list(required_reviews),
            grace_seconds,
            self._token(),
        )
        return UploadStart(*rows[0])

    def open_upload_session(
        self, attempt_id: int, session_uri: str, content_sha256: str, size_bytes: int
    ) -> int:
        """Commits the resumable session of this holder's attempt before any byte is sent."""
        return self._scalar(
            "open_upload_session",
            attempt_id,
            session_uri,
            content_sha256,
            size_bytes,
            self._token(),
        )

    def upload_lease(self, attempt_id: int) -> tuple[datetime, datetime]:
        """(the database's clock, when this holder's lease on its attempt ends): its requests
        to the channel end before that."""
        [(now, lease)] = self.call("upload_lease", attempt_id, self._token())
        return now, lease

    def record_upload_initiation(
        self, attempt_id: int, counted: bool = True, reason: str | None = None
    ) -> bool:
        """The attempt's initiating request is about to be sent (counted), or proved not counted
        by the channel (counted=False, with the reason)."""
        return self._scalar("record_upload_initiation", attempt_id, counted, reason, self._token())

    def record_session_gone(
        self, attempt_id: int, asked_at: datetime, recheck_s: float
    ) -> tuple[datetime, datetime]:
        """The attempt's session answered gone to a request asked at `asked_at`: (when it was
        first found gone, from when a search may settle it as not published)."""
        [(seen, settle_after)] = self.call(
            "record_session_gone", attempt_id, asked_at, recheck_s, self._token()
        )
        return seen, settle_after

    def resume_upload(self, publication_id: int) -> UploadSession:
        """Takes over the publication's unsettled upload (LeaseLost while its submitter's lease
        runs); its committed session, if any."""
        rows = self.call("resume_upload", publication_id, self._token())
        return UploadSession(*rows[0])

    def record_video_processing(
        self, publication_id: int, status: str, detail: JsonObject | None = None
    ) -> str:
        return self._scalar(
            "record_video_processing", publication_id, status, _obj(detail), self._token()
        )

    def record_thumbnail(
        self, publication_id: int, status: str, detail: JsonObject | None = None
    ) -> str:
        """set | refused | failed, once per publication; the status that stands."""
        return self._scalar("record_thumbnail", publication_id, status, _obj(detail), self._token())

    def has_upload_session(self, attempt_id: int) -> bool:
        """Whether the attempt got a session (bytes may be out). The session URI itself is a
        bearer: only resume_upload returns it, to the publication's lock holder."""
        rows = self._select(
            "SELECT 1 FROM mdame.upload_sessions WHERE attempt_id = %s", [attempt_id]
        )
        return bool(rows)

    def pause_account(self, account_id: int, reason: str) -> datetime:
        """quotaExceeded: until the next quota day; uploadLimitExceeded: 24 h. The end."""
        return self._scalar("pause_account", account_id, reason, self._token())

    def mark_needs_reauth(self, account_id: int, reason: str) -> bool:
        return self._scalar("mark_needs_reauth", account_id, reason, self._token())

    def account_status(self, account_id: int) -> AccountStatus:
        rows = self._select(
            """SELECT a.needs_reauth, a.paused_until, a.pause_reason,
                      EXISTS (SELECT FROM mdame.account_credentials c WHERE c.account_id = a.id)
                 FROM mdame.dimension_accounts a WHERE a.id = %s""",
            [account_id],
        )
        if not rows:
            raise NotFound("account_status", f"account {account_id} does not exist")
        return AccountStatus(*rows[0])
