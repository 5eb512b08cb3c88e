"""The YouTube Data API v3 as MD-AME uses it, on google-api-python-client.

The service is built from the discovery document the client ships, with `rootUrl` replaced by
MDAME_YOUTUBE_ROOT_URL when set (overriding `api_endpoint` alone would keep uploads on https),
over an http from `googleapiclient.http.build_http()` (which keeps 308 a status) authorised by
google-auth with the token endpoint from MDAME_GOOGLE_TOKEN_URI.

Resumable uploads are driven here, not by `MediaFileUpload.next_chunk`: the session is
initiated with our own request (so its URI is committed before the first byte), and each chunk
and status query is exactly one HTTP request on a fresh connection. httplib2 silently re-sends a
request after some connection errors; a chunk is never re-sent behind our back, and after any
interruption the session is asked where it stands (PUT, Content-Range: bytes */N).
"""

from __future__ import annotations

import http.client
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import google_auth_httplib2  # type: ignore[import-untyped]
import googleapiclient  # type: ignore[import-untyped]
from google.auth.exceptions import RefreshError
from google.oauth2.credentials import Credentials
from googleapiclient.discovery import build_from_document  # type: ignore[import-untyped]
from googleapiclient.errors import HttpError  # type: ignore[import-untyped]
from googleapiclient.http import build_http  # type: ignore[import-untyped]

from mdame_domain.channel import ChannelError, GrantRevoked, SessionState, TransferInterrupted

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


class YouTubeApi:
    """One channel's authorised client (a ChannelApi). The refresh token lives only in this object's
    credentials (memory) and is never part of a message, log line or repr."""

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
            token_uri=token_uri or os.environ.get(TOKEN_URI_VAR) or GOOGLE_TOKEN_URI,
            client_id=client_id,
            client_secret=client_secret,
            scopes=list(SCOPES),
        )
        base = build_http()
        base.timeout = timeout_s
        self.timeout_s = timeout_s
        self.http = google_auth_httplib2.AuthorizedHttp(self._credentials, http=base)
        self.service = build_from_document(
            _discovery(root_url if root_url is not None else os.environ.get(ROOT_URL_VAR)),
            http=self.http,
        )

    def __repr__(self) -> str:
        return "YouTubeApi(<credentials hidden>)"

    def _bearer(self) -> dict[str, str]:
        """A valid access token's header (refreshing it if needed)."""
        if not self._credentials.valid:
            try:
                self._credentials.refresh(google_auth_httplib2.Request(build_http()))
            except RefreshError as exc:
                raise _refresh_error(exc) from None
        headers: dict[str, str] = {}
        self._credentials.apply(headers)
        return headers

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
        request = self.service.videos().insert(
            part=",".join(sorted(body)), body=body, notifySubscribers=notify_subscribers
        )
        # The client builds the metadata-only URI; the resumable protocol is ours to speak.
        uri = request.uri.replace("/youtube/v3/videos?", "/upload/youtube/v3/videos?", 1)
        uri += "&uploadType=resumable"
        headers = {
            **request.headers,
            "content-type": "application/json; charset=UTF-8",
            "X-Upload-Content-Type": mime,
            "X-Upload-Content-Length": str(size),
        }
        try:
            resp, content = self.http.request(uri, "POST", body=request.body, headers=headers)
        except RefreshError as exc:
            raise _refresh_error(exc) from None
        except (OSError, http.client.HTTPException) as exc:
            raise TransferInterrupted(f"session initiation: {type(exc).__name__}") from None
        if resp.status != 200 or "location" not in resp:
            what = "YouTube videos.insert (initiate)"
            raise ChannelError(what, int(resp.status), _reason(content), _message(content))
        return str(resp["location"])

    def _put(self, session_uri: str, body: bytes, content_range: str) -> tuple[int, Any, bytes]:
        url = urlsplit(session_uri)
        conn_type = (
            http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        )
        conn = conn_type(url.netloc, timeout=self.timeout_s)
        try:
            conn.request(
                "PUT",
                f"{url.path}?{url.query}",
                body=body,
                headers={
                    **self._bearer(),
                    "Content-Range": content_range,
                    "Content-Length": str(len(body)),
                },
            )
            resp = conn.getresponse()
            return resp.status, resp.headers, resp.read()
        except (OSError, http.client.HTTPException) as exc:
            raise TransferInterrupted(f"PUT {content_range}: {type(exc).__name__}") from None
        finally:
            conn.close()

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

    def query(self, session_uri: str, size: int) -> SessionState:
        """Where the session stands (a status query: an empty PUT, bytes */size)."""
        return self._state(*self._put(session_uri, b"", f"bytes */{size}"), "status query")

    def send_chunk(self, session_uri: str, data: bytes, start: int, size: int) -> SessionState:
        """One chunk, sent once. The answer says how far the session got (maybe not to the
        chunk's end: resume from `next_byte`)."""
        end = start + len(data) - 1
        return self._state(*self._put(session_uri, data, f"bytes {start}-{end}/{size}"), "chunk")


def _refresh_error(exc: RefreshError) -> Exception:
    if "invalid_grant" in str(exc):
        return GrantRevoked("the channel's grant was revoked or expired (invalid_grant)")
    return TransferInterrupted(f"token refresh failed: {type(exc).__name__}")
