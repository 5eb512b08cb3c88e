"""The resumable channel protocol every publisher speaks (YouTube Data API v3's shape).

A channel takes a video in a session that exists before the first byte: `initiate` returns the
session's URI (committed by the caller before any byte is sent), `send_chunk` sends one chunk
once, `query` asks the session where it stands. A publication whose answer was lost is found
again by searching the channel's own uploads for the publication's marker and confirming with
`videos`. The outbox (offline) and YouTube (production) implement it alike, so the publishing
code production runs is the code every test and the demo run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

# Refusals that end when the channel's quota window does: YouTube's, TikTok's daily post cap
# and its unaudited app's daily cap on posting creators, and Instagram's 24-hour publishing limit.
QUOTA_REASONS = (
    "quotaExceeded",
    "uploadLimitExceeded",
    "spam_risk_too_many_posts",
    "reached_active_user_cap",
    "content_publishing_limit",
)
# What lifts a quota for good, where waiting for its window is not all there is to do.
QUOTA_FIXES = {
    "reached_active_user_cap": (
        "an unaudited TikTok app lets 5 creators post in 24 hours; have the app audited "
        "(developers.tiktok.com) to post for more"
    ),
}


class ChannelError(Exception):
    """The channel refused a call. `reason` is the error's reason (quotaExceeded, ...) and
    `message` the channel's own words, when it sent any."""

    def __init__(self, what: str, status: int, reason: str, message: str = "") -> None:
        text = f"{what}: HTTP {status} {reason}"
        super().__init__(f"{text}: {message}" if message else text)
        self.status, self.reason, self.message = status, reason, message

    @property
    def permanent(self) -> bool:
        """A refusal the same request will meet again (a bad request, a channel that may not
        upload): not a quota, which resets, nor a 5xx or 429, which pass."""
        return self.status in (400, 401, 403, 404) and self.reason not in QUOTA_REASONS


class GrantRevoked(Exception):
    """The refresh token was revoked or expired (invalid_grant): the account needs re-auth."""


class AppRefused(GrantRevoked):
    """The platform refused the app's own client credentials (invalid_client), or they are not
    set: no account's grant is at fault, so none is marked for a reconnect; every account of
    the platform waits until the deployment's key or secret is fixed. Nothing was sent."""


class TransferInterrupted(Exception):
    """A chunk or status query got no answer: the outcome is unknown, ask the session next."""


class NotSent(TransferInterrupted):
    """The request never left: it could not start before its deadline, its access token could
    not be had, or no connection was made. The channel saw nothing of it."""


@dataclass(frozen=True)
class SessionState:
    """What the session says: `video` when the upload completed, else the next byte to send;
    `gone` when the session no longer exists (404/410)."""

    next_byte: int = 0
    video: dict[str, Any] | None = None
    gone: bool = False


class ChannelApi(Protocol):
    """One account's channel. Reads and thumbnails are metered by the caller."""

    def initiate(
        self, body: dict[str, Any], notify_subscribers: bool, size: int, mime: str
    ) -> str: ...

    def query(self, session_uri: str, size: int) -> SessionState: ...

    def send_chunk(self, session_uri: str, data: bytes, start: int, size: int) -> SessionState: ...

    def uploads_playlist(self) -> str: ...

    def playlist_page(self, playlist_id: str, page_token: str | None) -> dict[str, Any]: ...

    def videos(self, video_ids: list[str], part: str) -> list[dict[str, Any]]: ...

    def set_thumbnail(self, video_id: str, jpeg: Path) -> dict[str, Any]: ...
