"""A local Instagram API server (Reels publishing with resumable uploads) for an httpx client.

It speaks the parts of Meta's documented protocol MD-AME uses. One server serves both hosts a
client talks to, so a client configured with two base URLs gives this server's `base_url` for
both (they may also be two instances sharing nothing):

    https://graph.instagram.com/v24.0/<path>           ->  {base_url}v24.0/<path>
    https://graph.instagram.com/refresh_access_token   ->  {base_url}refresh_access_token
    https://rupload.facebook.com/ig-api-upload/v24.0/<id>  ->  {base_url}ig-api-upload/v24.0/<id>

Any `vNN.N` version prefix is accepted on the graph paths (and none); the rupload `uri` a
container answers carries the version its creation request used. (Meta documents resumable
uploads for Facebook Login for Business, on graph.facebook.com; the paths and shapes are the
same there, so a client on that host maps the same way.)

- Accounts (`add_account`): an Instagram professional account (IG user id) with a long-lived
  Instagram User token (60 days). The token goes in the `access_token` parameter (query, form
  or JSON body) or an `Authorization: Bearer|OAuth <token>` header. A bad token is Meta's
  OAuthException, code 190 (subcode 458 revoked, 463 expired, none when unparseable), HTTP 400;
  no token is code 104. `GET /refresh_access_token?grant_type=ig_refresh_token&access_token=...`
  answers `{"access_token", "token_type": "bearer", "expires_in"}`; the old token stays valid
  until it expires.
- Business Login: `GET /oauth/authorize` (instagram.com's; agreed at once, back to redirect_uri
  with a code, the state and Meta's "#_"), `POST /oauth/access_token` (api.instagram.com's: the
  code for a one-hour token, `{"data": [{"access_token", "user_id", "permissions"}]}`) and
  `GET /access_token?grant_type=ig_exchange_token&client_secret=...&access_token=...` (the
  one-hour token for a long-lived one).
- `POST /<IG_USER_ID>/media` with `media_type=REELS&upload_type=resumable` (caption,
  share_to_feed, thumb_offset, cover_url, ... kept) -> `{"id", "uri"}`. Without
  upload_type=resumable a `video_url` is required, and this fake cannot fetch one: it answers
  the documented "media could not be fetched" error (code 9004, subcode 2207052).
- `POST /ig-api-upload/<vNN.N>/<CONTAINER_ID>` with `Authorization: OAuth <token>`, `offset`
  and `file_size` headers and bytes as the body -> `{"success": true, "message": "Upload
  successful."}`; a file may come in several requests, each starting at the offset the server
  holds. Upload errors have the upload server's own shape, `{"debug_info": {"retriable",
  "type", "message"}}`: a wrong offset, a file_size that changes, an expired container, a bad
  token. An interrupted request keeps the bytes that arrived; a client resumes from
  `GET /<CONTAINER_ID>?fields=video_status`, whose `uploading_phase.bytes_transferred` is the
  offset the server holds (the documented way).
- `GET /<CONTAINER_ID>?fields=status_code,status,video_status`: IN_PROGRESS until the last byte
  plus a processing delay (`set_processing_delay`, default 0.5 s), then FINISHED; ERROR or
  EXPIRED when a fault or a test says so; EXPIRED 24 h after creation when not published
  (`set_container_lifetime`); PUBLISHED after media_publish.
- `POST /<IG_USER_ID>/media_publish?creation_id=...` -> `{"id": <IG_MEDIA_ID>}`. Not FINISHED:
  code 9007 / subcode 2207027; published already or unknown: code 24 / subcode 2207008;
  expired: code -2 / subcode 2207020; ERROR: code -1 / subcode 2207053; over the publishing
  limit: code 9 / subcode 2207042 (all HTTP 400).
- `GET /<IG_USER_ID>/content_publishing_limit?fields=quota_usage,config[&since=]`: the rolling
  24-hour limit, 100 posts by default (`set_publish_limit`).
- `GET /<IG_USER_ID>/media?fields=...&limit=&after=&before=`: published media newest first with
  cursor paging (`paging.cursors.before/after`, `next`/`previous` links);
  `GET /<IG_MEDIA_ID>?fields=...` and `GET /<IG_MEDIA_ID>/insights?metric=...` (lifetime values,
  zeros until `set_insights`; the metrics Meta retired answer code 100).
- Rate limiting: `set_call_budget(calls, window_s, code)` lets that many graph calls through per
  rolling window; the next ones get the throttling error of `code` (4, 17, 32, 613 or 80002,
  `is_transient: true`, HTTP 403).

Every graph error is `{"error": {"message", "type", "code", "error_subcode"?, "is_transient"?,
"error_user_title"?, "error_user_msg"?, "fbtrace_id"}}`.

Faults are queued (FIFO, the first that matches a request fires) from tests
(`server.faults.push(...)`) or over HTTP (POST /_fake/faults); a harness in another process
also has POST /_fake/accounts, /_fake/revoke, /_fake/settings, /_fake/insights and
GET /_fake/state. State (accounts, tokens, containers, media, counters, received bytes) lives
in a directory and survives a restart.

    python -m fakes.instagram --port 8091 --state-dir .mdame/fake-instagram --account name=TOKEN

The package is split by concern: `protocol` (constants and Meta's error shapes), `faults`,
`state`, `server` (FakeInstagram: set-up and inspection), the request handler's parts
(`plumbing`, `tokens`, `login`, `containers`, `upload`, `publishing`, `media`, `control`,
routed in `handler`) and `cli` (the standalone entry).
"""

from __future__ import annotations

from fakes.instagram.cli import main
from fakes.instagram.faults import FAULTS, GRAPH_KINDS, Faults
from fakes.instagram.protocol import (
    ACCOUNT_FIELDS,
    APP_ID,
    CAPTION_MAX,
    CONTAINER_FIELDS,
    CONTAINER_LIFETIME,
    DEFAULT_PROCESSING_DELAY,
    DEFAULT_VERSION,
    IG_ERRORS,
    MEDIA_FIELDS,
    MENTIONS_MAX,
    PAGE_DEFAULT,
    PAGE_MAX,
    PUBLISH_LIMIT,
    PUBLISH_WINDOW,
    REEL_METRICS,
    RETIRED_METRICS,
    THROTTLE_MESSAGES,
    TOKEN_LIFETIME,
)
from fakes.instagram.server import FakeInstagram, connect_accounts, running
from fakes.instagram.state import State

__all__ = [
    "ACCOUNT_FIELDS",
    "APP_ID",
    "CAPTION_MAX",
    "CONTAINER_FIELDS",
    "CONTAINER_LIFETIME",
    "DEFAULT_PROCESSING_DELAY",
    "DEFAULT_VERSION",
    "FAULTS",
    "FakeInstagram",
    "Faults",
    "GRAPH_KINDS",
    "IG_ERRORS",
    "MEDIA_FIELDS",
    "MENTIONS_MAX",
    "PAGE_DEFAULT",
    "PAGE_MAX",
    "PUBLISH_LIMIT",
    "PUBLISH_WINDOW",
    "REEL_METRICS",
    "RETIRED_METRICS",
    "State",
    "THROTTLE_MESSAGES",
    "TOKEN_LIFETIME",
    "connect_accounts",
    "main",
    "running",
]
