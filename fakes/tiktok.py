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
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import secrets
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

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

MiB = 1024 * 1024
PUBLIC_OPTIONS = ["PUBLIC_TO_EVERYONE", "MUTUAL_FOLLOW_FRIENDS", "SELF_ONLY"]
PRIVATE_OPTIONS = ["FOLLOWER_OF_CREATOR", "MUTUAL_FOLLOW_FRIENDS", "SELF_ONLY"]
PRIVACY_LEVELS = {"PUBLIC_TO_EVERYONE", "MUTUAL_FOLLOW_FRIENDS", "FOLLOWER_OF_CREATOR", "SELF_ONLY"}
VIDEO_TYPES = {"video/mp4", "video/quicktime", "video/webm"}
VIDEO_FIELDS = {
    "id", "create_time", "cover_image_url", "share_url", "video_description", "duration",
    "height", "width", "title", "embed_html", "embed_link", "like_count", "comment_count",
    "share_count", "view_count",
}  # fmt: skip
DEFAULT_SCOPES = ["user.info.basic", "video.publish", "video.list"]
TITLE_MAX_UTF16 = 2200  # the caption sent at init
LISTED_TEXT_MAX = 150  # title and video_description in the Video Object
DEFAULT_LIMITS: dict[str, Any] = {
    "init_per_minute": 6,
    "status_per_minute": 30,
    "creator_info_per_minute": 20,
    "list_per_minute": 600,
    "rate_window": 60.0,
    "min_chunk": 5 * MiB,
    "max_chunk": 64 * MiB,
    "max_final_chunk": 128 * MiB,
    "max_chunks": 1000,
    "upload_ttl": 3600.0,  # "the upload_url is valid for one hour after issuance"
    "processing_delay": 0.5,
    "moderation_delay": 0.0,
    "post_window": 86400.0,
    "unaudited_user_cap": 5,  # users an unaudited client may post for in 24 hours
    "access_token_ttl": 7200,
    "refresh_token_ttl": 180 * 86400,
}
# The token endpoint's status for an error; the docs show the body, not the status (RFC 6749
# says 400), so a client should read `error` whatever the status.
OAUTH_ERROR_STATUS = 400
# No documented fail_reason names an expired upload; "internal" is the documented retryable one.
EXPIRED_FAIL_REASON = "internal"

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

_ERROR_STATUS = {
    "ok": 200,
    "access_token_invalid": 401,
    "scope_not_authorized": 401,
    "invalid_params": 400,
    "invalid_publish_id": 400,
    "token_not_authorized_for_specified_publish_id": 400,
    "privacy_level_option_mismatch": 403,
    "unaudited_client_can_only_post_to_private_accounts": 403,
    "spam_risk_too_many_posts": 403,
    "reached_active_user_cap": 403,
    "url_ownership_unverified": 403,
    "rate_limit_exceeded": 429,
    "internal_error": 500,
    "not_found": 404,
}


class State(JsonState):
    """Creators, tokens, publishes, videos and rate windows (upload bytes in files beside them)."""

    def defaults(self) -> None:
        for key in ("creators", "tokens", "codes", "publishes", "videos", "rate"):
            self.data.setdefault(key, {})
        self.data["limits"] = {**DEFAULT_LIMITS, **self.data.get("limits", {})}
        self.data.setdefault("requests", [])
        self.data.setdefault("throttled", {})
        self.data.setdefault("list_calls", {})  # open_id -> authenticated video list calls
        self.data.setdefault("unauthorized", [])  # the kinds of the requests answered 401

    def blob(self, publish_id: str) -> Path:
        return self.folder / "bytes" / f"{publish_id.replace('~', '_')}.bin"


class _Knob:
    """A limit kept in the state (so it survives a restart), read and set as an attribute."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return obj.state.data["limits"][self.name]

    def __set__(self, obj: Any, value: Any) -> None:
        obj.set_limits(**{self.name: value})


def _log_id() -> str:
    return time.strftime("%Y%m%d%H%M%S", time.gmtime()) + secrets.token_hex(9).upper()


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def open_id_for(username: str) -> str:
    """The open_id the fake gives a creator (stable across restarts and runs)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"tiktok:{username}"))


