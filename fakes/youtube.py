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
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import secrets
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit
from zoneinfo import ZoneInfo

from fakes.common import (
    Drop,
    JsonHandler,
    JsonState,
    LocalServer,
    NamedFaults,
    new_secret,
    serving,
    store_demo_grant,
)

PACIFIC = ZoneInfo("America/Los_Angeles")
DEFAULT_LIMITS = {"insert": 100, "search": 100, "units": 10_000}
LIST_COST = 1
THUMBNAIL_COST = 50
THUMBNAIL_MAX_BYTES = 2 * 1024 * 1024  # the API's limit

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


def quota_day(now: datetime | None = None) -> str:
    return (now or datetime.now(UTC)).astimezone(PACIFIC).date().isoformat()


class State(JsonState):
    """Channels, tokens, sessions, videos and quota counters (bytes in files beside them)."""

    def defaults(self) -> None:
        for key in ("channels", "tokens", "sessions", "videos", "counters"):
            self.data.setdefault(key, {})
        self.data.setdefault("limits", dict(DEFAULT_LIMITS))
        self.data.setdefault("requests", [])
        self.data.setdefault("initiations", [])
        self.data.setdefault("unauthorized", [])  # the kinds of the requests answered 401
        self.data.setdefault("spared", [])  # tokens issued after an early expiry, unused yet

    def blob(self, upload_id: str) -> Path:
        return self.folder / "bytes" / f"{upload_id}.bin"

    def charge(self, channel: str, bucket: str, cost: int) -> bool:
        """Adds `cost` to today's bucket; False (nothing added) when it does not fit."""
        day = self.data["counters"].setdefault(quota_day(), {})
        used = day.setdefault(channel, {"insert": 0, "search": 0, "units": 0})
        if used[bucket] + cost > self.data["limits"][bucket]:
            return False
        used[bucket] += cost
        return True

    def left(self, channel: str, bucket: str) -> int:
        day = self.data["counters"].get(quota_day(), {})
        used = day.get(channel, {}).get(bucket, 0)
        return int(self.data["limits"][bucket] - used)


def _error(status: int, reason: str, message: str, domain: str = "youtube.video") -> dict:
    return {
        "error": {
            "code": status,
            "message": message,
            "errors": [{"domain": domain, "reason": reason, "message": message}],
        }
    }


