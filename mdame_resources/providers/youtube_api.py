"""The YouTube Data API v3 as MD-AME uses it, on google-api-python-client.

The service is built from the discovery document the client ships, with `rootUrl` replaced by
MDAME_YOUTUBE_ROOT_URL when set (overriding `api_endpoint` alone would keep uploads on https),
over an http from `googleapiclient.http.build_http()` (which keeps 308 a status) authorised by
google-auth with the token endpoint from MDAME_GOOGLE_TOKEN_URI.

Resumable uploads are driven here, not by `MediaFileUpload.next_chunk`: the session is
initiated with our own request (so its URI is committed before the first byte), and the
initiation, each chunk and each status query is exactly one HTTP request (http_api.exchange on
http.client, not httplib2, which silently re-sends a request after some connection errors, and
after a 401 too). After any interruption the session is asked where it stands (PUT,
Content-Range: bytes */N).

Connections: the session requests and the token refresh go on exchange's connections, kept per
process by origin (a session's chunks share one, whichever channel they are for). The list calls
and thumbnails.set go through this object's httplib2 Http, which keeps its connection for this
object's life (one upload, or one statistics read) and no longer: an Http is not thread-safe
(google-api-python-client's own rule: one per thread), and its requests are a handful per
upload, so it is not shared across channels.

These requests, and the token refresh before them, end by `deadline` (a time.time() value the
publisher sets from its lease; the wall clock, unlike time.monotonic, runs on while a machine is
suspended): one that cannot start before it is not started (NotSent), one in flight is cut at it
(every socket operation's timeout is the time left, the body goes out in blocks, and a watchdog
shuts the connection at the deadline however slowly the server answers).

An access token can be refused before its stated expiry. A 401 is answered as google-auth's
own transport answers it (the list calls go through it, refreshing at most once): the token is
refreshed once and the request sent again once, a chunk excepted: after a 401 on a chunk the
session is asked where it stands (the status query), and the publisher goes on from there, so
no byte is sent twice. Only a refused refresh (invalid_grant: GrantRevoked, with Google's words)
or a second 401 with the fresh token (ChannelError) asks for a reconnect.

The access token goes only to the API root's origin (scheme, host and port): a session URI is
the Location a server answered with, and one elsewhere is refused before anything is sent to
it. The root must be https, or http on a loopback address (the local protocol server).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import google.auth.transport
import google_auth_httplib2  # type: ignore[import-untyped]
import googleapiclient  # type: ignore[import-untyped]
from google.auth.exceptions import RefreshError
from google.oauth2.credentials import Credentials
from googleapiclient.discovery import build_from_document  # type: ignore[import-untyped]
from googleapiclient.errors import HttpError  # type: ignore[import-untyped]
from googleapiclient.http import build_http  # type: ignore[import-untyped]

from mdame_core import settings
from mdame_core.settings import SettingsError
from mdame_domain.channel import (
    AppRefused,
    ChannelError,
    GrantRevoked,
    NotSent,
    SessionState,
    TransferInterrupted,
)
from mdame_resources.providers.http_api import exchange

ROOT_URL_VAR = "MDAME_YOUTUBE_ROOT_URL"
TOKEN_URI_VAR = "MDAME_GOOGLE_TOKEN_URI"
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
SCOPES = (
    "https://www.googleapis.com/auth/youtube.upload",
    "https://www.googleapis.com/auth/youtube.readonly",
)


def _discovery(root_url: str | None) -> dict[str, Any]:
    path = Path(googleapiclient.__file__).parent / "discovery_cache/documents/youtube.v3.json"
    doc: dict[str, Any] = json.loads(path.read_text())
    if root_url:
        root = root_url if root_url.endswith("/") else root_url + "/"
        doc["rootUrl"] = doc["mtlsRootUrl"] = root
    return doc


def _reason(content: bytes | str | None) -> str:
    try:
        body = json.loads(content or b"{}")
        errors = body.get("error", {}).get("errors") or [{}]
        return str(errors[0].get("reason") or body.get("error", {}).get("status") or "error")
    except (ValueError, AttributeError):
        return "error"


def _message(content: bytes | str | None) -> str:
    """The API's own words for a refusal (error.message), at most 300 characters."""
    try:
        body = json.loads(content or b"{}")
        return " ".join(str(body.get("error", {}).get("message") or "").split())[:300]
    except (ValueError, AttributeError):
        return ""


class UntrustedSessionUri(Exception):
    """A session URI outside the API root's origin (another scheme, host or port): refused
    before anything, the access token above all, is sent to it."""


Origin = tuple[str, str, int]


def _origin(url: str) -> Origin:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or (443 if scheme == "https" else 80)


def _shown(origin: Origin) -> str:
    scheme, host, port = origin
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _api_origin(root_url: str) -> Origin:
    """The origin the access token may go to. SettingsError unless https, or http on a
    loopback address (the local protocol server)."""
    origin = _origin(root_url)
    scheme, host, _ = origin
    if not host or not (scheme == "https" or (scheme == "http" and _loopback(host))):
        raise SettingsError(
            f"the YouTube API root {root_url!r} ({ROOT_URL_VAR}) must be an https URL, or http "
            "on a loopback address: the channel's access token is sent there"
        )
    return origin