class FakeTikTok(LocalServer):
    """The server. Start with `running(...)` in tests, or `main()` standalone."""

    state: State

    min_chunk = _Knob()
    max_chunk = _Knob()
    max_final_chunk = _Knob()
    max_chunks = _Knob()
    upload_ttl = _Knob()
    processing_delay = _Knob()
    moderation_delay = _Knob()
    rate_window = _Knob()
    post_window = _Knob()
    init_per_minute = _Knob()
    status_per_minute = _Knob()
    creator_info_per_minute = _Knob()
    list_per_minute = _Knob()
    unaudited_user_cap = _Knob()
    access_token_ttl = _Knob()
    refresh_token_ttl = _Knob()

    def __init__(
        self,
        state_dir: str | Path,
        port: int = 0,
        host: str = "127.0.0.1",
        client_key: str | None = None,
        client_secret: str | None = None,
    ) -> None:
        self.state = State(Path(state_dir))
        self.state.load()
        self.faults = NamedFaults(FAULTS)
        self.clock: Callable[[], float] = time.time
        # None accepts any non-empty client credentials.
        self.client_key, self.client_secret = client_key, client_secret
        super().__init__(host, port)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _Handler

    # -- set-up (tests) ------------------------------------------------------------------
    def add_creator(
        self,
        username: str,
        refresh_token: str,
        audited: bool = False,
        privacy_options: list[str] | None = None,
        max_video_post_duration_sec: int = 600,
        daily_post_cap: int = 15,
        private_account: bool | None = None,
        scopes: list[str] | None = None,
    ) -> str:
        """A creator who granted the app `refresh_token` (a new grant: the creator's earlier
        tokens stop working); returns the open_id. `audited` is the app's audit status as
        this creator sees it. An unaudited app may post only to private accounts, so the
        account is private unless said otherwise; its privacy options follow the account."""
        private = (not audited) if private_account is None else private_account
        open_id = open_id_for(username)
        with self.state.lock:
            for token in self.state.data["tokens"].values():
                if token["open_id"] == open_id:
                    token["revoked"] = True
            earlier = self.state.data["creators"].get(open_id, {})
            self.state.data["creators"][open_id] = {
                "username": username,
                "nickname": username.title(),
                "refresh_token": refresh_token,
                "refresh_expires_at": self.clock() + self.refresh_token_ttl,
                "audited": audited,
                "private_account": private,
                "privacy_options": list(
                    privacy_options or (PRIVATE_OPTIONS if private else PUBLIC_OPTIONS)
                ),
                "max_video_post_duration_sec": max_video_post_duration_sec,
                "daily_post_cap": daily_post_cap,
                "scopes": list(scopes or DEFAULT_SCOPES),
                "revoked": False,
                "posts": earlier.get("posts", []),  # a new grant does not reset the daily cap
            }
            self.state.save()
        return open_id

    def refresh_token(self, open_id: str) -> str:
        """The creator's current refresh token (it rotates on each refresh)."""
        with self.state.lock:
            return str(self.state.data["creators"][open_id]["refresh_token"])

    def issue_code(self, open_id: str, redirect_uri: str = "", code_challenge: str = "") -> str:
        """An authorization code for the creator, as the consent redirect would carry. With a
        `code_challenge` (Login Kit for Desktop's PKCE: the hex SHA-256 of the verifier), the
        exchange must send its code_verifier."""
        code = new_secret("code.", 24)
        with self.state.lock:
            self.state.data["codes"][code] = {
                "open_id": open_id,
                "redirect_uri": redirect_uri,
                "code_challenge": code_challenge,
            }
            self.state.save()
        return code

    def revoke(self, open_id: str) -> None:
        """The creator removes the app: access and refresh tokens stop working."""
        with self.state.lock:
            self.state.data["creators"][open_id]["revoked"] = True
            for token in self.state.data["tokens"].values():
                if token["open_id"] == open_id:
                    token["revoked"] = True
            self.state.save()

    def set_limits(self, **limits: Any) -> None:
        unknown = set(limits) - set(DEFAULT_LIMITS)
        if unknown:
            raise ValueError(f"unknown limits {sorted(unknown)}; known: {sorted(DEFAULT_LIMITS)}")
        with self.state.lock:
            self.state.data["limits"].update(limits)
            self.state.save()

    def count_post(self, open_id: str) -> None:
        """The creator posted through the app now, by another way than this server's API (as
        another deployment would): it counts against the daily caps."""
        with self.state.lock:
            self.state.data["creators"][open_id]["posts"].append(self.clock())
            self.state.save()

    def expire_publish(self, publish_id: str) -> None:
        """The publish's upload_url expires now (as if its hour had passed)."""
        with self.state.lock:
            pub = self.state.data["publishes"][publish_id]
            pub["created"] = self.clock() - self.upload_ttl - 1
            self.advance(pub)
            self.state.save()

    def add_video(
        self, open_id: str, title: str, privacy_level: str = "PUBLIC_TO_EVERYONE", age: float = 0
    ) -> str:
        """A video already on the creator's profile (posted `age` seconds ago), for tests that
        read the list without uploading first. Returns its id."""
        with self.state.lock:
            post_id = self._new_video(open_id, "", title, privacy_level, self.clock() - age)
            self.state.save()
            return post_id

    def set_statistics(self, post_id: str, views: int, likes: int, comments: int = 0) -> None:
        with self.state.lock:
            self.state.data["videos"][post_id]["statistics"] = {
                "view_count": views,
                "like_count": likes,
                "comment_count": comments,
                "share_count": 0,
            }
            self.state.save()

    # -- inspection (tests) --------------------------------------------------------------
    def publishes(self) -> list[dict[str, Any]]:
        """Every publish (init accepted), oldest first, with its status as of now."""
        with self.state.lock:
            pubs = list(self.state.data["publishes"].values())
            for pub in pubs:
                self.advance(pub)
            return [dict(p, status=self.status_of(p)) for p in pubs]

    def videos(self, open_id: str | None = None) -> list[dict[str, Any]]:
        """The creators' videos posted by now (private ones too), newest first."""
        now_ms = self.clock() * 1000
        with self.state.lock:
            found = [
                dict(v)
                for v in self.state.data["videos"].values()
                if (open_id is None or v["open_id"] == open_id) and v["create_ms"] <= now_ms
            ]
        return sorted(found, key=lambda v: -v["create_ms"])

    def video_bytes(self, post_or_publish_id: str) -> bytes:
        with self.state.lock:
            video = self.state.data["videos"].get(post_or_publish_id)
            publish_id = video["publish_id"] if video else post_or_publish_id
            return self.state.blob(publish_id).read_bytes()

    def counters(self, open_id: str) -> dict[str, int]:
        """The creator's requests in the current rate windows (summed over its access tokens),
        its posts in the post window, and how many requests were refused with a 429."""
        now = self.clock()
        with self.state.lock:
            tokens = {t for t, v in self.state.data["tokens"].items() if v["open_id"] == open_id}
            out = {bucket: 0 for bucket in ("init", "status", "creator_info")}
            for token in tokens:
                for bucket, times in self.state.data["rate"].get(token, {}).items():
                    out[bucket] += sum(1 for t in times if t > now - self.rate_window)
            app = self.state.data["rate"].get("_app", {}).get("list", [])
            out["list"] = sum(1 for t in app if t > now - self.rate_window)  # per app, not token
            posts = self.state.data["creators"][open_id]["posts"]
            out["posts"] = sum(1 for t in posts if t > now - self.post_window)
            out["throttled"] = int(self.state.data["throttled"].get(open_id, 0))
            return out

    def requests(self) -> list[str]:
        """Every request line seen (method, path and query), oldest first."""
        with self.state.lock:
            return list(self.state.data["requests"])

    def unauthorized(self) -> list[str]:
        """The kinds of the requests answered 401 (creator_info, init, status, list), oldest
        first."""
        with self.state.lock:
            return list(self.state.data["unauthorized"])

    def expire_tokens(self, open_id: str, spare: bool = True) -> None:
        """The creator's access tokens expire now, before their time (refused from now on);
        `spare`: the next one issued is spared its first request."""
        with self.state.lock:
            for token in self.state.data["tokens"].values():
                if token["open_id"] == open_id and not token.get("spared"):
                    token["expires_at"] = min(token["expires_at"], self.clock() - 1)
            self.state.data["creators"][open_id]["expired_early"] = spare
            self.state.save()

    def snapshot(self) -> dict[str, Any]:
        with self.state.lock:
            return json.loads(json.dumps(self.state.data))

    # -- the model (call with the state lock held) ---------------------------------------
    def advance(self, pub: dict[str, Any]) -> None:
        """An unfinished upload older than its upload_url's lifetime fails."""
        incomplete = pub["received"] < pub["video_size"] and pub["fail_reason"] is None
        if incomplete and self.clock() > pub["created"] + self.upload_ttl:
            pub["fail_reason"] = EXPIRED_FAIL_REASON
            pub["expired"] = True

    def status_of(self, pub: dict[str, Any]) -> str:
        if pub["fail_reason"] is not None:
            return "FAILED"
        video = self.state.data["videos"].get(pub["post_id"] or "")
        if video is not None and self.clock() >= video["create_ms"] / 1000:
            return "PUBLISH_COMPLETE"
        return "PROCESSING_UPLOAD"

    def public_now(self, video: dict[str, Any]) -> bool:
        public_from = video["public_from"]
        return public_from is not None and self.clock() >= public_from

    def _new_video(
        self, open_id: str, publish_id: str, title: str, privacy_level: str, at: float
    ) -> str:
        post_id = str(7 * 10**18 + secrets.randbelow(10**18))
        # Unique create times, so a cursor (a create time) never splits a tie.
        taken = {v["create_ms"] for v in self.state.data["videos"].values()}
        create_ms = int(at * 1000)
        while create_ms in taken:
            create_ms += 1
        public = privacy_level == "PUBLIC_TO_EVERYONE"
        self.state.data["videos"][post_id] = {
            "id": post_id,
            "open_id": open_id,
            "publish_id": publish_id,
            "title": title,
            "privacy_level": privacy_level,
            "create_ms": create_ms,
            "public_from": create_ms / 1000 + self.moderation_delay if public else None,
        }
        return post_id

    def complete(self, pub: dict[str, Any]) -> None:
        """The last byte arrived: processing starts (or fails, when a fault says so)."""
        failed = self.faults.take("processing_failed")
        if failed is not None:
            pub["fail_reason"] = str(failed.get("reason", "internal"))
            return
        title = str(pub["post_info"].get("title") or "")
        at = self.clock() + self.processing_delay
        pub["post_id"] = self._new_video(
            pub["open_id"], pub["publish_id"], title, pub["privacy_level"], at
        )


