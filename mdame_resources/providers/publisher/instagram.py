"""Instagram Reels through the publisher's resumable protocol (Instagram API with Instagram
Login).

The session is a REELS container with a resumable upload: `initiate` creates it, and the upload
URI and container id are what the publisher commits before the first byte. The bytes go to the
upload URI in chunks, each at the offset the server holds (after an interruption, the
container's video_status says how many bytes it holds; so does an upload refused for its token,
the container asked with a refreshed one). After the last byte the container's
status is polled until FINISHED and the reel is published (media_publish); a container that
expired or failed processing is a gone session, and one found already PUBLISHED (its
media_publish answer lost) is settled through the account's media, searched for the marker.

A reel has no thumbnail call: Instagram takes its cover from the video (thumb_offset).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from mdame_core import settings
from mdame_core.state import Account, StateStore
from mdame_domain.analytics import VideoCounters
from mdame_domain.channel import ChannelError, GrantRevoked, SessionState, TransferInterrupted
from mdame_domain.doctor import Redactor, Status, display_url, first_line
from mdame_domain.tiktok import MIB
from mdame_domain.video_metadata import (
    INSTAGRAM_CAPTION,
    POST_SETTINGS,
    body_marker,
    marked_caption,
)
from mdame_resources.health import Health, HealthScope, resolved
from mdame_resources.providers.instagram_api import (
    CONTENT_PUBLISHING_LIMIT,
    GRAPH_URL,
    GRAPH_URL_VAR,
    InstagramApi,
)
from mdame_resources.providers.publisher.account_health import account_finding, active_accounts
from mdame_resources.providers.publisher.grants import account_grant, store_rotated_grant
from mdame_resources.providers.publisher.marked import MarkedPostPublisher, PostListing

CAPTION_MAX = INSTAGRAM_CAPTION.most  # characters
COVER_AT_MS = 1000  # where in the video Instagram takes the cover from
# A long-lived token may be refreshed once it is a day old; refreshed weekly, a token of 60
# days is renewed long before it lapses, also when runs pause for weeks.
TOKEN_REFRESH_AFTER_S = 7 * 86400.0
STATUS_POLL_VAR = "MDAME_INSTAGRAM_STATUS_POLL_S"
# publish_id-style answers meaning the container cannot be published (any more).
GONE_ON_PUBLISH = ("24/2207008", "-2/2207020", "-1/2207053")
NOT_READY = "9007/2207027"
# The app's id and secret: only connecting an account (Business Login) needs them; a connected
# account's token is used and refreshed without them.
APP_ID_VAR, APP_SECRET_VAR = "MDAME_INSTAGRAM_APP_ID", "MDAME_INSTAGRAM_APP_SECRET"
# Meta's codes for a call the token has no permission for (#10, #200: a scope not granted).
PERMISSION_CODES = ("10", "200")
PUBLISH_PERMISSION = "instagram_business_content_publish"


def _session(session_uri: str) -> tuple[str, str]:
    """(upload URI, container id) of a committed session URI."""
    found = parse_qs(urlsplit(session_uri).fragment)
    try:
        return session_uri.split("#", 1)[0], found["container"][0]
    except (KeyError, IndexError):
        raise ValueError(f"not an Instagram session URI: {session_uri[:80]}") from None


class InstagramChannel(PostListing):
    """One Instagram professional account, spoken through the publisher's channel protocol."""

    platform = "Instagram"

    def __init__(self, api: InstagramApi, status_polls: int, status_poll_s: float) -> None:
        super().__init__()
        self.api = api
        self.status_polls, self.status_poll_s = status_polls, status_poll_s
        self._refused_at: int | None = None  # the offset of the last upload refused

    # -- the upload -------------------------------------------------------------------------
    def initiate(self, body: dict[str, Any], notify_subscribers: bool, size: int, mime: str) -> str:
        text = marked_caption(body, body_marker(body), CAPTION_MAX)
        # Meta's advice: ask the limit first, rather than upload a reel that cannot be published.
        used, allowed = self.api.publishing_limit()
        if used >= allowed:
            raise ChannelError(
                "content_publishing_limit",
                400,
                CONTENT_PUBLISHING_LIMIT,
                f"{used} of {allowed} reels published in the last 24 hours",
            )
        share = bool(body.get(POST_SETTINGS, {}).get("share_to_feed", True))
        container_id, uri = self.api.create_container(text, COVER_AT_MS, share)
        return f"{uri}#container={quote(container_id)}"

    def query(self, session_uri: str, size: int) -> SessionState:
        return self._settled(_session(session_uri)[1], size)

    def send_chunk(self, session_uri: str, data: bytes, start: int, size: int) -> SessionState:
        uri, container_id = _session(session_uri)
        try:
            self.api.upload(uri, data, start, size)
        except ChannelError as exc:
            # Out of step, the container over, or the token refused (the upload server says
            # which only in words): where is it? The container's read refreshes a refused
            # token. Refused again where the container said to go on, it is not a passing
            # refusal: said, not sent forever.
            if exc.status == 400 and self._refused_at != start:
                self._refused_at = start
                return self._settled(container_id, size)
            raise
        self._refused_at = None
        if start + len(data) < size:
            return SessionState(next_byte=start + len(data))
        return self._settled(container_id, size)

    def _settled(self, container_id: str, size: int) -> SessionState:
        """Where the container stands; once the file is whole and processed, the reel
        published. Still processing after the polls: TransferInterrupted, and the next run asks
        again (nothing is sent twice)."""
        for poll in range(max(1, self.status_polls)):
            found = self.api.container(container_id)
            code = str(found.get("status_code") or "")
            if code in ("ERROR", "EXPIRED", "PUBLISHED"):
                # PUBLISHED: its media_publish answer was lost; the media id is in the list.
                return SessionState(gone=True)
            if code == "FINISHED":
                try:
                    media_id = self.api.publish(container_id)
                    return SessionState(next_byte=size, video={"id": media_id})
                except ChannelError as exc:
                    if exc.reason in GONE_ON_PUBLISH:
                        return SessionState(gone=True)
                    if exc.reason != NOT_READY:
                        raise
            else:
                phase = (found.get("video_status") or {}).get("uploading_phase") or {}
                held = int(phase.get("bytes_transferred") or 0)
                if held < size:
                    return SessionState(next_byte=held)
            if poll + 1 < self.status_polls:
                time.sleep(self.status_poll_s)
        raise TransferInterrupted(f"Instagram is still processing container {container_id}")

    # -- the account's media, for a gone session ------------------------------------------
    def uploads_playlist(self) -> str:
        return "media"  # the account's media: /<IG_USER_ID>/media has no id of its own

    def playlist_page(self, playlist_id: str, page_token: str | None) -> dict[str, Any]:
        page = self.api.media_page(page_token)
        posts = [(str(m.get("id")), str(m.get("caption") or "")) for m in page.get("data") or []]
        paging = page.get("paging") or {}
        after = (paging.get("cursors") or {}).get("after")
        return self._page(posts, after if paging.get("next") else None)

    # -- statistics -----------------------------------------------------------------------
    def statistics_batches(self, video_ids: list[str]) -> list[list[str]]:
        return [[v] for v in video_ids]  # a reel's insights are one call each

    def statistics(self, video_ids: list[str]) -> dict[str, VideoCounters]:
        out = {}
        for media_id in video_ids:
            found = self.api.insights(media_id, ("views", "likes", "comments"))
            out[media_id] = VideoCounters(
                found.get("views", 0), found.get("likes", 0), found.get("comments", 0)
            )
        return out