class FakeYouTube(LocalServer):
    """The server. Start with `running(...)` in tests, or `main()` standalone."""

    state: State

    def __init__(self, state_dir: str | Path, port: int = 0, host: str = "127.0.0.1") -> None:
        self.state = State(Path(state_dir))
        self.state.load()
        self.faults = NamedFaults(FAULTS)
        super().__init__(host, port)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _Handler

    @property
    def token_uri(self) -> str:
        return f"{self.base_url}token"

    # -- set-up and inspection (tests) ---------------------------------------------------
    def add_channel(self, handle: str, refresh_token: str) -> str:
        """A channel whose owner granted `refresh_token`; returns the channel id."""
        with self.state.lock:
            for cid, ch in self.state.data["channels"].items():
                if ch["handle"] == handle:
                    ch["refresh_token"] = refresh_token
                    self.state.save()
                    return str(cid)
            cid = "UC" + hashlib.sha256(handle.encode()).hexdigest()[:22]
            self.state.data["channels"][cid] = {
                "handle": handle,
                "refresh_token": refresh_token,
                "uploads": "UU" + cid[2:],
                "videos": [],
            }
            self.state.save()
            return cid

    def allow_custom_thumbnails(self, channel_id: str, allowed: bool) -> None:
        """A channel may set custom thumbnails (a verified one) or not (thumbnails.set: 403)."""
        with self.state.lock:
            self.state.data["channels"][channel_id]["custom_thumbnails"] = allowed
            self.state.save()

    def thumbnail(self, video_id: str) -> dict[str, Any] | None:
        """The custom thumbnail set on a video ({"sha256", "size", "sets"}), if any."""
        with self.state.lock:
            found = self.state.data["videos"][video_id].get("thumbnail")
            return dict(found) if found else None

    def set_limits(self, **limits: int) -> None:
        with self.state.lock:
            self.state.data["limits"].update(limits)
            self.state.save()

    def videos(self, channel_id: str | None = None) -> list[dict[str, Any]]:
        with self.state.lock:
            return [
                dict(v)
                for v in self.state.data["videos"].values()
                if channel_id is None or v["channel"] == channel_id
            ]

    def add_video(self, channel_id: str, title: str) -> str:
        """A processed public video already on the channel (as if uploaded long ago), for tests
        that read videos without uploading them first. Returns its id."""
        with self.state.lock:
            video_id = "v" + hashlib.sha256(f"{channel_id}|{title}".encode()).hexdigest()[:10]
            self.state.data["videos"][video_id] = {
                "id": video_id,
                "channel": channel_id,
                "upload_id": "",
                "sha256": "",
                "size": 0,
                "snippet": {"title": title},
                "status": {"uploadStatus": "processed", "privacyStatus": "public"},
                "processing": "succeeded",
                "published_at": datetime.now(UTC).isoformat(),
            }
            self.state.data["channels"][channel_id]["videos"].insert(0, video_id)
            self.state.save()
            return video_id

    def remove_video(self, video_id: str) -> None:
        """The video is deleted from its channel (by its owner, or by YouTube): lists and
        videos.list no longer have it."""
        with self.state.lock:
            video = self.state.data["videos"].pop(video_id)
            uploads = self.state.data["channels"][video["channel"]]["videos"]
            uploads[:] = [v for v in uploads if v != video_id]
            self.state.save()

    def set_statistics(self, video_id: str, views: int, likes: int, comments: int = 0) -> None:
        """What videos.list(part="statistics") answers for a video from now on (issue 12)."""
        with self.state.lock:
            self.state.data["videos"][video_id]["statistics"] = {
                "viewCount": str(views),
                "likeCount": str(likes),
                "commentCount": str(comments),
            }
            self.state.save()

    def video_bytes(self, video_id: str) -> bytes:
        with self.state.lock:
            return self.state.blob(self.state.data["videos"][video_id]["upload_id"]).read_bytes()

    def counters(self, channel_id: str, day: str | None = None) -> dict[str, int]:
        with self.state.lock:
            by_day = self.state.data["counters"].get(day or quota_day(), {})
            return dict(by_day.get(channel_id, {"insert": 0, "search": 0, "units": 0}))

    def sessions(self) -> dict[str, dict[str, Any]]:
        with self.state.lock:
            return {k: dict(v) for k, v in self.state.data["sessions"].items()}

    def expire_sessions(self, status: int = 404) -> None:
        with self.state.lock:
            for s in self.state.data["sessions"].values():
                s["gone"] = status
            self.state.save()

    def initiations(self) -> list[dict[str, Any]]:
        """Every videos.insert initiation received with a valid token, oldest first:
        {"channel", "description", "counted", "at"}."""
        with self.state.lock:
            return [dict(i) for i in self.state.data["initiations"]]

    def requests(self) -> list[str]:
        """Every request line seen (method, path and query), oldest first."""
        with self.state.lock:
            return list(self.state.data["requests"])

    def unauthorized(self) -> list[str]:
        """The kinds of the requests answered 401 (initiate, chunk, status, list, thumbnail),
        oldest first."""
        with self.state.lock:
            return list(self.state.data["unauthorized"])

    def snapshot(self) -> dict[str, Any]:
        with self.state.lock:
            return json.loads(json.dumps(self.state.data))


# Google's answer to an access token it does not take (expired, revoked or unknown).
UNAUTHENTICATED = {
    "error": {
        "code": 401,
        "message": "Request had invalid authentication credentials. Expected OAuth 2 access "
        "token, login cookie or other valid authentication credential. See "
        "https://developers.google.com/identity/sign-in/web/devconsole-project.",
        "errors": [
            {
                "message": "Invalid Credentials",
                "domain": "global",
                "reason": "authError",
                "location": "Authorization",
                "locationType": "header",
            }
        ],
        "status": "UNAUTHENTICATED",
    }
}
INVALID_TOKEN = 'Bearer realm="https://accounts.google.com/", error="invalid_token"'