def _envelope(code: str, message: str = "", data: dict[str, Any] | None = None) -> dict:
    return {"data": data or {}, "error": {"code": code, "message": message, "log_id": _log_id()}}


class _Plumbing(JsonHandler):
    fake: FakeTikTok

    def _api(self, code: str, message: str = "", data: dict[str, Any] | None = None) -> None:
        """An API answer in TikTok's envelope, with the HTTP status its error code has."""
        self._send(_ERROR_STATUS[code], _envelope(code, message, data))

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _json(self, raw: bytes) -> dict[str, Any] | None:
        """The request's JSON object; None after a 400 invalid_params was sent."""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._api("invalid_params", "The request body is not a JSON object.")
            return None
        return body

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        with self.fake.state.lock:
            self.fake.state.data["requests"].append(f"{method} {url.path}?{url.query}")
        route = _ROUTES.get((method, url.path.rstrip("/")))
        kind = route[1] if route else ""
        self._expire_early(kind, query)
        slow = self.fake.faults.pop_first(
            lambda f: f["fault"] == "slow" and f.get("on") in (None, kind)
        )
        if slow is not None:
            time.sleep(float(slow.get("seconds", 1.0)))
        try:
            if route is None:
                self._body()
                self._api("not_found", f"no route {method} {url.path}")
                return
            route[0](self, query)
        except Drop:
            self._drop()

    # -- auth and limits -----------------------------------------------------------------
    def _expire_early(self, kind: str, query: dict[str, str]) -> None:
        """The expire_token fault, on a request with a live access token (not spared: a spared
        token is spared this once) or on a chunk (its creator's tokens)."""
        fake, st = self.fake, self.fake.state
        if kind in ("token", "control", ""):
            return
        with st.lock:
            if kind == "chunk":
                found = [
                    p["open_id"]
                    for p in st.data["publishes"].values()
                    if p["upload_id"] == query.get("upload_id")
                ]
                open_id = found[0] if found else None
            else:
                token = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
                grant = st.data["tokens"].get(token)
                live = grant is not None and not grant["revoked"]
                if not live or fake.clock() >= grant["expires_at"]:
                    return
                if grant.pop("spared", False):
                    st.save()
                    return
                open_id = grant["open_id"]
            if open_id is None:
                return
            fault = fake.faults.pop_first(
                lambda f: f["fault"] == "expire_token" and f.get("on") in (None, kind)
            )
            if fault is not None:
                fake.expire_tokens(open_id, bool(fault.get("spare", True)))

    def _caller(self, *scopes: str) -> tuple[str, str] | None:
        """(open_id, access token) of the bearer; None after a 401 was sent. Any one of
        `scopes` must have been granted."""
        token = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        st = self.fake.state
        with st.lock:
            found = st.data["tokens"].get(token)
            valid = (
                found is not None
                and not found["revoked"]
                and self.fake.clock() < found["expires_at"]
            )
            if valid and found is not None and self.fake.faults.take("revoked") is not None:
                self.fake.revoke(found["open_id"])
                valid = False
        if not valid or found is None:
            with st.lock:
                route = _ROUTES.get(("POST", urlsplit(self.path).path.rstrip("/")))
                st.data["unauthorized"].append(route[1] if route else "")
                st.save()
            self._api("access_token_invalid", "The access token is invalid or not found.")
            return None
        if scopes and not set(scopes) & set(found["scope"].split(",")):
            self._api("scope_not_authorized", f"The user did not authorize {scopes[0]}.")
            return None
        return str(found["open_id"]), token

    def _allowed(self, open_id: str, key: str, bucket: str) -> bool:
        """Counts the request in the bucket's sliding window; False after a 429 was sent."""
        fake, st = self.fake, self.fake.state
        now = fake.clock()
        with st.lock:
            times = st.data["rate"].setdefault(key, {}).setdefault(bucket, [])
            times[:] = [t for t in times if t > now - fake.rate_window]
            if len(times) < int(st.data["limits"][f"{bucket}_per_minute"]):
                times.append(now)
                st.save()
                return True
            st.data["throttled"][open_id] = st.data["throttled"].get(open_id, 0) + 1
            st.save()
        self._api("rate_limit_exceeded", "Your request is blocked by the API rate limit.")
        return False

    def _server_fault(self, fault: str) -> bool:
        """Answers the queued 5xx fault of this kind, if any (True when it did)."""
        found = self.fake.faults.take(fault)
        if found is None:
            return False
        status = int(found.get("status", 500))
        self._send(status, _envelope("internal_error", "TikTok server error. Try again later."))
        return True