class _TokenResponse(google.auth.transport.Response):
    def __init__(self, status: int, headers: Mapping[str, str], data: bytes) -> None:
        self._status, self._headers, self._data = status, headers, data

    @property
    def status(self) -> int:
        return self._status

    @property
    def headers(self) -> Mapping[str, str]:
        return self._headers

    @property
    def data(self) -> bytes:
        return self._data


class _TokenRequest(google.auth.transport.Request):
    """google-auth's transport for a token refresh bounded by the request's deadline."""

    def __init__(self, deadline: float | None, timeout_s: float) -> None:
        self.deadline, self.timeout_s = deadline, timeout_s

    def __call__(
        self,
        url: str,
        method: str = "GET",
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> _TokenResponse:
        status, got, data = exchange(
            method,
            url,
            body or b"",
            headers or {},
            self.deadline,
            min(self.timeout_s, timeout) if timeout else self.timeout_s,
            "token refresh",
        )
        return _TokenResponse(status, dict(got.items()), data)


class YouTubeApi:
    """One channel's authorised client (a ChannelApi). The refresh token lives only in this object's
    credentials (memory) and is never part of a message, log line or repr.

    `deadline` (a time.time() value, or None) bounds the session requests made from then on
    (initiate, send_chunk, query) and their token refresh; the publisher sets it from its lease
    before each one."""

    def __init__(
        self,
        refresh_token: str,
        client_id: str,
        client_secret: str,
        *,
        root_url: str | None = None,
        token_uri: str | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        self._credentials = Credentials(
            None,
            refresh_token=refresh_token,
            token_uri=token_uri or settings.raw(TOKEN_URI_VAR) or GOOGLE_TOKEN_URI,
            client_id=client_id,
            client_secret=client_secret,
            scopes=list(SCOPES),
        )
        base = build_http()
        base.timeout = timeout_s
        self.timeout_s = timeout_s
        self.deadline: float | None = None
        # One refresh on a 401, as the session requests do: a second 401 is the answer.
        self.http = google_auth_httplib2.AuthorizedHttp(
            self._credentials, http=base, max_refresh_attempts=1
        )
        document = _discovery(root_url if root_url is not None else settings.raw(ROOT_URL_VAR))
        self._origin = _api_origin(str(document["rootUrl"]))
        self.service = build_from_document(document, http=self.http)

    def __repr__(self) -> str:
        return "YouTubeApi(<credentials hidden>)"

    def _bearer(self, refresh: bool = False) -> dict[str, str]:
        """A valid access token's header, refreshing it if needed (or `refresh`: the API refused
        the one in hand) by the deadline (NotSent when it cannot be had: nothing reached the
        API)."""
        if refresh or not self._credentials.valid:
            try:
                self._credentials.refresh(_TokenRequest(self.deadline, self.timeout_s))
            except RefreshError as exc:
                raise _refresh_error(exc) from None
            except TransferInterrupted as exc:
                raise NotSent(f"no access token: {exc}") from None
        headers: dict[str, str] = {}
        self._credentials.apply(headers)
        return headers

    def _trusted(self, uri: str, what: str) -> str:
        """`uri`, once it is on the API root's origin (UntrustedSessionUri otherwise)."""
        got = _origin(uri)
        if got != self._origin:
            raise UntrustedSessionUri(
                f"YouTube {what}: the session URI is on {_shown(got)}, not on the API's origin "
                f"{_shown(self._origin)}: refused, and no access token was sent there"
            )
        return uri

    def _execute(self, what: str, request: Any) -> dict[str, Any]:
        try:
            result: dict[str, Any] = request.execute(num_retries=0)
            return result
        except RefreshError as exc:
            raise _refresh_error(exc) from None
        except HttpError as exc:
            content = exc.content
            raise ChannelError(
                f"YouTube {what}", int(exc.resp.status), _reason(content), _message(content)
            ) from None

    # -- reads (1 unit each) -----------------------------------------------------------
    def uploads_playlist(self) -> str:
        got = self._execute(
            "channels.list", self.service.channels().list(part="contentDetails", mine=True)
        )
        return str(got["items"][0]["contentDetails"]["relatedPlaylists"]["uploads"])

    def playlist_page(self, playlist_id: str, page_token: str | None) -> dict[str, Any]:
        return self._execute(
            "playlistItems.list",
            self.service.playlistItems().list(
                part="snippet,contentDetails",
                playlistId=playlist_id,
                maxResults=50,
                pageToken=page_token,
            ),
        )

    def videos(self, video_ids: list[str], part: str) -> list[dict[str, Any]]:
        got = self._execute(
            "videos.list", self.service.videos().list(part=part, id=",".join(video_ids))
        )
        return list(got.get("items", []))

    # -- thumbnails.set (50 units) --------------------------------------------------------
    def set_thumbnail(self, video_id: str, jpeg: Path) -> dict[str, Any]:
        """Uploads `jpeg` as the video's custom thumbnail (a simple media upload)."""
        from googleapiclient.http import MediaFileUpload

        media = MediaFileUpload(str(jpeg), mimetype="image/jpeg", resumable=False)
        return self._execute(
            "thumbnails.set", self.service.thumbnails().set(videoId=video_id, media_body=media)
        )

    # -- resumable upload ----------------------------------------------------------------
    def initiate(self, body: dict[str, Any], notify_subscribers: bool, size: int, mime: str) -> str:
        """Starts a session (no byte of the file is sent) and returns its URI."""
        what = "videos.insert (initiate)"
        request = self.service.videos().insert(
            part=",".join(sorted(body)), body=body, notifySubscribers=notify_subscribers
        )
        # The client builds the metadata-only URI; the resumable protocol is ours to speak.
        uri = request.uri.replace("/youtube/v3/videos?", "/upload/youtube/v3/videos?", 1)
        uri = self._trusted(uri + "&uploadType=resumable", what)
        headers = {
            # Without accept-encoding: http.client does not decompress an answer.
            **{k: v for k, v in request.headers.items() if k.lower() != "accept-encoding"},
            **self._bearer(),
            "content-type": "application/json; charset=UTF-8",
            "X-Upload-Content-Type": mime,
            "X-Upload-Content-Length": str(size),
        }
        raw = request.body.encode() if isinstance(request.body, str) else request.body or b""
        status, got, content = exchange(
            "POST", uri, raw, headers, self.deadline, self.timeout_s, "session initiation"
        )
        if status == 401:  # refused for its token, so no session and no quota: once more
            headers.update(self._bearer(refresh=True))
            status, got, content = exchange(
                "POST", uri, raw, headers, self.deadline, self.timeout_s, "session initiation"
            )
        location = got.get("Location")
        if status != 200 or not location:
            raise ChannelError(f"YouTube {what}", status, _reason(content), _message(content))
        return self._trusted(str(location), what)

    def _put(
        self, session_uri: str, body: bytes, content_range: str, refresh: bool = False
    ) -> tuple[int, Any, bytes]:
        self._trusted(session_uri, f"PUT {content_range}")
        headers = {**self._bearer(refresh), "Content-Range": content_range}
        return exchange(
            "PUT", session_uri, body, headers, self.deadline, self.timeout_s, f"PUT {content_range}"
        )

    def _state(self, status: int, headers: Any, content: bytes, what: str) -> SessionState:
        if status in (200, 201):
            return SessionState(video=json.loads(content))
        if status == 308:
            got = headers.get("Range")  # bytes=0-N: N+1 bytes are held
            return SessionState(next_byte=int(got.rsplit("-", 1)[1]) + 1 if got else 0)
        if status in (404, 410):
            return SessionState(gone=True)
        if status >= 500:
            raise TransferInterrupted(f"{what}: HTTP {status}")
        raise ChannelError(f"YouTube {what}", status, _reason(content), _message(content))

    def query(self, session_uri: str, size: int, refresh: bool = False) -> SessionState:
        """Where the session stands (a status query: an empty PUT, bytes */size); asked once
        more with a fresh token when the one in hand is refused (`refresh`: refreshed first)."""
        answer = self._put(session_uri, b"", f"bytes */{size}", refresh)
        if answer[0] == 401 and not refresh:
            answer = self._put(session_uri, b"", f"bytes */{size}", refresh=True)
        return self._state(*answer, "status query")

    def send_chunk(self, session_uri: str, data: bytes, start: int, size: int) -> SessionState:
        """One chunk, sent once. The answer says how far the session got (maybe not to the
        chunk's end: resume from `next_byte`). A chunk refused for its token is not sent again
        here: the session, asked with a fresh token, says where to go on from."""
        end = start + len(data) - 1
        answer = self._put(session_uri, data, f"bytes {start}-{end}/{size}")
        if answer[0] == 401:
            return self.query(session_uri, size, refresh=True)
        return self._state(*answer, "chunk")


def _refresh_error(exc: RefreshError) -> Exception:
    if "invalid_grant" in str(exc):
        # google-auth's first argument is Google's `error: error_description`, nothing secret.
        said = " ".join(str(exc.args[0] if exc.args else "").split())[:200]
        return GrantRevoked(
            f"Google refused the channel's stored refresh token ({said or 'invalid_grant'}): "
            "the owner revoked the app's access, or the grant expired"
        )
    if "invalid_client" in str(exc) or "unauthorized_client" in str(exc):
        return AppRefused(
            f"Google refused the OAuth client ({exc}): check the client id and secret in the "
            "file MDAME_YOUTUBE_CLIENT_SECRETS names"
        )
    return NotSent(f"token refresh failed: {type(exc).__name__}")