class _Handler(JsonHandler):
    fake: FakeYouTube

    # -- plumbing ------------------------------------------------------------------------
    def _body(self, limit: int | None = None) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if limit is not None:
            length = min(length, limit)
        return self.rfile.read(length) if length else b""

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        st = self.fake.state
        with st.lock:
            st.data["requests"].append(f"{method} {url.path}?{url.query}")
        kind = _request_kind(method, url.path, query, self.headers)
        self._expire_early(kind)
        slow = self.fake.faults.pop_first(
            lambda f: f["fault"] == "slow" and f.get("on") in (None, kind)
        )
        if slow is not None:
            time.sleep(float(slow.get("seconds", 1.0)))
        try:
            route = _ROUTES.get((method, url.path.rstrip("/")))
            if route is None:
                self._send(404, _error(404, "notFound", f"no route {method} {url.path}", "global"))
                return
            route(self, query)
        except Drop as drop:
            self._drop(drop.reset)

    # -- auth ----------------------------------------------------------------------------
    def _bearer(self) -> str:
        return self.headers.get("Authorization", "").removeprefix("Bearer ").strip()

    def _expire_early(self, kind: str) -> None:
        """The expire_token and revoked faults, on a request with a live token not spared (a
        spared token is spared this once): the token is forgotten, so the request is answered
        401; revoked, every token of the channel too, and its grant."""
        token, st = self._bearer(), self.fake.state
        with st.lock:
            channel = st.data["tokens"].get(token)
            if channel is None:
                return
            if token in st.data["spared"]:
                st.data["spared"].remove(token)
                st.save()
                return
            fault = self.fake.faults.pop_first(
                lambda f: f["fault"] in ("expire_token", "revoked") and f.get("on") in (None, kind)
            )
            if fault is not None and fault["fault"] == "revoked":
                tokens = st.data["tokens"]
                for dead in [t for t, c in tokens.items() if c == channel]:
                    del tokens[dead]
                st.data["channels"][channel]["revoked"] = True
                st.save()
            elif fault is not None:
                del st.data["tokens"][token]
                st.data["channels"][channel]["expired_early"] = bool(fault.get("spare", True))
                st.save()

    def _channel(self, kind: str = "") -> str | None:
        """The channel the bearer token belongs to; None after a 401 was sent."""
        st = self.fake.state
        with st.lock:
            channel = st.data["tokens"].get(self._bearer())
            if channel is None:
                st.data["unauthorized"].append(kind or "list")
                st.save()
        if channel is None:
            self._send(401, UNAUTHENTICATED, {"WWW-Authenticate": INVALID_TOKEN})
        return channel

    def token(self, _query: dict[str, str]) -> None:
        form = {k: v[-1] for k, v in parse_qs(self._body().decode()).items()}
        st = self.fake.state
        if form.get("grant_type") == "authorization_code":
            self._exchange_code(form)
            return
        if form.get("grant_type") != "refresh_token":
            self._send(400, {"error": "unsupported_grant_type"})
            return
        if self.fake.faults.take("invalid_client") is not None:
            self._send(401, {"error": "invalid_client", "error_description": "Unauthorized"})
            return
        with st.lock:
            found = [
                cid
                for cid, ch in st.data["channels"].items()
                if ch["refresh_token"] == form.get("refresh_token") and not ch.get("revoked")
            ]
            if self.fake.faults.take("invalid_grant") is not None and found:
                st.data["channels"][found[0]]["revoked"] = True
                st.save()
                found = []
            if not found:
                self._send(
                    400,
                    {
                        "error": "invalid_grant",
                        "error_description": "Token has been expired or revoked.",
                    },
                )
                return
            access = new_secret("ya29.fake-", 24)
            st.data["tokens"][access] = found[0]
            if st.data["channels"][found[0]].pop("expired_early", False):
                st.data["spared"].append(access)
            st.save()
        self._send(
            200,
            {
                "access_token": access,
                "expires_in": 3599,
                "token_type": "Bearer",
                "scope": form.get("scope", ""),
            },
        )

    def authorize(self, query: dict[str, str]) -> None:
        """The consent screen, already agreed: back to the redirect URI with a code for the
        channel named by login_hint (or the only channel)."""
        st = self.fake.state
        with st.lock:
            channels = st.data["channels"]
            hint = query.get("login_hint")
            found = [c for c, ch in channels.items() if hint in (None, ch["handle"])]
            if len(found) != 1 or "redirect_uri" not in query:
                self._send(400, {"error": "invalid_request"})
                return
            code = new_secret("code-", 12)
            st.data.setdefault("codes", {})[code] = found[0]
            st.save()
        target = f"{query['redirect_uri']}?code={code}&state={query.get('state', '')}"
        self._send(302, None, {"Location": target})

    def _exchange_code(self, form: dict[str, str]) -> None:
        st = self.fake.state
        with st.lock:
            channel = st.data.setdefault("codes", {}).pop(form.get("code", ""), None)
            if channel is None:
                self._send(400, {"error": "invalid_grant"})
                return
            ch = st.data["channels"][channel]
            ch.pop("revoked", None)
            access = new_secret("ya29.fake-", 24)
            st.data["tokens"][access] = channel
            st.save()
        self._send(
            200,
            {
                "access_token": access,
                "refresh_token": ch["refresh_token"],
                "expires_in": 3599,
                "token_type": "Bearer",
                "scope": " ".join(
                    [
                        "https://www.googleapis.com/auth/youtube.upload",
                        "https://www.googleapis.com/auth/youtube.readonly",
                    ]
                ),
            },
        )

    # -- resumable upload ----------------------------------------------------------------
    def initiate(self, query: dict[str, str]) -> None:
        body = self._body()
        channel = self._channel("initiate")
        if channel is None:
            return  # 401: no channel to charge
        faults, st = self.fake.faults, self.fake.state
        try:
            resource = json.loads(body or b"{}")
        except ValueError:
            resource = None
        snippet = resource.get("snippet") if isinstance(resource, dict) else None
        description = snippet.get("description", "") if isinstance(snippet, dict) else ""
        with st.lock:
            fault = None
            if st.left(channel, "insert") > 0:
                fault = faults.take(
                    "initiate_5xx",
                    "quota_exceeded",
                    "upload_limit_exceeded",
                    "forbidden",
                    "invalid_title",
                    "initiate_then_drop",
                    "foreign_location",
                )
                counted = fault is None or fault["fault"] != "quota_exceeded"
            else:
                counted = False
            if counted:  # received: counted, whatever the answer
                st.charge(channel, "insert", 1)
            st.data["initiations"].append(
                {
                    "channel": channel,
                    "description": str(description),
                    "counted": counted,
                    "at": time.time(),
                }
            )
            st.save()
        if not counted:
            self._send(
                403,
                _error(
                    403,
                    "quotaExceeded",
                    "The request cannot be completed because you have exceeded your quota.",
                    "youtube.quota",
                ),
            )
            return
        kind = fault["fault"] if fault is not None else None
        if query.get("uploadType") != "resumable":
            self._send(400, _error(400, "badRequest", "only resumable uploads are served"))
            return
        if kind == "initiate_5xx":
            self._send(503, _error(503, "backendError", "Backend Error", "global"))
            return
        if kind == "forbidden":
            message = "The request is not properly authorized to upload to this channel."
            self._send(403, _error(403, "forbidden", message))
            return
        if kind == "invalid_title":
            self._send(
                400,
                _error(
                    400, "invalidTitle", "The request metadata specifies an invalid video title."
                ),
            )
            return
        if kind == "upload_limit_exceeded":
            self._send(
                400,
                _error(
                    400,
                    "uploadLimitExceeded",
                    "The user has exceeded the number of videos they may upload.",
                ),
            )
            return
        total = self.headers.get("X-Upload-Content-Length")
        if total is None or not total.isdigit():
            self._send(400, _error(400, "badRequest", "X-Upload-Content-Length is required"))
            return
        upload_id = new_secret("", 16)
        with st.lock:
            st.data["sessions"][upload_id] = {
                "channel": channel,
                "part": query.get("part", ""),
                "notifySubscribers": query.get("notifySubscribers", "true"),
                "resource": resource if isinstance(resource, dict) else {},
                "content_type": self.headers.get("X-Upload-Content-Type", ""),
                "total": int(total),
                "received": 0,
                "puts": 0,
                "video_id": None,
                "gone": 404 if kind == "initiate_then_drop" else None,
                "created": time.time(),
                "stored_at": None,
            }
            st.blob(upload_id).write_bytes(b"")
            st.save()
        base = self.fake.base_url
        if kind == "foreign_location":
            base = str(fault.get("to") or "http://127.0.0.2:9/") if fault else base
        location = f"{base}upload/youtube/v3/videos?uploadType=resumable&upload_id={upload_id}"
        if kind == "initiate_then_drop" and fault is not None and not fault.get("answered", True):
            raise Drop(reset=False)
        self._send(200, None, {"Location": location, "X-GUploader-UploadID": upload_id})

    def put(self, query: dict[str, str]) -> None:
        st, faults = self.fake.state, self.fake.faults
        upload_id = query.get("upload_id", "")
        with st.lock:
            session = st.data["sessions"].get(upload_id)
            gone_now = session is not None and session["gone"] is None
            if gone_now and session is not None and faults.take("expire_session") is not None:
                session["gone"] = 404
                st.save()
        if session is None or session["gone"] is not None:
            self._body()
            status = 404 if session is None else int(session["gone"])
            self._send(status, _error(status, "notFound", "upload session not found", "global"))
            return
        kind = "status" if "*" in self.headers.get("Content-Range", "") else "chunk"
        if self._channel_of_put(kind) is None:
            return  # refused for its token: nothing stored
        crange = self.headers.get("Content-Range", "")
        start, total = _content_range(crange)
        if total is not None and total != session["total"]:
            self._body()
            self._send(400, _error(400, "badRequest", f"Content-Range {crange} != total"))
            return
        with st.lock:
            session["puts"] += 1
        if start is None:  # a status query
            self._body()
            self._answer(upload_id, session)
            return
        if session["video_id"] is not None:  # complete already: the same answer again
            self._body()
            self._answer(upload_id, session)
            return
        length = int(self.headers.get("Content-Length") or 0)
        fault = faults.take("reset_mid_chunk", "short_range", "slow_body") if length > 1 else None
        if fault is not None and fault["fault"] == "slow_body":
            self._slow_body(upload_id, session, start, length, float(fault.get("seconds", 5.0)))
            return
        if fault is not None:
            half = self._body(length // 2)
            self._store(upload_id, session, start, half)
            if fault["fault"] == "reset_mid_chunk":
                raise Drop(reset=True)
            self.rfile.read(length - len(half))  # read and ignore the rest
            self._answer(upload_id, session)
            return
        self._store(upload_id, session, start, self._body())
        self._answer(upload_id, session)

    def _channel_of_put(self, kind: str) -> str | None:
        """A session PUT's token checked (its body read first when refused)."""
        with self.fake.state.lock:
            known = self._bearer() in self.fake.state.data["tokens"]
        if not known:
            self._body()
        return self._channel(kind)

    def _slow_body(
        self, upload_id: str, session: dict[str, Any], start: int, length: int, pause: float
    ) -> None:
        """Half the body, a pause, the rest; stored once whole. A client that went away in the
        meantime leaves nothing (the bytes it had already queued may still arrive)."""
        try:
            data = self._body(length // 2)
            time.sleep(pause)
            data += self.rfile.read(length - len(data))
        except OSError:
            data = b""
        if len(data) < length:
            raise Drop(reset=False)
        self._store(upload_id, session, start, data)
        with contextlib.suppress(OSError):
            self._answer(upload_id, session)

    def _store(self, upload_id: str, session: dict[str, Any], start: int, data: bytes) -> None:
        """Appends what is new in `data` (a resend of bytes already held is ignored)."""
        st = self.fake.state
        with st.lock:
            have = session["received"]
            if start > have:
                return  # a gap: nothing stored, the Range tells the client where to go on
            new = data[have - start :]
            new = new[: session["total"] - have]
            if new:
                with st.blob(upload_id).open("ab") as f:
                    f.write(new)
                session["received"] = have + len(new)
                session["stored_at"] = time.time()
            if session["received"] == session["total"] and session["video_id"] is None:
                self._complete(upload_id, session)
            st.save()

    def _complete(self, upload_id: str, session: dict[str, Any]) -> None:
        st = self.fake.state
        channel = session["channel"]  # its insert was counted when the session was initiated
        video_id = secrets.token_urlsafe(8).replace("-", "a").replace("_", "b")[:11]
        raw = st.blob(upload_id).read_bytes()
        resource = session["resource"]
        late = self.fake.faults.take("late_listing")
        fault = self.fake.faults.take("processing_failed", "lost_response")
        processing = "succeeded"
        lost = False
        if fault is not None and fault["fault"] == "processing_failed":
            processing = "failed"
            lost = self.fake.faults.take("lost_response") is not None
        elif fault is not None:
            lost = True
        st.data["videos"][video_id] = {
            "id": video_id,
            "channel": channel,
            "upload_id": upload_id,
            "sha256": hashlib.sha256(raw).hexdigest(),
            "size": len(raw),
            "snippet": resource.get("snippet", {}),
            "status": {
                "uploadStatus": "processed" if processing == "succeeded" else "failed",
                **resource.get("status", {}),
            },
            "processing": processing,
            "published_at": datetime.now(UTC).isoformat(),
            "listed_from": time.time() + float(late.get("seconds", 5.0)) if late else 0.0,
        }
        st.data["channels"][channel]["videos"].insert(0, video_id)
        session["video_id"] = video_id
        session["lost"] = lost

    def _answer(self, upload_id: str, session: dict[str, Any]) -> None:
        if session["video_id"] is not None:
            if session.pop("lost", False):
                self.fake.state.save()
                raise Drop(reset=False)  # the video exists; its answer never arrives
            self._send(
                200,
                _video_resource(
                    self.fake.state.data["videos"][session["video_id"]], "snippet,status"
                ),
            )
            return
        received = session["received"]
        headers = {"Range": f"bytes=0-{received - 1}"} if received else {}
        self._send(308, None, headers)

    # -- thumbnails.set ------------------------------------------------------------------
    def thumbnails_set(self, query: dict[str, str]) -> None:
        channel = self._channel("thumbnail")
        if channel is None:
            self._body()
            return
        data = self._body()
        if self.fake.faults.take("thumbnail_5xx") is not None:
            self._send(503, _error(503, "backendError", "Backend Error"))
            return
        st = self.fake.state
        with st.lock:
            video = st.data["videos"].get(query.get("videoId", ""))
            if video is None or video["channel"] != channel:
                self._send(404, _error(404, "videoNotFound", "video not found"))
                return
            if not st.data["channels"][channel].get("custom_thumbnails", True):
                self._send(
                    403,
                    _error(
                        403,
                        "forbidden",
                        "The authenticated user doesn't have permissions to upload and set "
                        "custom video thumbnails.",
                        "youtube.thumbnail",
                    ),
                )
                return
            if not data.startswith(b"\xff\xd8") or len(data) > THUMBNAIL_MAX_BYTES:
                self._send(400, _error(400, "invalidImage", "not a JPEG up to 2 MB"))
                return
            if not st.charge(channel, "units", THUMBNAIL_COST):
                self._send(403, _error(403, "quotaExceeded", "quota exceeded", "youtube.quota"))
                return
            (st.folder / "bytes" / f"thumbnail-{video['id']}.jpg").write_bytes(data)
            sets = int((video.get("thumbnail") or {}).get("sets", 0)) + 1
            video["thumbnail"] = {
                "sha256": hashlib.sha256(data).hexdigest(),
                "size": len(data),
                "sets": sets,
            }
            st.save()
        url = f"{self.fake.base_url}vi/{video['id']}/maxresdefault.jpg"
        self._send(
            200,
            {
                "kind": "youtube#thumbnailSetResponse",
                "items": [{"default": {"url": url, "width": 120, "height": 90}}],
            },
        )

    # -- lists ---------------------------------------------------------------------------
    def _charge_list(self, channel: str) -> bool:
        st = self.fake.state
        with st.lock:
            if self.fake.faults.take("list_quota_exceeded") is None and st.charge(
                channel, "units", LIST_COST
            ):
                st.save()
                return True
        self._send(403, _error(403, "quotaExceeded", "quota exceeded", "youtube.quota"))
        return False

    def videos_list(self, query: dict[str, str]) -> None:
        channel = self._channel()
        if channel is None or not self._charge_list(channel):
            return
        ids = [i for i in query.get("id", "").split(",") if i]
        if len(ids) > 50:  # the API's limit of ids per call (a refused call is still charged)
            self._send(400, _error(400, "badRequest", f"{len(ids)} ids: at most 50 per call"))
            return
        videos = self.fake.state.data["videos"]
        items = [_video_resource(videos[i], query.get("part", "")) for i in ids if i in videos]
        self._send(
            200,
            {
                "kind": "youtube#videoListResponse",
                "items": items,
                "pageInfo": {"totalResults": len(items), "resultsPerPage": len(items)},
            },
        )

    def channels_list(self, query: dict[str, str]) -> None:
        channel = self._channel()
        if channel is None or not self._charge_list(channel):
            return
        ch = self.fake.state.data["channels"][channel]
        item = {
            "kind": "youtube#channel",
            "id": channel,
            "contentDetails": {"relatedPlaylists": {"uploads": ch["uploads"]}},
        }
        self._send(200, {"kind": "youtube#channelListResponse", "items": [item]})

    def playlist_items_list(self, query: dict[str, str]) -> None:
        channel = self._channel()
        if channel is None or not self._charge_list(channel):
            return
        st = self.fake.state
        owner = [
            c for c, ch in st.data["channels"].items() if ch["uploads"] == query.get("playlistId")
        ]
        if not owner:
            self._send(404, _error(404, "playlistNotFound", "playlist not found"))
            return
        now = time.time()
        ids = [
            vid
            for vid in st.data["channels"][owner[0]]["videos"]
            if st.data["videos"][vid].get("listed_from", 0.0) <= now
        ]
        size = max(1, min(50, int(query.get("maxResults", 5))))
        start = int(query.get("pageToken") or 0)
        page = ids[start : start + size]
        items = []
        for vid in page:
            v = st.data["videos"][vid]
            items.append(
                {
                    "kind": "youtube#playlistItem",
                    "snippet": {
                        **v["snippet"],
                        "resourceId": {"kind": "youtube#video", "videoId": vid},
                    },
                    "contentDetails": {"videoId": vid},
                }
            )
        body: dict[str, Any] = {"kind": "youtube#playlistItemListResponse", "items": items}
        if start + size < len(ids):
            body["nextPageToken"] = str(start + size)
        self._send(200, body)

    # -- control -------------------------------------------------------------------------
    def control_faults(self, _query: dict[str, str]) -> None:
        spec = json.loads(self._body() or b"{}")
        try:
            self.fake.faults.push(spec.pop("fault"), **spec)
        except (KeyError, ValueError) as exc:
            self._send(400, {"error": str(exc)})
            return
        self._send(200, {"pending": self.fake.faults.pending()})

    def control_channel(self, _query: dict[str, str]) -> None:
        spec = json.loads(self._body() or b"{}")
        self._send(200, {"id": self.fake.add_channel(spec["handle"], spec["refresh_token"])})

    def control_state(self, _query: dict[str, str]) -> None:
        self._send(200, self.fake.snapshot())


def _video_resource(v: dict[str, Any], part: str) -> dict[str, Any]:
    parts = set(part.split(",")) if part else {"snippet", "status"}
    out: dict[str, Any] = {"kind": "youtube#video", "id": v["id"]}
    if "snippet" in parts:
        out["snippet"] = {
            **v["snippet"],
            "channelId": v["channel"],
            "publishedAt": v["published_at"],
        }
    if "status" in parts:
        out["status"] = v["status"]
    if "processingDetails" in parts:
        out["processingDetails"] = {"processingStatus": v["processing"]}
    if "statistics" in parts:
        out["statistics"] = dict(
            v.get("statistics") or {"viewCount": "0", "likeCount": "0", "commentCount": "0"}
        )
    return out


def _content_range(value: str) -> tuple[int | None, int | None]:
    """(first byte, total) of 'bytes a-b/N'; (None, N) for a status query 'bytes */N'."""
    unit, _, spec = value.partition(" ")
    if unit != "bytes" or "/" not in spec:
        return None, None
    span, _, total = spec.partition("/")
    size = int(total) if total.isdigit() else None
    if span == "*":
        return None, size
    return int(span.split("-")[0]), size


def _request_kind(method: str, path: str, query: dict[str, str], headers: Any) -> str:
    if path.endswith("/token"):
        return "token"
    if "/thumbnails/" in path:
        return "thumbnail"
    if path.startswith("/upload/") and method == "POST":
        return "initiate"
    if path.startswith("/upload/"):
        return "status" if "*" in headers.get("Content-Range", "") else "chunk"
    return "list"


_ROUTES: dict[tuple[str, str], Any] = {
    ("POST", "/token"): _Handler.token,
    ("GET", "/o/oauth2/auth"): _Handler.authorize,
    ("POST", "/upload/youtube/v3/videos"): _Handler.initiate,
    ("POST", "/resumable/upload/youtube/v3/videos"): _Handler.initiate,
    ("PUT", "/upload/youtube/v3/videos"): _Handler.put,
    ("PUT", "/resumable/upload/youtube/v3/videos"): _Handler.put,
    ("POST", "/upload/youtube/v3/thumbnails/set"): _Handler.thumbnails_set,
    ("GET", "/youtube/v3/videos"): _Handler.videos_list,
    ("GET", "/youtube/v3/channels"): _Handler.channels_list,
    ("GET", "/youtube/v3/playlistItems"): _Handler.playlist_items_list,
    ("POST", "/_fake/faults"): _Handler.control_faults,
    ("POST", "/_fake/channels"): _Handler.control_channel,
    ("GET", "/_fake/state"): _Handler.control_state,
}


def connect_accounts(fake: FakeYouTube, state: Any, env: str, accounts: list[Any]) -> None:
    """Demo wiring (`make demo PROVIDERS=fakes`): each account gets a channel on the fake and
    its grant stored encrypted (fakes.common.store_demo_grant)."""
    for account in accounts:
        token = new_secret("1//fake-", 24)
        fake.add_channel(account.handle, token)
        store_demo_grant(state, env, account, token)


def running(state_dir: str | Path, port: int = 0) -> contextlib.AbstractContextManager[FakeYouTube]:
    """The fake on 127.0.0.1 (an ephemeral port by default) for the duration of the block."""
    return serving(FakeYouTube(state_dir, port))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state-dir", default=".mdame/fake-youtube")
    parser.add_argument(
        "--channel",
        action="append",
        default=[],
        help="HANDLE=REFRESH_TOKEN: a channel to create (repeatable)",
    )
    args = parser.parse_args(argv)
    fake = FakeYouTube(args.state_dir, args.port)
    for spec in args.channel:
        handle, _, token = spec.partition("=")
        fake.add_channel(handle, token)
    fake.serve_until_interrupted("fake YouTube on {base_url} (token endpoint {base_url}token)")


if __name__ == "__main__":
    main()