class _Handler(_Plumbing):
    # -- OAuth ---------------------------------------------------------------------------
    def _oauth_error(self, error: str, description: str) -> None:
        body = {"error": error, "error_description": description, "log_id": _log_id()}
        self._send(OAUTH_ERROR_STATUS, body)

    def token(self, _query: dict[str, str]) -> None:
        form = {k: v[-1] for k, v in parse_qs(self._body().decode()).items()}
        fake, st = self.fake, self.fake.state
        key, secret = form.get("client_key", ""), form.get("client_secret", "")
        if not key or not secret or fake.client_key not in (None, key):
            self._oauth_error("invalid_client", "Client key or secret is invalid.")
            return
        if fake.client_secret not in (None, secret):
            self._oauth_error("invalid_client", "Client key or secret is invalid.")
            return
        grant = form.get("grant_type")
        with st.lock:
            if grant == "authorization_code":
                code = st.data["codes"].pop(form.get("code", ""), None)
                if code is None or code["redirect_uri"] not in ("", form.get("redirect_uri")):
                    self._oauth_error("invalid_grant", "Authorization code is expired.")
                    return
                verifier = form.get("code_verifier", "")
                challenge = code.get("code_challenge", "")
                if challenge and hashlib.sha256(verifier.encode()).hexdigest() != challenge:
                    self._oauth_error(
                        "invalid_request", "Code verifier or code challenge is invalid."
                    )
                    return
                open_id = code["open_id"]
                creator = st.data["creators"][open_id]
                creator["revoked"] = False
                creator["refresh_token"] = new_secret("rft.", 32)
                creator["refresh_expires_at"] = fake.clock() + fake.refresh_token_ttl
            elif grant == "refresh_token":
                sent = form.get("refresh_token", "")
                found = [
                    oid
                    for oid, c in st.data["creators"].items()
                    if sent and c["refresh_token"] == sent
                    if not c["revoked"] and fake.clock() < c["refresh_expires_at"]
                ]
                if found and fake.faults.take("invalid_grant") is not None:
                    fake.revoke(found[0])
                    found = []
                if not found:
                    self._oauth_error("invalid_grant", "Refresh token is invalid or expired.")
                    return
                open_id = found[0]
                creator = st.data["creators"][open_id]
                # Rotation: the refresh token sent stops working once a new one is issued.
                creator["refresh_token"] = new_secret("rft.", 32)
            else:
                self._oauth_error("unsupported_grant_type", f"grant_type {grant!r}")
                return
            access = new_secret("act.", 32)
            scope = ",".join(creator["scopes"])
            st.data["tokens"][access] = {
                "open_id": open_id,
                "expires_at": fake.clock() + fake.access_token_ttl,
                "scope": scope,
                "revoked": False,
            }
            if creator.pop("expired_early", False):
                st.data["tokens"][access]["spared"] = True
            st.save()
            answer = {
                "access_token": access,
                "expires_in": int(fake.access_token_ttl),
                "open_id": open_id,
                "refresh_expires_in": int(creator["refresh_expires_at"] - fake.clock()),
                "refresh_token": creator["refresh_token"],
                "scope": scope,
                "token_type": "Bearer",
            }
        self._send(200, answer)

    def authorize(self, query: dict[str, str]) -> None:
        """The consent page, already agreed: back to redirect_uri with a code and the state.
        The creator is the only one, or the one named by `username` (not a TikTok parameter)."""
        creators = self.fake.state.data["creators"]
        hint = query.get("username")
        found = [o for o, c in creators.items() if hint in (None, c["username"])]
        if len(found) != 1 or "redirect_uri" not in query:
            self._send(400, {"error": "invalid_request"})
            return
        code = self.fake.issue_code(
            found[0], query["redirect_uri"], query.get("code_challenge", "")
        )
        scopes = quote(query.get("scope", ""), safe=",")
        target = (
            f"{query['redirect_uri']}?code={quote(code)}&scopes={scopes}"
            f"&state={quote(query.get('state', ''))}"
        )
        self._send(302, None, {"Location": target})

    # -- creator info --------------------------------------------------------------------
    def creator_info(self, _query: dict[str, str]) -> None:
        self._body()
        caller = self._caller("video.publish")
        if caller is None:
            return
        open_id, token = caller
        if not self._allowed(open_id, token, "creator_info"):
            return
        if self._server_fault("creator_info_5xx"):
            return
        with self.fake.state.lock:
            c = self.fake.state.data["creators"][open_id]
            data = {
                "creator_avatar_url": f"{self.fake.base_url}avatar/{open_id}.jpeg",
                "creator_username": c["username"],
                "creator_nickname": c["nickname"],
                "privacy_level_options": list(c["privacy_options"]),
                "comment_disabled": False,
                "duet_disabled": c["private_account"],
                "stitch_disabled": c["private_account"],
                "max_video_post_duration_sec": c["max_video_post_duration_sec"],
            }
            refusal = _post_refusal(self.fake, open_id)
        # The docs answer these two with HTTP 200, on purpose: the creator can't post now.
        code = refusal[0] if refusal else "ok"
        self._send(200, _envelope(code, refusal[1] if refusal else "", data))

    # -- init ----------------------------------------------------------------------------
    def video_init(self, _query: dict[str, str]) -> None:
        raw = self._body()
        caller = self._caller("video.publish")
        if caller is None:
            return
        open_id, token = caller
        if not self._allowed(open_id, token, "init") or self._server_fault("init_5xx"):
            return
        body = self._json(raw)
        if body is None:
            return
        post_info, source = body.get("post_info"), body.get("source_info")
        if not isinstance(post_info, dict) or not isinstance(source, dict):
            self._api("invalid_params", "post_info and source_info are required.")
            return
        title = post_info.get("title") or ""
        if not isinstance(title, str) or _utf16_len(title) > TITLE_MAX_UTF16:
            self._api("invalid_params", "The title is invalid.")
            return
        fake, st = self.fake, self.fake.state
        with st.lock:
            creator = st.data["creators"][open_id]
            level = post_info.get("privacy_level")
            if level not in creator["privacy_options"]:
                self._api(
                    "privacy_level_option_mismatch",
                    "privacy_level is not specified or not among privacy_level_options.",
                )
                return
            if not creator["audited"] and (level != "SELF_ONLY" or not creator["private_account"]):
                self._api(
                    "unaudited_client_can_only_post_to_private_accounts",
                    "Unaudited clients can only post SELF_ONLY to a private account.",
                )
                return
            refusal = _post_refusal(fake, open_id)
            if refusal is not None:
                self._api(*refusal)
                return
        if source.get("source") == "PULL_FROM_URL":
            self._api("url_ownership_unverified", "The URL's ownership is not verified.")
            return
        if source.get("source") != "FILE_UPLOAD":
            self._api("invalid_params", "source must be FILE_UPLOAD or PULL_FROM_URL.")
            return
        problem = _chunk_plan_problem(fake, source)
        if problem is not None:
            self._api("invalid_params", problem)
            return
        publish_id = f"v_pub_file~v2-1.{7 * 10**18 + secrets.randbelow(10**18)}"
        upload_id, upload_token = secrets.token_hex(10), new_secret("", 12)
        with st.lock:
            creator["posts"].append(fake.clock())
            st.data["publishes"][publish_id] = {
                "publish_id": publish_id,
                "open_id": open_id,
                "upload_id": upload_id,
                "upload_token": upload_token,
                "video_size": int(source["video_size"]),
                "chunk_size": int(source["chunk_size"]),
                "total_chunk_count": int(source["total_chunk_count"]),
                "received": 0,
                "created": fake.clock(),
                "privacy_level": level,
                "post_info": post_info,
                "post_id": None,
                "fail_reason": None,
                "expired": False,
            }
            st.blob(publish_id).write_bytes(b"")
            st.save()
        url = f"{fake.base_url}upload/?upload_id={upload_id}&upload_token={upload_token}"
        self._api("ok", "", {"publish_id": publish_id, "upload_url": url})

    # -- upload --------------------------------------------------------------------------
    def upload(self, query: dict[str, str]) -> None:
        fake, st = self.fake, self.fake.state
        length = int(self.headers.get("Content-Length") or 0)
        with st.lock:
            pub = next(
                (
                    p
                    for p in st.data["publishes"].values()
                    if p["upload_id"] == query.get("upload_id")
                ),
                None,
            )
            if pub is not None and pub["upload_token"] == query.get("upload_token"):
                fake.advance(pub)
                if fake.faults.take("expire_publish") is not None and not pub["expired"]:
                    fake.expire_publish(pub["publish_id"])
            else:
                pub = None
        if pub is None or pub["expired"]:
            self._body()
            self._send(404 if pub is None else 403)
            return
        total, received = pub["video_size"], pub["received"]
        progress = {"Content-Range": f"bytes 0-{received}/{total}"}
        first, last, size = _content_range(self.headers.get("Content-Range", ""))
        if (
            size != total
            or first is None
            or last is None
            or last - first + 1 != length
            or self.headers.get("Content-Type", "").split(";")[0].strip() not in VIDEO_TYPES
        ):
            self._body()
            self._send(400, None, progress)
            return
        if first != received:  # not where the upload stands (a resend, a gap, or done)
            self._body()
            self._send(416, None, progress)
            return
        chunk, count = pub["chunk_size"], pub["total_chunk_count"]
        final = first // chunk >= count - 1
        if length != (total - (count - 1) * chunk if final else chunk):
            self._body()
            self._send(400, None, progress)
            return
        if self._server_fault_empty("chunk_5xx"):
            return
        dropped = fake.faults.take("drop_final_chunk") if final else None
        data = self.rfile.read(length)
        if len(data) != length:
            raise Drop()
        if dropped is not None and not dropped.get("stored", True):
            raise Drop()
        with st.lock:
            with st.blob(pub["publish_id"]).open("r+b") as f:
                f.seek(first)
                f.write(data)
            pub["received"] = received = first + length
            if received == total:
                fake.complete(pub)
            st.save()
        if dropped is not None:
            raise Drop()
        status, held = 201 if received == total else 206, f"bytes 0-{received}/{total}"
        slow = fake.faults.take("slow_answer")
        if slow is not None:
            self._trickle(status, held, float(slow.get("seconds", 1.0)), slow.get("lines", 6))
            return
        self._send(status, None, {"Content-Range": held})

    def _trickle(self, status: int, progress: str, pause: float, lines: int) -> None:
        """The chunk's answer a line at a time, `pause` seconds apart (the client may go away
        meanwhile: the chunk is stored all the same)."""
        head = [f"HTTP/1.1 {status} {self.responses[status][0]}", f"Content-Range: {progress}"]
        head += [f"X-Slow-{n}: {n}" for n in range(max(0, int(lines) - 3))]
        head += ["Content-Length: 0"]
        self.close_connection = True
        try:
            for line in head:
                self.wfile.write(f"{line}\r\n".encode())
                self.wfile.flush()
                time.sleep(pause)
            self.wfile.write(b"\r\n")
        except OSError:
            pass

    def _server_fault_empty(self, fault: str) -> bool:
        found = self.fake.faults.take(fault)
        if found is None:
            return False
        self._body()
        self._send(int(found.get("status", 500)))
        return True

    # -- status --------------------------------------------------------------------------
    def status_fetch(self, _query: dict[str, str]) -> None:
        raw = self._body()
        caller = self._caller("video.publish", "video.upload")
        if caller is None:
            return
        open_id, token = caller
        if not self._allowed(open_id, token, "status") or self._server_fault("status_5xx"):
            return
        body = self._json(raw)
        if body is None:
            return
        fake, st = self.fake, self.fake.state
        with st.lock:
            pub = st.data["publishes"].get(str(body.get("publish_id", "")))
            if pub is None:
                self._api("invalid_publish_id", "The publish_id does not exist.")
                return
            if pub["open_id"] != open_id:
                self._api(
                    "token_not_authorized_for_specified_publish_id",
                    "The access_token may not read this publish_id.",
                )
                return
            fake.advance(pub)
            st.save()
            status = fake.status_of(pub)
            video = st.data["videos"].get(pub["post_id"] or "")
            public = video is not None and status == "PUBLISH_COMPLETE" and fake.public_now(video)
            data: dict[str, Any] = {
                "status": status,
                "publicaly_available_post_id": [int(video["id"])] if public and video else [],
                "uploaded_bytes": pub["received"],
            }
            if status == "FAILED":
                data["fail_reason"] = pub["fail_reason"]
        self._api("ok", "", data)

    # -- video list ----------------------------------------------------------------------
    def _display_call(self, query: dict[str, str]) -> tuple[str, dict[str, Any], list] | None:
        """A Display API call's (open_id, body, fields), or None once it was answered: the
        caller, counted (every authenticated call, for ledgers to be checked against), within
        the per-app limit, its body and fields valid."""
        raw = self._body()
        caller = self._caller("video.list")
        if caller is None:
            return None
        open_id, _token = caller
        with self.fake.state.lock:
            calls = self.fake.state.data["list_calls"]
            calls[open_id] = calls.get(open_id, 0) + 1
        # The Display API's limit is per app, not per access token.
        if not self._allowed(open_id, "_app", "list") or self._server_fault("list_5xx"):
            return None
        body = self._json(raw)
        if body is None:
            return None
        fields = [f for f in query.get("fields", "").split(",") if f]
        if not fields or set(fields) - VIDEO_FIELDS:
            self._api("invalid_params", f"fields must be among {sorted(VIDEO_FIELDS)}")
            return None
        return open_id, body, fields

    def video_list(self, query: dict[str, str]) -> None:
        call = self._display_call(query)
        if call is None:
            return
        open_id, body, fields = call
        max_count, cursor = body.get("max_count", 10), body.get("cursor")
        if type(max_count) is not int or not 1 <= max_count <= 20:
            self._api("invalid_params", "max_count must be an integer from 1 to 20.")
            return
        if cursor is not None and type(cursor) is not int:
            self._api("invalid_params", "cursor must be an integer (a time in ms).")
            return
        fake = self.fake
        with fake.state.lock:
            username = fake.state.data["creators"][open_id]["username"]
            videos = [
                v
                for v in fake.videos(open_id)
                if fake.public_now(v) and (cursor is None or v["create_ms"] < cursor)
            ]
        page = videos[:max_count]
        data = {
            "videos": [_video_object(fake, v, username, fields) for v in page],
            "cursor": page[-1]["create_ms"] if page else (cursor or 0),
            "has_more": len(videos) > max_count,
        }
        self._api("ok", "", data)

    def video_query(self, query: dict[str, str]) -> None:
        """The Display API's Query Videos: the creator's own public videos among
        filters.video_ids (1-20), with the fields asked for."""
        call = self._display_call(query)
        if call is None:
            return
        open_id, body, fields = call
        ids = (body.get("filters") or {}).get("video_ids")
        if not isinstance(ids, list) or not 1 <= len(ids) <= 20:
            self._api("invalid_params", "filters.video_ids must list 1 to 20 video ids.")
            return
        fake = self.fake
        with fake.state.lock:
            username = fake.state.data["creators"][open_id]["username"]
            found = [v for v in fake.videos(open_id) if v["id"] in ids and fake.public_now(v)]
        videos = [_video_object(fake, v, username, fields) for v in found]
        self._api("ok", "", {"videos": videos, "cursor": 0, "has_more": False})

    # -- control -------------------------------------------------------------------------
    def control_faults(self, _query: dict[str, str]) -> None:
        spec = json.loads(self._body() or b"{}")
        try:
            self.fake.faults.push(spec.pop("fault"), **spec)
        except (KeyError, ValueError) as exc:
            self._send(400, {"error": str(exc)})
            return
        self._send(200, {"pending": self.fake.faults.pending()})

    def control_creator(self, _query: dict[str, str]) -> None:
        spec = json.loads(self._body() or b"{}")
        try:
            open_id = self.fake.add_creator(**spec)
        except TypeError as exc:
            self._send(400, {"error": str(exc)})
            return
        self._send(200, {"open_id": open_id})

    def control_limits(self, _query: dict[str, str]) -> None:
        try:
            self.fake.set_limits(**json.loads(self._body() or b"{}"))
        except ValueError as exc:
            self._send(400, {"error": str(exc)})
            return
        self._send(200, {"limits": self.fake.state.data["limits"]})

    def control_revoke(self, _query: dict[str, str]) -> None:
        spec = json.loads(self._body() or b"{}")
        self.fake.revoke(spec["open_id"])
        self._send(200, {"revoked": spec["open_id"]})

    def control_state(self, _query: dict[str, str]) -> None:
        self._send(200, self.fake.snapshot())


