"""A local YouTube Data API v3 server for the real google-api-python-client.

It speaks the parts of the protocol MD-AME uses, as the client sends them when its discovery
document's rootUrl points here:
- resumable uploads: POST /upload/youtube/v3/videos?uploadType=resumable (metadata as JSON,
  X-Upload-Content-Length/-Type) -> 200 with the session URI in Location; chunk PUTs with
  Content-Range -> 308 with Range, or 200 with the video resource when the last byte arrived;
  a status query (PUT, Content-Range: bytes */N, empty body) answers the same way;
- videos.list (id=..., at most 50; part=snippet,status,processingDetails,statistics; the
  statistics are zeros until a test sets them with `set_statistics`),
  channels.list (mine=true, part=contentDetails), playlistItems.list (the uploads playlist,
  newest first, paged);
- thumbnails.set as a media upload: POST /upload/youtube/v3/thumbnails/set?videoId=...
  (the JPEG as the body, 50 units; 403 forbidden on a channel that may not use custom
  thumbnails, see `allow_custom_thumbnails`);
- an OAuth token endpoint (POST /token: refresh_token and authorization_code grants) and a
  consent endpoint (GET /o/oauth2/auth) that agrees at once and redirects with a code;
- the June-2026 quota model per channel and Pacific-time day: videos.insert and search.list
  each have a bucket of 100 calls, everything else a bucket of 10,000 units (list calls cost 1).
  A videos.insert is counted when its initiating request (the resumable POST) is received, as
  YouTube counts every request, answered or not, invalid or refused: a session that never
  completes has cost its call, one answered 5xx or 400 too. Only a quotaExceeded answer (the
  bucket is full) and a 401 (no channel to charge) cost nothing. Every initiation received is
  also listed in the state's "initiations" (channel, the video's description, counted or not),
  so a test can tell an initiation the channel never saw from one it did.

An access token is refused (401 authError, Google's body) once it is unknown: never issued, or
expired early by the `expire_token` fault. Every request but the token endpoint's carries one,
the session's PUTs too. The requests answered 401 are listed in the state's "unauthorized"
(their kinds: initiate, chunk, status, list, thumbnail).

Faults are queued (FIFO per kind of request) from tests (`server.faults.push(...)`) or over
HTTP (POST /_fake/faults). State (channels, sessions, videos, counters, received bytes) lives
in a directory and survives a restart, so a test can kill either side at any point.

    python -m fakes.youtube --port 8089 --state-dir .mdame/fake-youtube

The package is split by concern: `protocol` (quotas and Google's answers), `faults`, `state`,
`server` (FakeYouTube: set-up and inspection), the request handler's parts (`plumbing`,
`oauth`, `upload`, `session`, `thumbnails`, `lists`, `control`, routed in `handler`) and
`cli`.
"""

from __future__ import annotations

from fakes.youtube.cli import main
from fakes.youtube.faults import FAULTS
from fakes.youtube.protocol import (
    DEFAULT_LIMITS,
    INVALID_TOKEN,
    LIST_COST,
    PACIFIC,
    THUMBNAIL_COST,
    THUMBNAIL_MAX_BYTES,
    UNAUTHENTICATED,
    quota_day,
)
from fakes.youtube.server import FakeYouTube, connect_accounts, running
from fakes.youtube.state import State

__all__ = [
    "DEFAULT_LIMITS",
    "FAULTS",
    "FakeYouTube",
    "INVALID_TOKEN",
    "LIST_COST",
    "PACIFIC",
    "State",
    "THUMBNAIL_COST",
    "THUMBNAIL_MAX_BYTES",
    "UNAUTHENTICATED",
    "connect_accounts",
    "main",
    "quota_day",
    "running",
]
