"""TikTok's Content Posting API (Direct Post, FILE_UPLOAD) and video list, on httpx.

Each method is exactly one HTTP request (httpx sends it once: no client retries), so the
publisher decides what is sent again, as it does for YouTube; the one exception is a call
refused for its access token (401), which changed nothing: the token is refreshed once and the
call sent once more (an access token can be refused before its stated expiry). Requests, and the
token refresh before them, end by `deadline` (a time.time() value the publisher sets from its
lease): one that cannot start before it is not started (NotSent). A chunk goes through
http_api.exchange, which ends it by the deadline on the wall clock however slowly the upload
server reads or answers.

The access token goes only to the API's origin. An upload_url is TikTok's own (another host in
production, open-upload.tiktokapis.com) and carries its upload token in its query: the chunks go
there without the access token, and only to an https URL (or http on a loopback address, the
local protocol server).

Refresh tokens rotate: a refresh answers a new one and the one sent may stop working, so the
new one is handed to `on_rotate` (which seals and stores it) before the access token is used.

Failures, as the publisher reads them: ChannelError (TikTok answered; `permanent` for 400, 401
(a fresh token refused too), 403 and 404 that are not quota), GrantRevoked (the refresh token
was refused, with TikTok's words: reconnect),
NotSent (nothing left this host), TransferInterrupted (no answer: ask the post's status next).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from mdame_core import settings
from mdame_domain.channel import (
    AppRefused,
    ChannelError,
    GrantRevoked,
    NotSent,
    TransferInterrupted,
)
from mdame_domain.tiktok import ChunkPlan
from mdame_resources.providers.http_api import OneShotHttp, exchange, trusted

BASE_URL_VAR = "MDAME_TIKTOK_BASE_URL"
CLIENT_KEY_VAR, CLIENT_SECRET_VAR = "MDAME_TIKTOK_CLIENT_KEY", "MDAME_TIKTOK_CLIENT_SECRET"
# The token endpoint's answers that fault the app's own credentials, not the creator's grant.
APP_ERRORS = ("invalid_client", "unauthorized_client")
TIKTOK_BASE_URL = "https://open.tiktokapis.com"
# Quota reasons TikTok answers: the per-minute limits, and the creator's daily post cap.
RATE_LIMITED, DAILY_CAP = "rate_limit_exceeded", "spam_risk_too_many_posts"
# An access token is refreshed this long before TikTok says it expires.
TOKEN_EARLY_S = 60.0
# A 401 that a fresh access token cannot cure: the grant lacks the scope.
SCOPE_REFUSED = "scope_not_authorized"
# The calls TikTok limits per minute per access token, by the bucket the pacer counts them in.
PACED_CALLS = {
    "/v2/post/publish/creator_info/query/": "creator_info",
    "/v2/post/publish/video/init/": "init",
    "/v2/post/publish/status/fetch/": "status",
}


def _code(response: httpx.Response) -> str:
    """TikTok's error code in an API answer ("" when it has none)."""
    try:
        return str((response.json().get("error") or {}).get("code") or "")
    except (ValueError, AttributeError):
        return ""


def _envelope_error(response: httpx.Response, what: str) -> ChannelError:
    """TikTok's {"error": {"code", "message"}} as a ChannelError with its HTTP status."""
    try:
        error = response.json().get("error") or {}
    except ValueError:
        error = {}
    code = str(error.get("code") or f"http_{response.status_code}")
    message = " ".join(str(error.get("message") or "").split())[:300]
    return ChannelError(what, response.status_code, code, message)