def _post_refusal(fake: FakeTikTok, open_id: str) -> tuple[str, str] | None:
    """Why the creator may not post now (the daily cap, the unaudited app's user cap)."""
    now = fake.clock()
    creators = fake.state.data["creators"]
    creator = creators[open_id]
    if sum(1 for t in creator["posts"] if t > now - fake.post_window) >= creator["daily_post_cap"]:
        return "spam_risk_too_many_posts", "The daily post cap from the API is reached."
    if creator["audited"]:
        return None
    posting = {
        oid
        for oid, c in creators.items()
        if not c["audited"] and any(t > now - fake.post_window for t in c["posts"])
    }
    if open_id not in posting and len(posting) >= fake.unaudited_user_cap:
        return "reached_active_user_cap", "The daily quota of active publishing users is reached."
    return None


def _chunk_plan_problem(fake: FakeTikTok, source: dict[str, Any]) -> str | None:
    """What breaks the media transfer guide's chunk rules, or None."""
    size, chunk, count = (source.get(k) for k in ("video_size", "chunk_size", "total_chunk_count"))
    if not all(type(v) is int and v > 0 for v in (size, chunk, count)):
        return "video_size, chunk_size and total_chunk_count must be positive integers."
    assert isinstance(size, int) and isinstance(chunk, int) and isinstance(count, int)
    if size < fake.min_chunk:  # a small video goes whole
        if chunk != size:
            return "The chunk size is invalid"
        return None if count == 1 else "The total chunk count is invalid"
    if not fake.min_chunk <= chunk <= fake.max_chunk:
        return "The chunk size is invalid"
    if count != size // chunk or not 1 <= count <= fake.max_chunks:
        return "The total chunk count is invalid"
    if size > fake.max_chunk and count < 2:  # a large video goes in several chunks
        return "The chunk size is invalid"
    if size - (count - 1) * chunk > fake.max_final_chunk:
        return "The chunk size is invalid"
    return None


