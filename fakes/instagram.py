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
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import re
import secrets
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import parse_qs, urlencode, urlsplit

from fakes.common import (
    Drop,
    FaultQueue,
    JsonHandler,
    JsonState,
    LocalServer,
    new_secret,
    serving,
    store_demo_grant,
)

DEFAULT_VERSION = "v24.0"
TOKEN_LIFETIME = 60 * 86400  # long-lived Instagram User tokens: 60 days
CONTAINER_LIFETIME = 24 * 3600.0  # "Containers expire after 24 hours"
PUBLISH_WINDOW = 24 * 3600.0  # content_publishing_limit: quota_duration 86400
PUBLISH_LIMIT = 100  # Content Publishing guide (the limit reference page still says 50)
DEFAULT_PROCESSING_DELAY = 0.5
CAPTION_MAX = 2200
MENTIONS_MAX = 20
PAGE_DEFAULT, PAGE_MAX = 25, 100
APP_ID = "990602627938098"  # named in the revoked-token message, as Meta does

_VERSION = re.compile(r"^v\d+\.\d+$")

# Throttling codes (Graph API rate limiting): the message Meta sends for each.
THROTTLE_MESSAGES: dict[int, str] = {
    4: "(#4) Application request limit reached",
    17: "(#17) User request limit reached",
    32: "(#32) Page request limit reached",
    613: "(#613) Calls to this api have exceeded the rate limit.",
    80002: "(#80002) There have been too many calls to this Instagram account. "
    "Wait a bit and try again.",
}

# Insights metrics a reel has, and those Meta retired (asking for one is an error).
REEL_METRICS = (
    "comments",
    "likes",
    "reach",
    "saved",
    "shares",
    "total_interactions",
    "views",
    "ig_reels_avg_watch_time",
    "ig_reels_video_view_total_time",
)
RETIRED_METRICS = (
    "plays",
    "impressions",
    "clips_replays_count",
    "ig_reels_aggregated_all_plays_count",
    "video_views",
)
CONTAINER_FIELDS = ("id", "status", "status_code", "video_status", "copyright_check_status")
MEDIA_FIELDS = (
    "id",
    "caption",
    "comments_count",
    "is_comment_enabled",
    "is_shared_to_feed",
    "like_count",
    "media_product_type",
    "media_type",
    "media_url",
    "owner",
    "permalink",
    "shortcode",
    "thumbnail_url",
    "timestamp",
    "username",
)
ACCOUNT_FIELDS = ("id", "user_id", "username", "name", "account_type", "media_count")

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


class State(JsonState):
    """Accounts, tokens, containers, media, publishes and insights (bytes in files beside them)."""

    def defaults(self) -> None:
        for key in ("accounts", "tokens", "containers", "media", "publishes", "insights"):
            self.data.setdefault(key, {})
        self.data.setdefault("requests", [])
        self.data.setdefault("calls", [])
        self.data.setdefault("unauthorized", [])  # the kinds of the requests refused a token
        self.data.setdefault("refused", [])  # their request lines, as "requests" has them
        settings = self.data.setdefault("settings", {})
        settings.setdefault("processing_delay", DEFAULT_PROCESSING_DELAY)
        settings.setdefault("container_lifetime", CONTAINER_LIFETIME)
        settings.setdefault("publish_limit", PUBLISH_LIMIT)
        settings.setdefault("publish_window", PUBLISH_WINDOW)
        settings.setdefault("call_budget", None)

    def blob(self, container_id: str) -> Path:
        return self.folder / "bytes" / f"{container_id}.bin"

    def new_id(self, prefix: str, digits: int) -> str:
        taken = self.data["accounts"].keys() | self.data["containers"].keys()
        taken |= self.data["media"].keys()
        while True:
            candidate = prefix + str(secrets.randbelow(10**digits)).zfill(digits)
            if candidate not in taken:
                return candidate

    def publishes_since(self, ig_user_id: str, since: float) -> int:
        return sum(1 for t in self.data["publishes"].get(ig_user_id, []) if t > since)


class _Answered(Exception):
    """An error answer was sent; stop handling the request."""


# Documented Instagram errors (Error Codes reference): code, subcode, message, the user title
# and the user message (the table's "User Message" column; {names} are filled in).
IG_ERRORS: dict[str, tuple[int, int, str, str, str]] = {
    "unknown_media_type": (
        100,
        2207023,
        "The media type is unknown.",
        "Unknown media type",
        "The media type {media_type} is unknown.",
    ),
    "caption_too_long": (
        36004,
        2207010,
        "The caption is too long.",
        "Caption too long",
        "The submitted image's caption was {length} characters long. The maximum number of "
        "characters permitted for a caption is {most}. Please submit media with a shorter caption.",
    ),
    "too_many_tags": (
        100,
        2207040,
        "Too many tags.",
        "Too many tags",
        "Cannot use more than {most} tags per created media.",
    ),
    "fetch_failed": (
        9004,
        2207052,
        "Media download has failed.",
        "Media download failed",
        "The media could not be fetched from this uri: {uri}",
    ),
    "builder_missing": (
        24,
        2207008,
        "Media builder does not exist or has been expired.",
        "Media builder not found",
        "The media builder with creation id = {creation_id} does not exist or has been expired.",
    ),
    "expired": (
        -2,
        2207020,
        "The media has expired.",
        "Media expired",
        "The media you are trying to access has expired. Please try to upload again.",
    ),
    "upload_failed": (
        -1,
        2207053,
        "An unknown error occurred during upload.",
        "Upload failed",
        "unknown upload error",
    ),
    "not_ready": (
        9007,
        2207027,
        "Media ID is not available",
        "Media not ready for publishing",
        "The media is not ready for publishing, please wait for a moment",
    ),
    "publish_limit": (
        9,
        2207042,
        "Application request limit reached",
        "Publishing limit reached",
        "You reached maximum number of posts that is allowed to be published by Content "
        "Publishing API.",
    ),
}
# media_publish on a container in these states.
_REFUSED = {"EXPIRED": "expired", "ERROR": "upload_failed", "IN_PROGRESS": "not_ready"}


def _trace_id() -> str:
    return base64.b64encode(secrets.token_bytes(8)).decode().rstrip("=")


