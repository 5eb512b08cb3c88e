"""The publisher resource: videos.insert through a resumable session that survives any crash,
its refusals turned into alerts and paused or reconnected accounts."""

from __future__ import annotations

from mdame_core.state import LeaseHeld
from mdame_domain.channel import (
    QUOTA_FIXES,
    QUOTA_REASONS,
    AppRefused,
    ChannelError,
    GrantRevoked,
)
from mdame_resources.alerts import raise_environment_alert
from mdame_resources.providers.publisher.grants import reconnect_command
from mdame_resources.providers.publisher.job import (
    AccountUnavailable,
    UploadInFlight,
    UploadJob,
)
from mdame_resources.providers.publisher.sessions import UploadSessions


class PublisherResource(UploadSessions):
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

    upload_quota_units: int = 1  # videos.insert: 1 call of the insert bucket

    @property
    def upload_quota_bucket(self) -> str:
        return "insert"

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
        except AppRefused as exc:
            # The deployment's app credentials, not this account's grant: fixed once, for all.
            raise_environment_alert(
                job.state, job.dimension_slug, "provider_refused", f"{job.account.platform}: {exc}"
            )
            self._abandon(job, attempt_id, "failed" if attempt_id else "unknown", "app refused")
            raise AccountUnavailable(f"account {job.account.handle}: {exc}") from None
        except GrantRevoked as exc:
            # Only a refused refresh gets here: a token refused by the API was refreshed once and
            # the request sent again. Said with the platform's own words, and the fix.
            job.state.mark_needs_reauth(job.account.id, str(exc)[:500])
            job.log("needs_reauth", account_id=job.account.id)
            raise_environment_alert(
                job.state,
                job.dimension_slug,
                "reauth_needed",
                f"account {job.account.handle}: {exc}; run "
                + reconnect_command(job.account.platform, job.dimension_slug, job.account.handle),
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
                    f"account {job.account.handle}: {job.account.platform} answered {exc.reason}; "
                    f"paused until {until.isoformat()}"
                    + (f"; {QUOTA_FIXES[exc.reason]}" if exc.reason in QUOTA_FIXES else ""),
                )
                self._abandon(job, attempt_id, "failed" if attempt_id else "unknown", exc.reason)
                raise AccountUnavailable(f"account {job.account.handle}: {exc.reason}") from None
            self._abandon(job, attempt_id, "failed", exc.reason)
            raise
        except LeaseHeld as exc:
            # A killed run's upload: its answer may still come until its lease ends. Waiting
            # is not failing; nothing of this holder's is in flight (the takeover was refused).
            raise UploadInFlight(
                f"publication {job.publication_id}: an interrupted upload may still be answered",
                exc.until,
            ) from None
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
            reconnect = reconnect_command(job.account.platform, slug, handle)
            fix = f"run {reconnect} once it may upload"
            cause = "reauth_needed"
        else:
            fix = f"fix the video's metadata in dimensions/{slug}.yaml ({job.account.platform})"
            cause = "provider_refused"
        job.log("channel_refused", account_id=job.account.id, reason=exc.reason)
        raise_environment_alert(job.state, slug, cause, f"account {handle}: {exc}; {fix}")