def _content_range(value: str) -> tuple[int | None, int | None, int | None]:
    """(first, last, total) of 'bytes a-b/N'; Nones where it does not parse."""
    unit, _, spec = value.strip().partition(" ")
    span, _, total = spec.partition("/")
    first, _, last = span.partition("-")
    if unit != "bytes" or not (first.isdigit() and last.isdigit() and total.isdigit()):
        return None, None, None
    if int(last) < int(first):
        return None, None, None
    return int(first), int(last), int(total)


def _video_object(
    fake: FakeTikTok, v: dict[str, Any], username: str, fields: list[str]
) -> dict[str, Any]:
    text = v["title"][:LISTED_TEXT_MAX]
    share = f"https://www.tiktok.com/@{username}/video/{v['id']}"
    embed = f"https://www.tiktok.com/embed/v2/{v['id']}"
    stats = v.get("statistics") or {}
    full: dict[str, Any] = {
        "id": v["id"],
        "create_time": v["create_ms"] // 1000,
        "cover_image_url": f"{fake.base_url}cover/{v['id']}.jpeg",
        "share_url": share,
        "video_description": text,
        "duration": 0,
        "height": 1920,
        "width": 1080,
        "title": text,
        "embed_html": f'<blockquote class="tiktok-embed" cite="{share}"></blockquote>',
        "embed_link": embed,
        "like_count": stats.get("like_count", 0),
        "comment_count": stats.get("comment_count", 0),
        "share_count": stats.get("share_count", 0),
        "view_count": stats.get("view_count", 0),
    }
    return {f: full[f] for f in fields}


