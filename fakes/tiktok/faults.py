"""The faults a test can queue on the TikTok fake, and which requests each fires on."""

from __future__ import annotations

# Fault kinds and the requests they apply to (the first queued fault of a matching kind fires).
FAULTS: dict[str, str] = {
    "init_5xx": "init",  # option `status` (default 500): internal_error, nothing created
    "creator_info_5xx": "creator_info",
    "status_5xx": "status",
    "list_5xx": "list",
    "chunk_5xx": "chunk",  # the chunk is read and not stored; an empty 5xx answer
    # The last chunk's connection is closed without an answer. Option `stored` (default true):
    # the bytes were kept (the upload is complete and publishes) or lost (the client resends).
    "drop_final_chunk": "final_chunk",
    "expire_publish": "chunk",  # the upload_url expires now: 403, and status FAILED
    "processing_failed": "complete",  # status FAILED, option `reason` (default internal)
    "revoked": "auth",  # the creator revokes the app: 401 now, invalid_grant on refresh
    # The creator's access tokens expire early (option `on`: a request kind; on a chunk, which
    # carries none, the creator's whose upload it is): 401 access_token_invalid from then on,
    # this request too when it carries one; a refresh gives a new token. A token issued after
    # an early expiry is spared for its first request (a fresh token is not refused at once),
    # unless the fault's option `spare` is false.
    "expire_token": "authorized",  # taken by name only: not an "any" fault
    "invalid_grant": "token",  # the next refresh finds the grant revoked
    "slow": "any",  # sleep `seconds` before answering (option `on`: a request kind)
    # The chunk is stored, then its answer goes out a line every `seconds` (option `lines`,
    # default 6): no read waits long, the whole answer does.
    "slow_answer": "chunk",
}
