"""A local TikTok server: the Content Posting API's direct post and the video list.

It speaks the protocol as documented on developers.tiktok.com (Direct Post with FILE_UPLOAD,
the media transfer guide, post status, the Display API's /v2/video/list/, Login Kit tokens),
for clients that speak it with httpx.

Paths are those of open.tiktokapis.com; point a client's base URL here:
- POST /v2/oauth/token/ (form-encoded; grant_type refresh_token or authorization_code). Its
  answers are flat OAuth JSON, not the API envelope: {access_token, expires_in, open_id,
  refresh_expires_in, refresh_token, scope, token_type} or {error, error_description, log_id}.
  Refresh tokens rotate: a refresh answers a new one and the one sent stops working.
  GET /v2/auth/authorize/ agrees at once and redirects with a code (for consent flows).
- POST /v2/post/publish/creator_info/query/ (20 a minute per access token);
- POST /v2/post/publish/video/init/ (6 a minute per access token; FILE_UPLOAD, with the media
  transfer guide's chunk rules checked; PULL_FROM_URL answers 403 url_ownership_unverified);
- PUT on the upload_url it returns (/upload/?upload_id=...&upload_token=..., served here), one
  chunk per request, in order: 206 while chunks remain, 201 when the file is whole, 400 bad
  headers or size, 403 upload_url expired (one hour by default), 404 unknown upload, 416 a
  range that is not where the upload stands; each carries Content-Range: bytes 0-{UPLOADED}/{TOTAL};
- POST /v2/post/publish/status/fetch/ (30 a minute per access token): PROCESSING_UPLOAD with
  uploaded_bytes, then PUBLISH_COMPLETE `processing_delay` seconds after the last byte (a public
  post's id in publicaly_available_post_id `moderation_delay` seconds later), or FAILED with
  a fail_reason;
- POST /v2/video/list/?fields=... (the creator's PUBLIC videos, newest first, max_count 1-20,
  cursor = a create time in ms; private posts are not listed, as the docs say), and
  POST /v2/video/query/?fields=... with {"filters": {"video_ids": [1-20 ids]}} (those of them
  that are the creator's public videos); both are metered per app, as the list is.

Every API answer is TikTok's envelope {"data": {...}, "error": {"code", "message", "log_id"}}
with the documented HTTP status for its code (401 access_token_invalid, 429
rate_limit_exceeded, 403 spam_risk_too_many_posts, ...). Upload answers have no body.

Test knobs live in the state (they survive a restart) and read and set as attributes:
`min_chunk`, `max_chunk`, `max_final_chunk` (5, 64 and 128 MiB: shrink them to keep bodies
small), `upload_ttl`, `processing_delay`, `moderation_delay`, `rate_window` (the sliding window
of the per-minute limits), `post_window` (the daily post cap's window), and the per-minute
limits; `clock` (a callable, time.time by default) can be replaced to move time on.

Faults are queued (FIFO per kind of request) from tests (`server.faults.push(...)`) or over
HTTP (POST /_fake/faults). State (creators, tokens, publishes, videos, counters, bytes) lives in
a directory and survives a restart.

    python -m fakes.tiktok --port 8091 --state-dir .mdame/fake-tiktok --creator name=REFRESH

The package is split by concern: `protocol` (constants and TikTok's envelope), `faults`,
`state`, `model` (TikTok's rules: the limits, chunk plans, post caps, a publish's status),
`server` (FakeTikTok: set-up and inspection), the request handler's parts (`plumbing`,
`auth`, `oauth`, `posting`, `upload`, `videos`, `control`, routed in `handler`) and `cli`.
"""

from __future__ import annotations

from fakes.tiktok.cli import main
from fakes.tiktok.faults import FAULTS
from fakes.tiktok.protocol import (
    DEFAULT_LIMITS,
    DEFAULT_SCOPES,
    EXPIRED_FAIL_REASON,
    LISTED_TEXT_MAX,
    OAUTH_ERROR_STATUS,
    PRIVACY_LEVELS,
    PRIVATE_OPTIONS,
    PUBLIC_OPTIONS,
    TITLE_MAX_UTF16,
    VIDEO_FIELDS,
    VIDEO_TYPES,
    MiB,
)
from fakes.tiktok.server import FakeTikTok, connect_accounts, open_id_for, running
from fakes.tiktok.state import State

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_SCOPES",
    "EXPIRED_FAIL_REASON",
    "FAULTS",
    "FakeTikTok",
    "LISTED_TEXT_MAX",
    "MiB",
    "OAUTH_ERROR_STATUS",
    "PRIVACY_LEVELS",
    "PRIVATE_OPTIONS",
    "PUBLIC_OPTIONS",
    "State",
    "TITLE_MAX_UTF16",
    "VIDEO_FIELDS",
    "VIDEO_TYPES",
    "connect_accounts",
    "main",
    "open_id_for",
    "running",
]