_ROUTES: dict[tuple[str, str], tuple[Callable[[Any, dict[str, str]], None], str]] = {
    ("POST", "/v2/oauth/token"): (_Handler.token, "token"),
    ("GET", "/v2/auth/authorize"): (_Handler.authorize, "token"),
    ("POST", "/v2/post/publish/creator_info/query"): (_Handler.creator_info, "creator_info"),
    ("POST", "/v2/post/publish/video/init"): (_Handler.video_init, "init"),
    ("PUT", "/upload"): (_Handler.upload, "chunk"),
    ("PUT", "/video"): (_Handler.upload, "chunk"),
    ("POST", "/v2/post/publish/status/fetch"): (_Handler.status_fetch, "status"),
    ("POST", "/v2/video/list"): (_Handler.video_list, "list"),
    ("POST", "/v2/video/query"): (_Handler.video_query, "list"),
    ("POST", "/_fake/faults"): (_Handler.control_faults, "control"),
    ("POST", "/_fake/creators"): (_Handler.control_creator, "control"),
    ("POST", "/_fake/limits"): (_Handler.control_limits, "control"),
    ("POST", "/_fake/revoke"): (_Handler.control_revoke, "control"),
    ("GET", "/_fake/state"): (_Handler.control_state, "control"),
}


def connect_accounts(fake: FakeTikTok, state: Any, env: str, accounts: list[Any]) -> None:
    """Demo wiring (`make demo PROVIDERS=fakes`): each account is a creator who granted the
    app, as an audited app sees it (its public posts are listed), and its grant is stored
    encrypted (fakes.common.store_demo_grant)."""
    for account in accounts:
        token = new_secret("rft.fake-", 24)
        fake.add_creator(account.handle, token, audited=True)
        store_demo_grant(state, env, account, token)


def running(state_dir: str | Path, port: int = 0) -> contextlib.AbstractContextManager[FakeTikTok]:
    """The fake on 127.0.0.1 (an ephemeral port by default) for the duration of the block."""
    return serving(FakeTikTok(state_dir, port))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state-dir", default=".mdame/fake-tiktok")
    parser.add_argument(
        "--creator",
        action="append",
        default=[],
        help="USERNAME=REFRESH_TOKEN: a creator to add, for an unaudited app (repeatable)",
    )
    parser.add_argument("--audited", action="store_true", help="the creators see an audited app")
    args = parser.parse_args(argv)
    fake = FakeTikTok(args.state_dir, args.port)
    for spec in args.creator:
        username, _, token = spec.partition("=")
        fake.add_creator(username, token, audited=args.audited)
    fake.serve_until_interrupted("fake TikTok on {base_url}")


if __name__ == "__main__":
    main()