def _error(
    message: str,
    code: int,
    subcode: int | None = None,
    *,
    kind: str = "OAuthException",
    transient: bool | None = None,
    user_title: str | None = None,
    user_msg: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"message": message, "type": kind, "code": code}
    if subcode is not None:
        body["error_subcode"] = subcode
    if transient is not None:
        body["is_transient"] = transient
    if user_title is not None:
        body["error_user_title"] = user_title
    if user_msg is not None:
        body["error_user_msg"] = user_msg
    body["fbtrace_id"] = _trace_id()
    return {"error": body}


def _ig_error(key: str, **values: Any) -> dict[str, Any]:
    code, subcode, message, title, user_msg = IG_ERRORS[key]
    filled = user_msg.format(**values) if values else user_msg
    return _error(message, code, subcode, user_title=title, user_msg=filled)


def _debug_info(message: str, kind: str = "ProcessingFailedError", retriable: bool = False) -> dict:
    """The upload server's error shape; its message is itself a JSON document, as Meta's is."""
    inner = json.dumps({"success": False, "error": {"message": message}}, separators=(",", ":"))
    return {"debug_info": {"retriable": retriable, "type": kind, "message": inner}}


def _server_error() -> dict[str, Any]:
    return _error(
        "An unexpected error has occurred. Please retry your request later.", 2, transient=True
    )


def _no_object(method: str, node: str) -> dict[str, Any]:
    return _error(
        f"Unsupported {method.lower()} request. Object with ID '{node}' does not exist, cannot be "
        "loaded due to missing permissions, or does not support this operation.",
        100,
        33,
        kind="GraphMethodException",
    )


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S+0000")


def _cursor(media_id: str) -> str:
    return base64.urlsafe_b64encode(media_id.encode()).decode()