class InstagramPublisher(MarkedPostPublisher):
    """Reels through the Instagram API with Instagram Login, each account opened with its
    sealed long-lived token (refreshed weekly)."""

    graph_url: str = ""  # empty: MDAME_INSTAGRAM_GRAPH_URL, else graph.instagram.com
    master_key_file: str = ""  # empty: MDAME_MASTER_KEY, else $MDAME_HOME/master.key
    timeout_s: float = 60.0
    chunk_size: int = 8 * MIB  # bytes per upload request; the server takes any split
    # A container counts against nothing; the 24-hour publishing limit counts published reels.
    initiation_counted: bool = False
    processing_polls: int = 12
    processing_poll_s: float = settings.default("MDAME_INSTAGRAM_STATUS_POLL_S")

    def channel(self, state: StateStore, account: Account, dimension_slug: str) -> InstagramChannel:
        grant = account_grant(state, account, dimension_slug, self.master_key_file)

        def rotated(token: str) -> None:
            store_rotated_grant(state, account, grant, token, self.master_key_file, time.time())

        api = InstagramApi(
            grant.refresh_token,
            graph_url=self.graph_url or None,
            timeout_s=self.timeout_s,
            on_rotate=rotated,
        )
        if grant.issued_at is None:
            # Its age unknown (a fresh connect): counted from now, refreshed a week on.
            rotated(grant.refresh_token)
        elif time.time() - grant.issued_at > TOKEN_REFRESH_AFTER_S:
            # A refusal or no answer: the token has weeks left, the next run refreshes it (a
            # revoked token, GrantRevoked, is not suppressed: the account needs a reconnect).
            with contextlib.suppress(ChannelError, TransferInterrupted):
                api.refresh_token()
        # The variable, when set, wins over the resource's field.
        poll_s = (
            float(settings.get(STATUS_POLL_VAR))
            if settings.is_set(STATUS_POLL_VAR)
            else self.processing_poll_s
        )
        return InstagramChannel(api, self.processing_polls, poll_s)

    def set_deadline(self, api: Any, deadline: float) -> None:
        api.api.deadline = deadline

    # -- health ----------------------------------------------------------------------------
    def health_check(self, timeout: float, scope: HealthScope | None = None) -> list[Health]:
        """Per active Instagram account of the dimensions in scope (read through scope.state):
        its stored long-lived token opened as channel() opens it, then `me` (the token valid:
        instagram_business_basic) and the account's content_publishing_limit (the publishing
        permission, instagram_business_content_publish, and the 24-hour limit's use). A token
        the graph refuses is refreshed once, as for the publisher, and the new one stored as
        the publisher stores it; nothing else is written (the weekly refresh is the runs'). One
        finding per account, its subject `<dimension>/<handle>`; one SKIP when there is none.
        A refused token is said with `mdame accounts connect` as the fix, and the app's id and
        secret it needs when they are not set."""
        accounts = active_accounts(scope, "instagram")
        if not accounts:
            return [Health(Status.SKIP, "no active Instagram account in the database")]
        assert scope is not None  # active_accounts read its accounts through it
        probe = resolved(self, timeout_s=timeout)
        redact = Redactor()
        return [
            account_finding(scope, slug, account, probe._account_health, redact)
            for slug, account in accounts
        ]

    def _account_health(
        self, state: StateStore, slug: str, account: Account, reconnect: str
    ) -> tuple[Status, str]:
        """One account's probe (see health_check) on a resolved copy of the publisher."""
        grant = account_grant(state, account, slug, self.master_key_file)

        def rotated(token: str) -> None:
            store_rotated_grant(state, account, grant, token, self.master_key_file, time.time())

        api = InstagramApi(
            grant.refresh_token,
            graph_url=self.graph_url or None,
            timeout_s=self.timeout_s,
            on_rotate=rotated,
        )
        where = display_url(self.graph_url or settings.raw(GRAPH_URL_VAR) or GRAPH_URL)
        call = "me"
        try:
            user_id = api.user_id()
            call = "content_publishing_limit"
            used, allowed = api.publishing_limit()
        except GrantRevoked as exc:
            unset = [n for n in (APP_ID_VAR, APP_SECRET_VAR) if not settings.is_set(n)]
            needs = (
                f" ({' and '.join(unset)} not set: the connect flow needs them)" if unset else ""
            )
            return Status.FAIL, f"{first_line(str(exc))}: {reconnect}{needs}"
        except ChannelError as exc:
            said = f"{call} at {where} answered HTTP {exc.status} {exc.reason}"
            if exc.reason.split("/")[0] in PERMISSION_CODES:
                lacking = PUBLISH_PERMISSION if call != "me" else "instagram_business_basic"
                return Status.FAIL, f"the token lacks {lacking} ({said}): {reconnect}"
            if exc.status >= 500:  # throttled or down for now: Meta marked it transient
                return Status.WARN, f"{said}: {first_line(exc.message)}"
            return Status.FAIL, f"{said}: {first_line(exc.message)}"
        except TransferInterrupted as exc:  # NotSent included: no usable answer
            return Status.FAIL, f"no answer from {where} ({first_line(str(exc))})"
        usage = f"{used} of {allowed} reels published in the last 24 hours"
        if used >= allowed:
            return (
                Status.WARN,
                f"token valid (IG user {user_id}); publishing limit reached: {usage}",
            )
        return Status.OK, f"token valid (IG user {user_id}); content_publishing_limit: {usage}"