class TikTokApi(OneShotHttp):
    """One creator's Content Posting API, opened with the account's refresh token. Its calls go
    through the process's "tiktok" client, its chunks on exchange's kept connections: every
    creator's in this process share them (see http_api)."""

    client_name = "tiktok"

    def __init__(
        self,
        refresh_token: str,
        client_key: str,
        client_secret: str,
        base_url: str | None = None,
        timeout_s: float = 60.0,
        on_rotate: Callable[[str], None] | None = None,
        pace: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(timeout_s)
        root = base_url or settings.raw(BASE_URL_VAR) or TIKTOK_BASE_URL
        self.base_url = trusted(root, f"TikTok API base URL ({BASE_URL_VAR})").rstrip("/")
        self._refresh_token = refresh_token
        self._client = (client_key, client_secret)
        self._access: tuple[str, float] | None = None  # token, when to refresh it
        self.on_rotate = on_rotate
        self.pace = pace  # called with a PACED_CALLS bucket before its request
        self.open_id: str | None = None

    def _access_token(self, refresh: bool = False) -> str:
        """The access token in hand, or a new one (also when `refresh`: TikTok refused the one
        in hand)."""
        if not refresh and self._access is not None and time.time() < self._access[1]:
            return self._access[0]
        form = {
            "client_key": self._client[0],
            "client_secret": self._client[1],
            "grant_type": "refresh_token",
            "refresh_token": self._refresh_token,
        }
        try:
            response = self._send("POST", f"{self.base_url}/v2/oauth/token/", "token", data=form)
        except TransferInterrupted as exc:
            # The API request it was for never left: to the publisher, nothing was sent.
            raise NotSent(str(exc)) from None
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code != 200 or "access_token" not in body:
            error = str(body.get("error") or f"http_{response.status_code}")
            said = str(body.get("error_description") or "")[:200]
            if error == "invalid_grant":
                raise GrantRevoked(
                    f"TikTok refused the stored refresh token (invalid_grant: {said}): the creator "
                    "removed the app, the token passed its 180 days, or a refresh was cut off "
                    "after TikTok answered and before its new token was saved (TikTok retires a "
                    "refresh token once it issues the next)"
                )
            if error in APP_ERRORS:
                raise AppRefused(
                    f"TikTok refused the app's client key or secret ({error}: {said}): check "
                    f"{CLIENT_KEY_VAR} and {CLIENT_SECRET_VAR} against the app's credentials "
                    "on developers.tiktok.com"
                )
            # A refresh that failed otherwise (5xx, a bad client key): nothing was posted.
            raise NotSent(
                f"token refresh: HTTP {response.status_code} {error}: "
                f"{str(body.get('error_description') or '')[:200]}"
            )
        rotated = str(body.get("refresh_token") or "")
        if rotated and rotated != self._refresh_token:
            if self.on_rotate is not None:
                self.on_rotate(rotated)  # stored before anything uses the new grant
            self._refresh_token = rotated
        self.open_id = str(body.get("open_id") or "") or None
        expires = float(body.get("expires_in") or 0)
        self._access = (str(body["access_token"]), time.time() + max(0.0, expires - TOKEN_EARLY_S))
        return self._access[0]

    def _api(self, path: str, what: str, payload: dict[str, Any], **params: str) -> Any:
        """A JSON call to the API: its `data`, or ChannelError with TikTok's error code."""
        if self.pace is not None and path in PACED_CALLS:
            self.pace(PACED_CALLS[path])  # before the token: a wait may outlast it
        response = self._call(path, what, payload, params, self._access_token())
        if response.status_code == 401 and _code(response) != SCOPE_REFUSED:
            # Refused for its token before TikTok did anything (nor counted it against the
            # per-minute limits): sent once more, with a fresh token, in the same slot.
            response = self._call(path, what, payload, params, self._access_token(refresh=True))
        try:
            body = response.json()
        except ValueError:
            body = None
        error = (body or {}).get("error") or {}
        if response.status_code != 200 or error.get("code", "ok") != "ok":
            raise _envelope_error(response, what)
        return (body or {}).get("data") or {}

    def _call(
        self, path: str, what: str, payload: dict[str, Any], params: dict[str, str], token: str
    ) -> httpx.Response:
        return self._send(
            "POST",
            f"{self.base_url}{path}",
            what,
            json=payload,
            params=params or None,
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": "application/json; charset=UTF-8",
            },
        )

    # -- the Content Posting API -----------------------------------------------------------
    def creator_info(self) -> dict[str, Any]:
        """privacy_level_options, max_video_post_duration_sec and the interaction settings."""
        info: dict[str, Any] = self._api(
            "/v2/post/publish/creator_info/query/", "creator_info/query", {}
        )
        return info

    def init_post(self, post_info: dict[str, Any], plan: ChunkPlan) -> tuple[str, str]:
        """Direct Post, FILE_UPLOAD: (publish_id, upload_url)."""
        data = self._api(
            "/v2/post/publish/video/init/",
            "video/init",
            {"post_info": post_info, "source_info": plan.source_info()},
        )
        publish_id, upload_url = (
            str(data.get("publish_id") or ""),
            str(data.get("upload_url") or ""),
        )
        if not publish_id or not upload_url:
            raise ChannelError("video/init", 200, "malformed", "no publish_id or upload_url")
        return publish_id, trusted(upload_url, "TikTok upload_url")

    def put_chunk(self, upload_url: str, data: bytes, start: int, size: int, mime: str) -> int:
        """One chunk to the upload_url, ended by the deadline on the wall clock; the HTTP status
        (206: more to come, 201: the file is whole). 403 (expired), 404 (no such upload) and 416
        (out of step) are ChannelErrors."""
        status, headers, content = exchange(
            "PUT",
            trusted(upload_url, "TikTok upload_url"),
            data,
            {
                "Content-Type": mime,
                "Content-Range": f"bytes {start}-{start + len(data) - 1}/{size}",
            },
            self.deadline,
            self.timeout_s,
            "upload chunk",
        )
        if status not in (201, 206):
            answer = httpx.Response(status, headers=list(headers.items()), content=content)
            raise _envelope_error(answer, "upload chunk")
        return status

    def fetch_status(self, publish_id: str) -> dict[str, Any]:
        """status, fail_reason, uploaded_bytes and, once public, publicaly_available_post_id."""
        status: dict[str, Any] = self._api(
            "/v2/post/publish/status/fetch/", "status/fetch", {"publish_id": publish_id}
        )
        return status

    def query_videos(self, video_ids: list[str]) -> list[dict[str, Any]]:
        """The creator's public videos among `video_ids` (at most 20) with their counts."""
        found: dict[str, Any] = self._api(
            "/v2/video/query/",
            "video/query",
            {"filters": {"video_ids": video_ids}},
            fields="id,view_count,like_count,comment_count",
        )
        return list(found.get("videos") or [])

    def list_videos(self, cursor: int | None = None, max_count: int = 20) -> dict[str, Any]:
        """One page of the creator's public videos, newest first: videos, cursor, has_more."""
        payload: dict[str, Any] = {"max_count": max_count}
        if cursor is not None:
            payload["cursor"] = cursor
        page: dict[str, Any] = self._api(
            "/v2/video/list/",
            "video/list",
            payload,
            fields="id,title,video_description,create_time,share_url",
        )
        return page