def _uncursor(cursor: str) -> str | None:
    try:
        return base64.urlsafe_b64decode(cursor.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        return None


class FakeInstagram(LocalServer):
    """The server. Start with `running(...)` in tests, or `main()` standalone."""

    state: State

    def __init__(self, state_dir: str | Path, port: int = 0, host: str = "127.0.0.1") -> None:
        self.state = State(Path(state_dir))
        self.state.load()
        self.faults = Faults(FAULTS)
        super().__init__(host, port)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _Handler

    def graph_url(self, version: str = DEFAULT_VERSION) -> str:
        return f"{self.base_url}{version}/"

    # -- set-up (tests) --------------------------------------------------------------------
    def add_account(
        self,
        username: str,
        access_token: str,
        ig_user_id: str | None = None,
        expires_in: float = TOKEN_LIFETIME,
    ) -> str:
        """An Instagram professional account whose owner granted `access_token` (long-lived);
        returns its IG user id. Adding a known username again gives it the new token."""
        with self.state.lock:
            accounts = self.state.data["accounts"]
            found = [i for i, a in accounts.items() if a["username"] == username]
            uid = found[0] if found else (ig_user_id or self.state.new_id("17841", 12))
            accounts.setdefault(uid, {"username": username, "created": time.time()})
            self._grant(uid, access_token, expires_in)
            self.state.save()
            return uid

    def _grant(self, ig_user_id: str, token: str, expires_in: float) -> None:
        now = time.time()
        self.state.data["tokens"][token] = {
            "account": ig_user_id,
            "issued": now,
            "expires": now + expires_in,
            "revoked": None,
        }

    def revoke(
        self, access_token: str | None = None, ig_user_id: str | None = None, subcode: int = 458
    ) -> None:
        """The token (or every token of the account) is revoked: code 190 from now on, with
        `subcode` (458: the user removed the app; 460: password changed; 467: logged out)."""
        with self.state.lock:
            for token, grant in self.state.data["tokens"].items():
                if token == access_token or (ig_user_id and grant["account"] == ig_user_id):
                    grant["revoked"] = subcode
            self.state.save()

    def expire_token(self, access_token: str) -> None:
        """The token's 60 days are over: code 190, subcode 463."""
        with self.state.lock:
            self.state.data["tokens"][access_token]["expires"] = time.time() - 1
            self.state.save()

    def set_processing_delay(self, seconds: float) -> None:
        """Seconds between a container's last byte and FINISHED (for uploads completed later)."""
        self._setting("processing_delay", float(seconds))

    def set_container_lifetime(self, seconds: float) -> None:
        """An unpublished container goes EXPIRED this long after its creation (24 h)."""
        self._setting("container_lifetime", float(seconds))

    def set_publish_limit(self, limit: int, window_s: float = PUBLISH_WINDOW) -> None:
        """Posts an account may publish per rolling window (`quota_total`, `quota_duration`)."""
        self._setting("publish_limit", int(limit))
        self._setting("publish_window", float(window_s))

    def set_call_budget(
        self, calls: int | None, window_s: float = 3600.0, code: int = 4, status: int = 403
    ) -> None:
        """At most `calls` graph requests per rolling `window_s`; the next get the throttling
        error `code` (see THROTTLE_MESSAGES). None: no limit."""
        if code not in THROTTLE_MESSAGES:
            raise ValueError(f"code {code}: one of {sorted(THROTTLE_MESSAGES)}")
        budget = None if calls is None else {"calls": calls, "window": window_s, "code": code}
        if budget is not None:
            budget["status"] = status
        with self.state.lock:
            self.state.data["calls"] = []
        self._setting("call_budget", budget)

    def _setting(self, key: str, value: Any) -> None:
        with self.state.lock:
            self.state.data["settings"][key] = value
            self.state.save()

    def set_insights(self, media_id: str, **metrics: int) -> None:
        """Lifetime values of a media's insights from now on (views=, likes=, comments=, ...);
        like_count and comments_count follow likes and comments."""
        unknown = set(metrics) - set(REEL_METRICS)
        if unknown:
            raise ValueError(f"unknown metrics {sorted(unknown)}; known: {REEL_METRICS}")
        with self.state.lock:
            if media_id not in self.state.data["media"]:
                raise KeyError(media_id)
            self.state.data["insights"].setdefault(media_id, {}).update(metrics)
            self.state.save()

    def fail_container(self, container_id: str, subcode: int = 2207026) -> None:
        """The container's processing fails: status_code ERROR from now on."""
        self._force(container_id, "ERROR", subcode)

    def expire_container(self, container_id: str) -> None:
        self._force(container_id, "EXPIRED", None)

    def _force(self, container_id: str, outcome: str, subcode: int | None) -> None:
        with self.state.lock:
            c = self.state.data["containers"][container_id]
            c["forced"], c["forced_at"], c["error_subcode"] = outcome, time.time(), subcode
            self.state.save()

    # -- inspection (tests) ----------------------------------------------------------------
    def media(self, ig_user_id: str | None = None) -> list[dict[str, Any]]:
        """Published media, newest first."""
        with self.state.lock:
            items = [
                dict(m)
                for m in self.state.data["media"].values()
                if ig_user_id is None or m["account"] == ig_user_id
            ]
        return sorted(items, key=lambda m: (m["published"], m["seq"]), reverse=True)

    def media_bytes(self, media_id: str) -> bytes:
        with self.state.lock:
            container = self.state.data["media"][media_id]["container"]
            return self.state.blob(container).read_bytes()

    def containers(self) -> dict[str, dict[str, Any]]:
        """Every container with its current status_code (key "status_code")."""
        now = time.time()
        with self.state.lock:
            settings = self.state.data["settings"]
            return {
                cid: {**c, "status_code": _status_code(c, now, settings)}
                for cid, c in self.state.data["containers"].items()
            }

    def publishing_usage(self, ig_user_id: str) -> int:
        """Posts published in the current rolling window (content_publishing_limit)."""
        with self.state.lock:
            window = self.state.data["settings"]["publish_window"]
            return self.state.publishes_since(ig_user_id, time.time() - window)

    def requests(self) -> list[str]:
        """Every request line seen (method, path and query), oldest first."""
        with self.state.lock:
            return list(self.state.data["requests"])

    def unauthorized(self) -> list[str]:
        """The kinds of the requests refused for their token (create, upload, status, list,
        publish, limit, account, ..., refresh), oldest first."""
        with self.state.lock:
            return list(self.state.data["unauthorized"])

    def snapshot(self) -> dict[str, Any]:
        with self.state.lock:
            return json.loads(json.dumps(self.state.data))


def _status_code(c: dict[str, Any], now: float, settings: dict[str, Any]) -> str:
    if c.get("media_id"):
        return "PUBLISHED"
    forced = c.get("forced")
    if forced is not None and now >= c.get("forced_at", 0.0):
        return str(forced)
    if now >= c["created"] + float(settings["container_lifetime"]):
        return "EXPIRED"
    ready = c.get("ready_at")
    if ready is None or now < ready:
        return "IN_PROGRESS"
    return "FINISHED"


_STATUS_TEXT = {
    "IN_PROGRESS": "In Progress: Media is still being processed.",
    "FINISHED": "Finished: Media has been uploaded and it is ready to be published.",
    "PUBLISHED": "Published: Media has been successfully published.",
    "EXPIRED": "Expired: Media was not published within 24 hours.",
}


class _Handler(JsonHandler):
    fake: FakeInstagram
    _kind = "refresh"  # the graph request's kind, once routed (the login paths': refresh)

    # -- plumbing ------------------------------------------------------------------------
    def _fail(self, status: int, body: Any, headers: dict[str, str] | None = None) -> NoReturn:
        self._send(status, body, headers)
        raise _Answered

    def _body(self, limit: int | None = None) -> bytes:
        """The request body (chunked or sized); what arrived when the client went away."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._chunked(limit)
        length = int(self.headers.get("Content-Length") or 0)
        if limit is not None:
            length = min(length, limit)
        parts: list[bytes] = []
        left = length
        while left > 0:
            try:
                piece = self.rfile.read(min(left, 1 << 16))
            except OSError:
                break
            if not piece:
                break
            parts.append(piece)
            left -= len(piece)
        return b"".join(parts)

    def _chunked(self, limit: int | None) -> bytes:
        data = bytearray()
        try:
            while limit is None or len(data) < limit:
                size_line = self.rfile.readline()
                if not size_line:
                    break
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                piece = self.rfile.read(size)
                data += piece
                if len(piece) < size:
                    break
                self.rfile.readline()
        except (OSError, ValueError):
            pass
        return bytes(data if limit is None else data[:limit])

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        st = self.fake.state
        with st.lock:
            st.data["requests"].append(f"{method} {url.path}?{url.query}")
        parts = [p for p in url.path.split("/") if p]
        try:
            if parts[:1] == ["_fake"]:
                self._control(method, parts[1:])
            elif parts[:1] == ["ig-api-upload"]:
                self._slow("upload")
                self._upload(method, parts[1:])
            elif parts[:1] == ["oauth"] or parts == ["access_token"]:
                self._login(method, url.query, parts)
            else:
                self._graph(method, url.query, parts)
        except _Answered:
            return
        except Drop as drop:
            self._drop(drop.reset)

    # -- Business Login for Instagram ----------------------------------------------------
    def _login(self, method: str, query: str, parts: list[str]) -> None:
        """The consent (GET /oauth/authorize, agreed at once: the account is the only one, or
        the one named by `username`, not a Meta parameter), the code's exchange for a one-hour
        token (POST /oauth/access_token) and that token's for a long-lived one
        (GET /access_token?grant_type=ig_exchange_token)."""
        params = self._params(query)
        st = self.fake.state
        if parts == ["oauth", "authorize"] and method == "GET":
            with st.lock:
                found = [
                    uid
                    for uid, a in st.data["accounts"].items()
                    if params.get("username") in (None, a["username"])
                ]
                if len(found) != 1 or not params.get("redirect_uri"):
                    self._fail(400, _error("Invalid redirect_uri or account", 100))
                code = new_secret("AQ", 24)
                st.data.setdefault("codes", {})[code] = {
                    "account": found[0],
                    "redirect_uri": params["redirect_uri"],
                }
                st.save()
            back = urlencode({"code": code, "state": params.get("state", "")})
            target = f"{params['redirect_uri']}?{back}#_"  # Meta appends "#_"
            self._send(302, None, {"Location": target})
            return
        if parts == ["oauth", "access_token"] and method == "POST":
            with st.lock:
                code = st.data.setdefault("codes", {}).pop(params.get("code", ""), None)
                if code is None or code["redirect_uri"] != params.get("redirect_uri"):
                    self._fail(
                        400,
                        {"error_type": "OAuthException", "code": 400,
                         "error_message": "Invalid authorization code"},
                    )  # fmt: skip
                short = new_secret("IGQ", 32)
                self.fake._grant(code["account"], short, 3600)
                st.save()
            self._send(
                200,
                {"data": [{"access_token": short, "user_id": code["account"],
                           "permissions": "instagram_business_basic,"
                                          "instagram_business_content_publish"}]},
            )  # fmt: skip
            return
        if parts == ["access_token"] and method == "GET":
            if params.get("grant_type") != "ig_exchange_token" or not params.get("client_secret"):
                self._fail(400, _error("Unsupported grant_type: use ig_exchange_token", 100))
            account = self._account_of(str(params.get("access_token", "")), "refresh")
            fresh = new_secret("IGAA", 48).replace("-", "x").replace("_", "y")
            with st.lock:
                self.fake._grant(account, fresh, TOKEN_LIFETIME)
                st.save()
            self._send(
                200, {"access_token": fresh, "token_type": "bearer", "expires_in": TOKEN_LIFETIME}
            )
            return
        self._fail(400, _error(f"Unsupported {method} request", 100))

    def _slow(self, kind: str) -> None:
        fault = self.fake.faults.take(kind, "slow")
        if fault is not None:
            time.sleep(float(fault.get("seconds", 1.0)))

    # -- graph ---------------------------------------------------------------------------
    def _params(self, query: str) -> dict[str, str]:
        """Query, form and JSON body parameters together (Meta takes any of them)."""
        params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
        body = self._body()
        ctype = self.headers.get("Content-Type", "")
        if body and "json" in ctype:
            try:
                decoded = json.loads(body)
            except ValueError:
                decoded = None
            if isinstance(decoded, dict):
                for k, v in decoded.items():
                    params[k] = v if isinstance(v, str) else json.dumps(v)
        elif body:
            text = body.decode("utf-8", "replace")
            params.update({k: v[-1] for k, v in parse_qs(text, keep_blank_values=True).items()})
        return params

    def _graph(self, method: str, query: str, parts: list[str]) -> None:
        params = self._params(query)
        version = DEFAULT_VERSION
        if parts and _VERSION.match(parts[0]):
            version, parts = parts[0], parts[1:]
        kind, handler = self._route(method, parts)
        self._kind = kind
        self._slow(kind)
        if kind in GRAPH_KINDS or kind == "refresh":
            self._throttle(kind)
        if kind == "refresh":
            self._refresh(params)
            return
        account = self._auth(params, kind)
        handler(self, account, parts, params, version)

    def _route(self, method: str, parts: list[str]) -> tuple[str, Any]:
        st = self.fake.state
        if parts == ["refresh_access_token"] and method == "GET":
            return "refresh", None
        if len(parts) == 2 and method == "POST" and parts[1] == "media":
            return "create", _Handler.create_container
        if len(parts) == 2 and method == "POST" and parts[1] == "media_publish":
            return "publish", _Handler.publish
        if len(parts) == 2 and method == "GET" and parts[1] == "media":
            return "list", _Handler.list_media
        if len(parts) == 2 and method == "GET" and parts[1] == "content_publishing_limit":
            return "limit", _Handler.publishing_limit
        if len(parts) == 2 and method == "GET" and parts[1] == "insights":
            return "insights", _Handler.insights
        if len(parts) == 1 and method == "GET":
            with st.lock:
                if parts[0] in st.data["containers"]:
                    return "status", _Handler.container
                if parts[0] in st.data["media"]:
                    return "media", _Handler.media_node
            return "account", _Handler.account_node
        return "account", _Handler.unsupported

    def _throttle(self, kind: str) -> None:
        st = self.fake.state
        fault = self.fake.faults.take(kind, "throttle")
        with st.lock:
            budget = st.data["settings"].get("call_budget")
            now = time.time()
            code, status, used = 4, 403, 0
            if budget is not None:
                calls = [t for t in st.data["calls"] if t > now - float(budget["window"])]
                st.data["calls"] = calls
                code, status, used = int(budget["code"]), int(budget["status"]), len(calls)
            over = budget is not None and used >= int(budget["calls"])
            if fault is not None:
                code = int(fault.get("code", 4))
                status = int(fault.get("status", 403))
            elif not over:
                if budget is not None:
                    st.data["calls"].append(now)
                return
        pct = 100 if budget is None else min(100, round(100 * used / max(1, budget["calls"])))
        usage = json.dumps({"call_count": pct, "total_cputime": 0, "total_time": 0})
        message = THROTTLE_MESSAGES.get(code, THROTTLE_MESSAGES[4])
        self._fail(status, _error(message, code, transient=True), {"X-App-Usage": usage})

    def _token(self, params: dict[str, str]) -> str | None:
        token = params.get("access_token")
        if token:
            return token
        auth = self.headers.get("Authorization", "")
        scheme, _, value = auth.partition(" ")
        if scheme.lower() in ("bearer", "oauth") and value.strip():
            return value.strip()
        return None

    def _auth(self, params: dict[str, str], kind: str) -> str:
        """The IG user id the token belongs to; a code 190/104 answer when there is none."""
        token = self._token(params)
        if token is None:
            self._fail(400, _error("An access token is required to request this resource.", 104))
        return self._account_of(str(token), kind)

    def _account_of(self, token: str, kind: str) -> str:
        st = self.fake.state
        with st.lock:
            grant = st.data["tokens"].get(token)
            fault = None
            if grant is not None and grant["revoked"] is None:
                fault = self.fake.faults.take(kind, "revoke_token")
            if grant is not None and fault is not None:
                grant["revoked"] = 458
                st.save()
            if grant is None:
                self._fail_token("Invalid OAuth access token - Cannot parse access token", None)
            if grant["revoked"] is not None:
                self._fail_token(_revoked_message(int(grant["revoked"])), int(grant["revoked"]))
            self._expire_early(grant, kind)
            # An early expiry leaves the token refreshable (the grant behind it stands).
            early = grant.get("expired_early") and kind != "refresh"
            if early or time.time() >= grant["expires"]:
                ended = time.time() if early else grant["expires"]
                when = datetime.fromtimestamp(ended, UTC).strftime("%A, %d-%b-%y %H:%M:%S UTC")
                self._fail_token(
                    f"Error validating access token: Session has expired on {when}.", 463
                )
            return str(grant["account"])

    def _expire_early(self, grant: dict[str, Any], kind: str) -> None:
        """The expire_token fault, on a live token's request that is not a refresh (a token
        issued after an early expiry is spared its first request). Call with the state lock."""
        live = grant["revoked"] is None and time.time() < grant["expires"]
        if kind == "refresh" or not live or grant.get("expired_early"):
            return
        if grant.pop("spared", False):
            self.fake.state.save()
            return
        fault = self.fake.faults.pop_first(
            lambda f: f["fault"] == "expire_token" and f.get("on") in (None, kind)
        )
        if fault is not None:
            grant["expired_early"] = True
            spare = bool(fault.get("spare", True))
            self.fake.state.data["accounts"][grant["account"]]["expired_early"] = spare
            self.fake.state.save()

    def _fail_token(self, message: str, subcode: int | None) -> NoReturn:
        url = urlsplit(self.path)
        with self.fake.state.lock:
            self.fake.state.data["unauthorized"].append(self._kind)
            self.fake.state.data["refused"].append(f"{self.command} {url.path}?{url.query}")
            self.fake.state.save()
        challenge = f'OAuth "Facebook Platform" "invalid_token" "{message}"'
        self._fail(400, _error(message, 190, subcode), {"WWW-Authenticate": challenge})

    def _refresh(self, params: dict[str, str]) -> None:
        if params.get("grant_type") != "ig_refresh_token":
            self._fail(400, _error("Unsupported grant_type: use ig_refresh_token", 100))
        token = params.get("access_token")
        if not token:
            self._fail(400, _error("An access token is required to request this resource.", 104))
        account = self._account_of(str(token), "refresh")
        fresh = new_secret("IGAA", 48).replace("-", "x").replace("_", "y")
        with self.fake.state.lock:
            self.fake._grant(account, fresh, TOKEN_LIFETIME)
            if self.fake.state.data["accounts"][account].pop("expired_early", False):
                self.fake.state.data["tokens"][fresh]["spared"] = True
            self.fake.state.save()
        self._send(
            200, {"access_token": fresh, "token_type": "bearer", "expires_in": TOKEN_LIFETIME}
        )

    def _owned_account(self, account: str, node: str) -> None:
        if node not in (account, "me"):
            self._fail(400, _no_object(self.command, node))

    def _fields(self, params: dict[str, str], allowed: tuple[str, ...], node_type: str) -> list:
        wanted = [f.strip() for f in params.get("fields", "").split(",") if f.strip()]
        for name in wanted:
            if name not in allowed:
                self._fail(
                    400,
                    _error(
                        f"(#100) Tried accessing nonexisting field ({name}) on node type "
                        f"({node_type})",
                        100,
                    ),
                )
        return wanted

    def unsupported(self, account: str, parts: list[str], params: dict, version: str) -> None:
        self._fail(400, _no_object(self.command, "/".join(parts) or "/"))

    # -- accounts ------------------------------------------------------------------------
    def account_node(self, account: str, parts: list[str], params: dict, version: str) -> None:
        self._owned_account(account, parts[0])
        wanted = self._fields(params, ACCOUNT_FIELDS, "IGUser")
        st = self.fake.state
        with st.lock:
            a = st.data["accounts"][account]
            count = sum(1 for m in st.data["media"].values() if m["account"] == account)
        values = {
            "id": account,
            "user_id": account,
            "username": a["username"],
            "name": a["username"],
            "account_type": "BUSINESS",
            "media_count": count,
        }
        self._send(200, {k: values[k] for k in [*wanted, "id"]})

    # -- containers ----------------------------------------------------------------------
    def create_container(self, account: str, parts: list[str], params: dict, version: str) -> None:
        self._owned_account(account, parts[0])
        fault = self.fake.faults.take("create", "create_5xx")
        if fault is not None:
            self._fail(int(fault.get("status", 500)), _server_error())
        media_type = params.get("media_type", "")
        if media_type != "REELS":
            self._fail(400, _ig_error("unknown_media_type", media_type=media_type or "(none)"))
        caption = params.get("caption", "")
        if len(caption) > CAPTION_MAX:
            self._fail(400, _ig_error("caption_too_long", length=len(caption), most=CAPTION_MAX))
        if len(re.findall(r"@\w", caption)) > MENTIONS_MAX:
            self._fail(400, _ig_error("too_many_tags", most=MENTIONS_MAX))
        if params.get("upload_type") != "resumable":  # a video_url this fake cannot fetch
            self._fail(400, _ig_error("fetch_failed", uri=params.get("video_url") or "(none)"))
        st = self.fake.state
        with st.lock:
            cid = st.new_id("179", 14)
            kept = {k: v for k, v in params.items() if k != "access_token"}
            st.data["containers"][cid] = {
                "id": cid,
                "account": account,
                "params": kept,
                "version": version,
                "created": time.time(),
                "file_size": None,
                "received": 0,
                "ready_at": None,
                "forced": None,
                "error_subcode": None,
                "media_id": None,
                "sha256": None,
            }
            st.blob(cid).write_bytes(b"")
            st.save()
        uri = f"{self.fake.base_url}ig-api-upload/{version}/{cid}"
        self._send(200, {"id": cid, "uri": uri})

    def container(self, account: str, parts: list[str], params: dict, version: str) -> None:
        st = self.fake.state
        with st.lock:
            c = dict(st.data["containers"][parts[0]])
        if c["account"] != account:
            self._fail(400, _no_object(self.command, parts[0]))
        if self.fake.faults.take("status", "status_5xx") is not None:
            self._fail(500, _server_error())
        wanted = self._fields(params, CONTAINER_FIELDS, "ShadowIGMediaBuilder")
        with st.lock:
            code = _status_code(c, time.time(), st.data["settings"])
        values: dict[str, Any] = {"id": c["id"], "status_code": code}
        if code == "ERROR":
            values["status"] = (
                f"Error: Media upload has failed with error code {c.get('error_subcode')}"
            )
        else:
            values["status"] = _STATUS_TEXT[code]
        total, received = c["file_size"], c["received"]
        uploading = "not_started"
        if total is not None and received >= total:
            uploading = "complete"
        elif received or total is not None:
            uploading = "in_progress"
        processing = {
            "IN_PROGRESS": "in_progress" if uploading == "complete" else "not_started",
            "ERROR": "error",
            "EXPIRED": "complete" if uploading == "complete" else "not_started",
        }.get(code, "complete")
        values["video_status"] = {
            "uploading_phase": {"status": uploading, "bytes_transferred": received},
            "processing_phase": {"status": processing},
        }
        copyright_state = "complete" if processing == "complete" else "not_started"
        values["copyright_check_status"] = {"status": copyright_state, "matches_found": False}
        self._send(200, {k: values[k] for k in [*wanted, "id"]})

    # -- upload (rupload) ----------------------------------------------------------------
    def _upload(self, method: str, parts: list[str]) -> None:
        if parts and _VERSION.match(parts[0]):
            parts = parts[1:]
        st, faults = self.fake.state, self.fake.faults
        if method != "POST" or len(parts) != 1:
            self._body()
            self._fail(400, _debug_info("Unsupported upload request", "InvalidRequestError"))
        cid = parts[0]
        token = self.headers.get("Authorization", "")
        scheme, _, value = token.partition(" ")
        with st.lock:
            grant = st.data["tokens"].get(value.strip()) if scheme == "OAuth" else None
            c = st.data["containers"].get(cid)
            if grant is not None:
                self._expire_early(grant, "upload")
            valid = (
                grant is not None
                and grant["revoked"] is None
                and not grant.get("expired_early")
                and time.time() < grant["expires"]
            )
            if not valid:
                st.data["unauthorized"].append("upload")
            owner_ok = c is not None and grant is not None and c["account"] == grant["account"]
            status = _status_code(c, time.time(), st.data["settings"]) if c else ""
        if c is None or not valid or not owner_ok:
            self._body()
            self._fail(400, _debug_info("unauthorized user request"))
        if self.headers.get("file_url"):
            self._fail(
                400, _debug_info(f"The media could not be fetched from {self.headers['file_url']}")
            )
        offset_h, size_h = self.headers.get("offset", ""), self.headers.get("file_size", "")
        if not offset_h.strip().isdigit():
            self._body()
            self._fail(
                400,
                _debug_info(
                    "HeaderValuePredicate: Header Offset not convertable to unsigned long",
                    "ParameterValidationError",
                ),
            )
        if not size_h.strip().isdigit() or int(size_h) <= 0:
            self._body()
            self._fail(
                400,
                _debug_info(
                    "HeaderValuePredicate: Header file_size not convertable to unsigned long",
                    "ParameterValidationError",
                ),
            )
        offset, total = int(offset_h), int(size_h)
        length = int(self.headers.get("Content-Length") or 0)
        if status in ("EXPIRED", "ERROR", "PUBLISHED"):
            self._body()
            self._fail(400, _debug_info(f"The media container is {status.lower()}"))
        if c["file_size"] is not None and c["file_size"] != total:
            self._body()
            self._fail(
                400,
                _debug_info(
                    f"file_size {total} differs from {c['file_size']} given before",
                    "ParameterValidationError",
                ),
            )
        if offset != c["received"]:
            self._body()
            self._fail(
                400,
                _debug_info(
                    f"offset {offset} does not match the {c['received']} bytes received; "
                    "resume from video_status.uploading_phase.bytes_transferred"
                ),
            )
        final = offset + length >= total
        fault = faults.take("final_upload", "drop_upload") if final else None
        if fault is None:
            fault = faults.take("upload", "upload_5xx", "interrupt_upload")
        if fault is not None and fault["fault"] == "upload_5xx":
            self._body()
            self._fail(
                int(fault.get("status", 503)),
                _debug_info("Service temporarily unavailable", "ServiceUnavailableError", True),
            )
        if fault is not None and fault["fault"] == "interrupt_upload":
            half = self._body(max(1, length // 2))
            self._store(cid, offset, total, half)
            raise Drop(reset=True)
        data = self._body()
        if offset + len(data) > total:
            self._fail(
                400,
                _debug_info(
                    f"{offset + len(data)} bytes would exceed file_size {total}",
                    "ParameterValidationError",
                ),
            )
        if fault is not None:  # drop_upload: stored or not, the answer never comes
            if fault.get("stored", True):
                self._store(cid, offset, total, data)
            raise Drop(reset=bool(fault.get("reset", False)))
        self._store(cid, offset, total, data)
        if len(data) < length:  # the client went away mid-body; it gets nothing
            raise Drop(reset=False)
        slow = faults.take("upload", "slow_answer")
        if slow is not None:
            self._trickle(float(slow.get("seconds", 1.0)), int(slow.get("lines", 6)))
            return
        self._send(200, {"success": True, "message": "Upload successful."})

    def _trickle(self, pause: float, lines: int) -> None:
        """The upload's answer a line at a time, `pause` seconds apart (the client may go away
        meanwhile: the bytes are stored all the same)."""
        body = json.dumps({"success": True, "message": "Upload successful."}).encode()
        head = ["HTTP/1.1 200 OK", "Content-Type: application/json"]
        head += [f"X-Slow-{n}: {n}" for n in range(max(0, lines - 3))]
        head += [f"Content-Length: {len(body)}"]
        self.close_connection = True
        try:
            for line in head:
                self.wfile.write(f"{line}\r\n".encode())
                self.wfile.flush()
                time.sleep(pause)
            self.wfile.write(b"\r\n" + body)
        except OSError:
            pass

    def _store(self, cid: str, offset: int, total: int, data: bytes) -> None:
        st = self.fake.state
        with st.lock:
            c = st.data["containers"][cid]
            if offset != c["received"]:
                return  # a concurrent request got there first; its bytes stand
            c["file_size"] = total
            if data:
                with st.blob(cid).open("ab") as f:
                    f.write(data)
                c["received"] = offset + len(data)
            if c["received"] >= total and c["ready_at"] is None:
                now = time.time()
                c["ready_at"] = now + float(st.data["settings"]["processing_delay"])
                c["sha256"] = hashlib.sha256(st.blob(cid).read_bytes()).hexdigest()
                fault = self.fake.faults.take("processing", "container_error", "container_expired")
                if fault is not None:
                    expired = fault["fault"] == "container_expired"
                    c["forced"] = "EXPIRED" if expired else "ERROR"
                    c["forced_at"] = c["ready_at"]
                    c["error_subcode"] = None if expired else int(fault.get("subcode", 2207026))
            st.save()

    # -- publishing ----------------------------------------------------------------------
    def publish(self, account: str, parts: list[str], params: dict, version: str) -> None:
        self._owned_account(account, parts[0])
        faults, st = self.fake.faults, self.fake.state
        fault = faults.take("publish", "publish_5xx", "lost_publish")
        if fault is not None and fault["fault"] == "publish_5xx" and not fault.get("published"):
            self._fail(int(fault.get("status", 500)), _server_error())
        cid = params.get("creation_id", "")
        if not cid:
            self._fail(400, _error("(#100) The parameter creation_id is required", 100))
        now = time.time()
        with st.lock:
            c = st.data["containers"].get(cid)
            settings = st.data["settings"]
            code = _status_code(c, now, settings) if c and c["account"] == account else None
            if code in (None, "PUBLISHED"):
                self._fail(400, _ig_error("builder_missing", creation_id=cid))
            if c is None or code in _REFUSED:
                self._fail(400, _ig_error(_REFUSED.get(str(code), "builder_missing")))
            window = float(settings["publish_window"])
            if st.publishes_since(account, now - window) >= int(settings["publish_limit"]):
                self._fail(400, _ig_error("publish_limit"))
            media_id = st.new_id("18", 15)
            shortcode = base64.urlsafe_b64encode(secrets.token_bytes(8)).decode()[:11]
            p = c["params"]
            st.data["media"][media_id] = {
                "id": media_id,
                "account": account,
                "container": cid,
                "caption": p.get("caption", ""),
                "share_to_feed": str(p.get("share_to_feed", "true")).lower() != "false",
                "published": now,
                "seq": len(st.data["media"]),
                "shortcode": shortcode,
                "sha256": c["sha256"],
                "size": c["received"],
            }
            c["media_id"] = media_id
            st.data["publishes"].setdefault(account, []).append(now)
            st.save()
        if fault is not None and fault["fault"] == "lost_publish":
            raise Drop(reset=bool(fault.get("reset", False)))
        if fault is not None:  # publish_5xx after publishing: the caller cannot tell
            self._fail(int(fault.get("status", 500)), _server_error())
        self._send(200, {"id": media_id})

    def publishing_limit(self, account: str, parts: list[str], params: dict, version: str) -> None:
        self._owned_account(account, parts[0])
        wanted = self._fields(params, ("quota_usage", "config"), "ContentPublishingLimit")
        st = self.fake.state
        now = time.time()
        with st.lock:
            settings = st.data["settings"]
            window = float(settings["publish_window"])
            since = now - window
            raw = params.get("since", "")
            if raw:
                if not raw.lstrip("-").isdigit() or int(raw) < now - window - 1:
                    self._fail(
                        400, _error("(#100) since must be a Unix timestamp within 24 hours", 100)
                    )
                since = max(since, float(raw))
            values = {
                "quota_usage": st.publishes_since(account, since),
                "config": {
                    "quota_total": int(settings["publish_limit"]),
                    "quota_duration": int(window),
                },
            }
        self._send(200, {"data": [{k: values[k] for k in wanted or ["quota_usage"]}]})

    # -- media ---------------------------------------------------------------------------
    def _media_fields(self, m: dict[str, Any], wanted: list[str]) -> dict[str, Any]:
        st = self.fake.state
        with st.lock:
            username = st.data["accounts"][m["account"]]["username"]
            stats = st.data["insights"].get(m["id"], {})
        link = f"https://www.instagram.com/reel/{m['shortcode']}/"
        values = {
            "id": m["id"],
            "caption": m["caption"],
            "comments_count": int(stats.get("comments", 0)),
            "is_comment_enabled": True,
            "is_shared_to_feed": m["share_to_feed"],
            "like_count": int(stats.get("likes", 0)),
            "media_product_type": "REELS",
            "media_type": "VIDEO",
            "media_url": f"{self.fake.base_url}_fake/media/{m['id']}.mp4",
            "owner": {"id": m["account"]},
            "permalink": link,
            "shortcode": m["shortcode"],
            "thumbnail_url": f"{self.fake.base_url}_fake/media/{m['id']}.jpg",
            "timestamp": _iso(m["published"]),
            "username": username,
        }
        return {k: values[k] for k in [*wanted, "id"]}

    def list_media(self, account: str, parts: list[str], params: dict, version: str) -> None:
        self._owned_account(account, parts[0])
        if self.fake.faults.take("list", "list_5xx") is not None:
            self._fail(500, _server_error())
        wanted = self._fields(params, MEDIA_FIELDS, "ShadowIGMedia")
        raw_limit = params.get("limit", "")
        size = int(raw_limit) if raw_limit.isdigit() else PAGE_DEFAULT
        size = max(1, min(PAGE_MAX, size))
        items = self.fake.media(account)
        for bound, keep in (("since", lambda t, b: t >= b), ("until", lambda t, b: t <= b)):
            value = params.get(bound, "")
            if value.isdigit():
                items = [m for m in items if keep(m["published"], float(value))]
        ids = [m["id"] for m in items]
        start = 0
        if params.get("after"):
            anchor = _uncursor(params["after"])
            start = ids.index(anchor) + 1 if anchor in ids else len(ids)
        elif params.get("before"):
            anchor = _uncursor(params["before"])
            end = ids.index(anchor) if anchor in ids else 0
            start = max(0, end - size)
            items = items[:end]
        page = items[start : start + size]
        body: dict[str, Any] = {"data": [self._media_fields(m, wanted) for m in page]}
        if page:
            cursors = {"before": _cursor(page[0]["id"]), "after": _cursor(page[-1]["id"])}
            paging: dict[str, Any] = {"cursors": cursors}
            base = f"{self.fake.base_url}{version}/{parts[0]}/media"
            rest = {k: v for k, v in params.items() if k not in ("after", "before")}
            rest["limit"] = str(size)
            if start + size < len(items):
                paging["next"] = f"{base}?{urlencode({**rest, 'after': cursors['after']})}"
            if start > 0:
                paging["previous"] = f"{base}?{urlencode({**rest, 'before': cursors['before']})}"
            body["paging"] = paging
        self._send(200, body)

    def media_node(self, account: str, parts: list[str], params: dict, version: str) -> None:
        with self.fake.state.lock:
            m = dict(self.fake.state.data["media"][parts[0]])
        if m["account"] != account:
            self._fail(400, _no_object(self.command, parts[0]))
        wanted = self._fields(params, MEDIA_FIELDS, "ShadowIGMedia")
        self._send(200, self._media_fields(m, wanted))

    def insights(self, account: str, parts: list[str], params: dict, version: str) -> None:
        st = self.fake.state
        with st.lock:
            m = st.data["media"].get(parts[0])
            stats = dict(st.data["insights"].get(parts[0], {}))
        if m is None or m["account"] != account:
            self._fail(400, _no_object(self.command, parts[0]))
        metrics = [x.strip() for x in params.get("metric", "").split(",") if x.strip()]
        if not metrics:
            self._fail(400, _error("(#100) The parameter metric is required", 100))
        for i, name in enumerate(metrics):
            if name not in REEL_METRICS:
                self._fail(
                    400,
                    _error(
                        f"(#100) metric[{i}] must be one of the following values: "
                        + ", ".join(REEL_METRICS),
                        100,
                    ),
                )
        data = [
            {
                "name": name,
                "period": "lifetime",
                "values": [{"value": int(stats.get(name, 0))}],
                "title": name.replace("_", " ").capitalize(),
                "description": f"The lifetime {name.replace('_', ' ')} of the reel.",
                "id": f"{parts[0]}/insights/{name}/lifetime",
            }
            for name in metrics
        ]
        self._send(200, {"data": data})

    # -- control -------------------------------------------------------------------------
    def _control(self, method: str, parts: list[str]) -> None:
        if method == "GET" and len(parts) == 2 and parts[0] == "media":
            self._media_file(parts[1])
            return
        body = self._body()
        try:
            spec = json.loads(body or b"{}")
        except ValueError:
            self._fail(400, {"error": "the body is not JSON"})
        fake = self.fake
        route = (method, "/".join(parts))
        try:
            if route == ("POST", "faults"):
                fake.faults.push(spec.pop("fault"), **spec)
                self._send(200, {"pending": fake.faults.pending()})
            elif route == ("POST", "accounts"):
                uid = fake.add_account(
                    spec["username"], spec["access_token"], spec.get("ig_user_id")
                )
                self._send(200, {"id": uid})
            elif route == ("POST", "revoke"):
                fake.revoke(spec.get("access_token"), spec.get("ig_user_id"))
                self._send(200, {"ok": True})
            elif route == ("POST", "settings"):
                self._settings(spec)
                self._send(200, fake.snapshot()["settings"])
            elif route == ("POST", "insights"):
                media_id = spec.pop("media_id")
                fake.set_insights(media_id, **spec)
                self._send(200, {"ok": True})
            elif route == ("GET", "state"):
                self._send(200, fake.snapshot())
            else:
                self._send(404, {"error": f"no control route {method} /_fake/{route[1]}"})
        except (KeyError, TypeError, ValueError) as exc:
            self._send(400, {"error": str(exc)})

    def _media_file(self, name: str) -> None:
        """A published reel's bytes (its media_url); the thumbnail is an empty JPEG stand-in."""
        media_id, _, ext = name.partition(".")
        try:
            raw = self.fake.media_bytes(media_id) if ext == "mp4" else b"\xff\xd8\xff\xd9"
        except KeyError:
            self._fail(404, {"error": f"no media {media_id}"})
        self.send_response(200)
        self.send_header("Content-Type", "video/mp4" if ext == "mp4" else "image/jpeg")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _settings(self, spec: dict[str, Any]) -> None:
        fake = self.fake
        if "processing_delay" in spec:
            fake.set_processing_delay(spec["processing_delay"])
        if "container_lifetime" in spec:
            fake.set_container_lifetime(spec["container_lifetime"])
        if "publish_limit" in spec:
            fake.set_publish_limit(
                spec["publish_limit"], spec.get("publish_window", PUBLISH_WINDOW)
            )
        if "call_budget" in spec:
            budget = spec["call_budget"] or {}
            fake.set_call_budget(
                budget.get("calls"),
                budget.get("window_s", 3600.0),
                budget.get("code", 4),
                budget.get("status", 403),
            )


