"""The Instagram API with Instagram Login, for Reels: a container with a resumable upload, the
bytes to the upload server, the container's status, media_publish, the account's media and a
reel's insights, on httpx.

Each method is exactly one HTTP request (see http_api.OneShotHttp): the publisher decides what
is sent again. The one exception is a graph call refused for its token (code 190, 102 or 104),
which changed nothing: the token is refreshed once (`refresh_token`) and the call sent once
more, since a token can be refused before its stated expiry. The upload request goes through
http_api.exchange, ended by the deadline on the wall clock; refused for its token, the
publisher asks the container where it stands (a graph call: refreshed there), never sending a
byte twice. The long-lived Instagram User token (60 days) is the account's grant: it goes in
an `Authorization: Bearer` header to the graph host and `Authorization: OAuth` to the upload
URI a container answers, which must be Meta's upload host (rupload.facebook.com) or the graph
host itself (a local protocol server serves both). `refresh_token` trades it for a new one of 60
days; the old one keeps working until it expires, so a refresh answer lost with its process
loses nothing.

Failures, as the publisher reads them: ChannelError (Meta answered; `reason` is
`code/subcode`, with `status` 400 for a refusal, 503 for what Meta marks transient or
throttled, so that only refusals are permanent), CONTENT_PUBLISHING_LIMIT as the reason of the
24-hour publishing limit (a quota: the account pauses), GrantRevoked (code 190: the token was
revoked or expired, and its refresh refused too: reconnect), NotSent and TransferInterrupted (no
answer; NotSent also when a token the graph refused could not be refreshed for want of an
answer).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx

from mdame_core import settings
from mdame_domain.channel import ChannelError, GrantRevoked, NotSent, TransferInterrupted
from mdame_resources.providers.http_api import OneShotHttp, exchange, trusted

GRAPH_URL_VAR = "MDAME_INSTAGRAM_GRAPH_URL"
GRAPH_URL = "https://graph.instagram.com"
API_VERSION = "v24.0"
UPLOAD_HOST = "rupload.facebook.com"
# The 24-hour publishing limit (code 9, subcode 2207042): a quota reason, the account pauses.
CONTENT_PUBLISHING_LIMIT = "content_publishing_limit"
# Codes Meta documents as throttling or temporary, whatever is_transient says.
TRANSIENT_CODES = {1, 2, 4, 17, 32, 341, 613, 80002}
TOKEN_CODES = {102, 104, 190}


def graph_error(response: httpx.Response, what: str) -> Exception:
    """Meta's {"error": {"message", "code", "error_subcode", "is_transient", ...}}, or the
    upload server's {"debug_info": {"retriable", "type", "message"}}, as the publisher reads
    it (see the module)."""
    try:
        body = response.json()
    except ValueError:
        body = {}
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code, subcode = int(error.get("code") or 0), error.get("error_subcode")
        said = " ".join(str(error.get("error_user_msg") or error.get("message") or "").split())
        if code in TOKEN_CODES:
            return GrantRevoked(f"Instagram refused the account's token: {said[:300]}")
        if (code, subcode) == (9, 2207042):
            return ChannelError(what, 400, CONTENT_PUBLISHING_LIMIT, said[:300])
        transient = bool(error.get("is_transient")) or code in TRANSIENT_CODES
        status = 503 if transient or response.status_code >= 500 else 400
        reason = f"{code}/{subcode}" if subcode else str(code)
        return ChannelError(what, status, reason, said[:300])
    debug = body.get("debug_info") if isinstance(body, dict) else None
    if isinstance(debug, dict):
        try:
            inner = json.loads(str(debug.get("message") or "{}"))
            said = str((inner.get("error") or {}).get("message") or "")
        except (ValueError, AttributeError):
            said = str(debug.get("message") or "")
        status = 503 if debug.get("retriable") or response.status_code >= 500 else 400
        return ChannelError(what, status, str(debug.get("type") or "upload"), said[:300])
    return ChannelError(what, response.status_code, f"http_{response.status_code}")


class InstagramApi(OneShotHttp):
    """One Instagram professional account, opened with its long-lived token. Its graph calls go
    through the process's "instagram" client, its uploads on exchange's kept connections:
    every account's in this process share them (see http_api)."""

    client_name = "instagram"

    def __init__(
        self,
        token: str,
        graph_url: str | None = None,
        timeout_s: float = 60.0,
        on_rotate: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(timeout_s)
        root = graph_url or settings.raw(GRAPH_URL_VAR) or GRAPH_URL
        self.graph_url = trusted(root, f"Instagram graph URL ({GRAPH_URL_VAR})").rstrip("/")
        self._token = token
        self.on_rotate = on_rotate
        self._user_id: str | None = None

    # -- plumbing --------------------------------------------------------------------------
    def _graph(self, method: str, path: str, what: str, **params: Any) -> Any:
        """A graph call: its JSON answer, or the error graph_error names. Refused for its token,
        the token is refreshed and the call sent once more."""
        response = self._graph_once(method, path, what, params)
        if response.status_code != 200:
            refused = graph_error(response, what)
            if not isinstance(refused, GrantRevoked):
                raise refused
            self._refresh_refused()
            response = self._graph_once(method, path, what, params)
            if response.status_code != 200:
                raise graph_error(response, what)
        return response.json()

    def _graph_once(
        self, method: str, path: str, what: str, params: dict[str, Any]
    ) -> httpx.Response:
        return self._send(
            method,
            f"{self.graph_url}/{API_VERSION}/{path}",
            what,
            headers={"Authorization": f"Bearer {self._token}"},
            **({"data": params} if method == "POST" else {"params": params}),
        )

    def _refresh_refused(self) -> None:
        """A new token for the one the graph refused. GrantRevoked when the refresh is refused
        too (the token is revoked or expired: reconnect); NotSent when it got no usable answer
        (the refused call did nothing, and a later run tries again)."""
        try:
            self.refresh_token()  # refused too: its GrantRevoked, in Meta's words
        except (ChannelError, TransferInterrupted) as exc:
            raise NotSent(f"the token was refused and could not be refreshed: {exc}") from None

    def user_id(self) -> str:
        """The IG user id the token belongs to (asked once)."""
        if self._user_id is None:
            me = self._graph("GET", "me", "me", fields="user_id,username")
            self._user_id = str(me.get("user_id") or me["id"])
        return self._user_id

    # -- the token ---------------------------------------------------------------------------
    def refresh_token(self) -> None:
        """A new 60-day token for this one, handed to `on_rotate` before it is used."""
        response = self._send(
            "GET",
            f"{self.graph_url}/refresh_access_token",
            "refresh_access_token",
            params={"grant_type": "ig_refresh_token", "access_token": self._token},
        )
        if response.status_code != 200:
            raise graph_error(response, "refresh_access_token")
        fresh = str(response.json().get("access_token") or "")
        if fresh and fresh != self._token:
            if self.on_rotate is not None:
                self.on_rotate(fresh)
            self._token = fresh

    # -- publishing --------------------------------------------------------------------------
    def create_container(
        self, caption: str, thumb_offset_ms: int, share_to_feed: bool = True
    ) -> tuple[str, str]:
        """A REELS container for a resumable upload: (container id, upload URI)."""
        made = self._graph(
            "POST",
            f"{self.user_id()}/media",
            "media",
            media_type="REELS",
            upload_type="resumable",
            caption=caption,
            share_to_feed="true" if share_to_feed else "false",
            thumb_offset=str(thumb_offset_ms),
        )
        return str(made["id"]), self._upload_uri(str(made["uri"]))

    def _upload_uri(self, uri: str) -> str:
        host = (urlsplit(uri).hostname or "").lower()
        if host not in (UPLOAD_HOST, (urlsplit(self.graph_url).hostname or "").lower()):
            raise ChannelError("media", 502, "foreign_upload_uri", f"upload URI on {host!r}")
        return trusted(uri, "Instagram upload URI")

    def upload(self, uri: str, data: bytes, offset: int, size: int) -> None:
        """The bytes from `offset` of a `size`-byte file to the container's upload URI, ended by
        the deadline on the wall clock."""
        status, headers, content = exchange(
            "POST",
            self._upload_uri(uri),
            data,
            {
                "Authorization": f"OAuth {self._token}",
                "offset": str(offset),
                "file_size": str(size),
                "Content-Type": "application/octet-stream",
            },
            self.deadline,
            self.timeout_s,
            "upload",
        )
        if status != 200:
            answer = httpx.Response(status, headers=list(headers.items()), content=content)
            raise graph_error(answer, "upload")

    def container(self, container_id: str) -> dict[str, Any]:
        """status_code (IN_PROGRESS, FINISHED, PUBLISHED, ERROR, EXPIRED) and video_status."""
        found: dict[str, Any] = self._graph(
            "GET", container_id, "container", fields="status_code,status,video_status"
        )
        return found

    def publish(self, container_id: str) -> str:
        """media_publish: the new media's id."""
        made = self._graph(
            "POST", f"{self.user_id()}/media_publish", "media_publish", creation_id=container_id
        )
        return str(made["id"])

    def publishing_limit(self) -> tuple[int, int]:
        """(reels published in the rolling 24 hours, how many the limit allows)."""
        found = self._graph(
            "GET",
            f"{self.user_id()}/content_publishing_limit",
            "content_publishing_limit",
            fields="quota_usage,config",
        )
        [usage] = found.get("data") or [{}]
        return int(usage.get("quota_usage") or 0), int(
            (usage.get("config") or {}).get("quota_total") or 0
        )

    # -- reading -----------------------------------------------------------------------------
    def media_page(self, after: str | None = None, limit: int = 25) -> dict[str, Any]:
        """One page of the account's media, newest first: data, paging."""
        params: dict[str, Any] = {"fields": "id,caption,timestamp", "limit": limit}
        if after:
            params["after"] = after
        page: dict[str, Any] = self._graph("GET", f"{self.user_id()}/media", "media list", **params)
        return page

    def insights(self, media_id: str, metrics: tuple[str, ...]) -> dict[str, int]:
        """A reel's lifetime metrics by name."""
        found = self._graph("GET", f"{media_id}/insights", "insights", metric=",".join(metrics))
        return {
            str(item["name"]): int((item.get("values") or [{}])[0].get("value") or 0)
            for item in found.get("data") or []
        }
