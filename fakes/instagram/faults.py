"""The faults a test can queue on the Instagram fake, and which requests each fires on."""

from __future__ import annotations

from typing import Any

from fakes.common import FaultQueue

# Fault kinds and the request they apply to (the first queued fault that matches fires).
FAULTS: dict[str, str] = {
    "create_5xx": "create",  # 500 code 2 on container creation (nothing created)
    "upload_5xx": "upload",  # 503 from the upload server (the body is read, nothing stored)
    "status_5xx": "status",  # 500 code 2 on a container status read
    # 500 code 2 on media_publish; option `published` (default false): it was published anyway.
    "publish_5xx": "publish",
    "list_5xx": "list",  # 500 code 2 on the media list
    # The upload request that carries the last byte: the connection is closed without an answer.
    # Option `stored` (default true): its bytes were kept (the upload is complete) or not.
    "drop_upload": "final_upload",
    # Half the body of an upload request is stored, then the connection is reset.
    "interrupt_upload": "upload",
    # The next container whose upload completes fails processing: ERROR once processed
    # (option `subcode`, default 2207026, the unsupported-format error).
    "container_error": "processing",
    "container_expired": "processing",  # ... or goes EXPIRED once processed
    "revoke_token": "auth",  # the token of the next graph request is revoked (then code 190)
    # The request's token expires early (option `on`: a request kind, the upload's too): this
    # request and every later one with it are refused (code 190, subcode 463); the token may
    # still be refreshed, and its successor is spared for its first request (unless the
    # fault's option `spare` is false).
    "expire_token": "token",
    "lost_publish": "publish",  # published; the answer is never sent (connection closed)
    "throttle": "graph",  # one graph request gets a throttling error (option `code`, default 4)
    "slow": "any",  # sleep `seconds` before answering (option `on`: a request kind)
    # An upload request's bytes are stored, then its answer goes out a line every `seconds`
    # (option `lines`, default 6): no read waits long, the whole answer does.
    "slow_answer": "upload",
}
GRAPH_KINDS = {"create", "status", "publish", "list", "media", "insights", "limit", "account"}


class Faults(FaultQueue):
    """Instagram's requests are named by kind; graph and auth faults fire on any graph call."""

    def take(self, request: str, *names: str) -> dict[str, Any] | None:
        """The first fault among `names` (all when none given) that applies to `request`."""

        def fires(item: dict[str, Any]) -> bool:
            name = item["fault"]
            if names and name not in names:
                return False
            applies, on = FAULTS[name], item.get("on")
            if on is not None and on != request:
                return False
            return (
                applies == request
                or applies == "any"
                or (applies in ("graph", "auth") and request in GRAPH_KINDS | {"refresh"})
            )

        return self.pop_first(fires)