def _revoked_message(subcode: int) -> str:
    return {
        458: f"Error validating access token: The user has not authorized application {APP_ID}.",
        460: "Error validating access token: The session has been invalidated because the user "
        "changed their password or Facebook has changed the session for security reasons.",
        467: "Error validating access token: The session is invalid because the user logged out.",
    }.get(subcode, "Error validating access token: The session is invalid.")


def connect_accounts(fake: FakeInstagram, state: Any, env: str, accounts: list[Any]) -> None:
    """Demo wiring (`make demo PROVIDERS=fakes`): each account is an Instagram professional
    account with a long-lived token, stored encrypted (fakes.common.store_demo_grant)."""
    for account in accounts:
        token = new_secret("IGAAfake", 32)
        fake.add_account(account.handle, token)
        store_demo_grant(state, env, account, token)


def running(
    state_dir: str | Path, port: int = 0
) -> contextlib.AbstractContextManager[FakeInstagram]:
    """The fake on 127.0.0.1 (an ephemeral port by default) for the duration of the block."""
    return serving(FakeInstagram(state_dir, port))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state-dir", default=".mdame/fake-instagram")
    parser.add_argument(
        "--account",
        action="append",
        default=[],
        help="USERNAME=ACCESS_TOKEN: an account to create (repeatable)",
    )
    parser.add_argument("--processing-delay", type=float, default=None)
    args = parser.parse_args(argv)
    fake = FakeInstagram(args.state_dir, args.port)
    for spec in args.account:
        username, _, token = spec.partition("=")
        print(f"account {username}: {fake.add_account(username, token)}", flush=True)
    if args.processing_delay is not None:
        fake.set_processing_delay(args.processing_delay)
    fake.serve_until_interrupted("fake Instagram on {base_url} (graph and rupload)")


if __name__ == "__main__":
    main()
