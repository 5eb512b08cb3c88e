"""The faults a test can queue on the YouTube fake, and which requests each fires on."""

from __future__ import annotations

# Fault kinds and the requests they apply to (the first queued fault of a matching kind fires).
FAULTS: dict[str, str] = {
    "initiate_5xx": "initiate",  # 503 on the session initiation (counted)
    # The session is created (and counted), then dropped: gone (404) from its first request on.
    # Option `answered` (default true): false closes the connection instead of answering.
    "initiate_then_drop": "initiate",
    # 200 with a Location on another origin (option `to`, a base URL; default 127.0.0.2:9).
    "foreign_location": "initiate",
    "forbidden": "initiate",  # 403 forbidden: the channel may not upload (e.g. not verified)
    "invalid_title": "initiate",  # 400 invalidTitle: the metadata is refused
    "quota_exceeded": "initiate",  # 403 quotaExceeded (also when the insert bucket is empty)
    "upload_limit_exceeded": "initiate",  # 400 uploadLimitExceeded (per channel, 24 h)
    "reset_mid_chunk": "chunk",  # half the chunk is stored, then the connection is reset
    "short_range": "chunk",  # half the chunk is stored, 308 with the short Range
    "lost_response": "complete",  # the upload completes, the response is never sent
    # The completed video is listed in the uploads playlist only `seconds` later (videos.list
    # by id has it at once), as YouTube lists a new upload after a while.
    "late_listing": "complete",
    # Half the chunk's body is read, then nothing for `seconds`, then the rest; the chunk is
    # stored only once whole (a stalled transfer).
    "slow_body": "chunk",
    "expire_session": "session",  # the session is gone: 404 (or status=410) from now on
    "invalid_grant": "token",  # the refresh token is revoked
    "invalid_client": "token",  # 401 invalid_client: the OAuth client's id or secret is wrong
    "slow": "any",  # sleep `seconds` before answering (option `on`: a request kind)
    # The request's access token expires early (option `on`: a request kind): this request and
    # every later one with it are answered 401; a refresh gives a new token. A token issued
    # after an early expiry is spared for its first request (a fresh token is not refused at
    # once), unless the fault's option `spare` is false.
    "expire_token": "authorized",  # taken by name only: not an "any" fault
    # The owner revokes the app's access (option `on`: a request kind): this request's token
    # and every other of the channel are refused (401), and so is the refresh (invalid_grant).
    "revoked": "authorized",
    "processing_failed": "complete",  # the video's processing fails
    "list_quota_exceeded": "list",  # 403 quotaExceeded on a list call
    "thumbnail_5xx": "thumbnail",  # 503 backendError on thumbnails.set (nothing set or charged)
}
