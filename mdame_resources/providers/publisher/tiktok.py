"""TikTok through the publisher's resumable protocol: Direct Post with FILE_UPLOAD.

The session is the post's upload: `initiate` asks creator_info (the privacy the creator may post
with) and initializes the post, and its upload_url, publish_id and chunk size are what the
publisher commits before the first byte. Chunks go in TikTok's declared sizes; after the last,
the post's status is polled until it is published (PUBLISH_COMPLETE), or left to the next run
to ask again. A failed post, an expired upload_url or an unknown upload is a gone session: it
is settled through the creator's video list, which holds public posts only.

TikTok's per-minute limits per creator (init, status, creator_info) are kept in the ledger by a
CallPacer: a call waits for its slot, or is left unsent for a later run, never answered 429.

A post has no thumbnail call: TikTok takes its cover from the video (video_cover_timestamp_ms).
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from mdame_core import settings
from mdame_core.state import Account, StateStore
from mdame_domain.analytics import VideoCounters
from mdame_domain.channel import (
    AppRefused,
    ChannelError,
    GrantRevoked,
    SessionState,
    TransferInterrupted,
)
from mdame_domain.doctor import Redactor, Status, display_url, first_line
from mdame_domain.tiktok import (
    FAILED,
    MIB,
    PUBLISHED,
    TikTokRuleError,
    caption,
    chunk_plan,
    posted_id,
    privacy_level,
)
from mdame_domain.video_metadata import POST_SETTINGS, body_marker
from mdame_resources.health import Health, HealthScope, resolved
from mdame_resources.providers.publisher.account_health import account_finding, active_accounts
from mdame_resources.providers.publisher.grants import account_grant, store_rotated_grant
from mdame_resources.providers.publisher.marked import MarkedPostPublisher, PostListing
from mdame_resources.providers.publisher.pacing import CallPacer
from mdame_resources.providers.tiktok_api import (
    BASE_URL_VAR,
    CLIENT_KEY_VAR,
    CLIENT_SECRET_VAR,
    DAILY_CAP,
    RATE_LIMITED,
    SCOPE_REFUSED,
    TIKTOK_BASE_URL,
    TikTokApi,
)

# Where in the video TikTok takes the cover from.
COVER_AT_MS = 1000
# The window of TikTok's per-minute limits (a setting, so that a test can shorten it).
RATE_WINDOW_ENV = "MDAME_TIKTOK_RATE_WINDOW_S"
# creator_info's refusals that say the creator may not post now, not that the grant is bad.
CANNOT_POST_NOW = (DAILY_CAP, "reached_active_user_cap", RATE_LIMITED)


def _session(session_uri: str) -> tuple[str, str, int]:
    """(upload_url, publish_id, chunk_size) of a committed session URI."""
    parts = urlsplit(session_uri)
    found = parse_qs(parts.fragment)
    upload_url = session_uri.split("#", 1)[0]
    try:
        return upload_url, found["publish_id"][0], int(found["chunk_size"][0])
    except (KeyError, IndexError, ValueError):
        raise ValueError(f"not a TikTok session URI: {upload_url[:80]}") from None


class TikTokChannel(PostListing):
    """One creator's TikTok, spoken through the publisher's channel protocol."""

    platform = "TikTok"

    def __init__(
        self, api: TikTokApi, preferred_chunk: int, status_polls: int, status_poll_s: float
    ) -> None:
        super().__init__()
        self.api = api
        self.preferred_chunk = preferred_chunk
        self.status_polls, self.status_poll_s = status_polls, status_poll_s

    # -- the upload -------------------------------------------------------------------------
    def initiate(self, body: dict[str, Any], notify_subscribers: bool, size: int, mime: str) -> str:
        marker = body_marker(body)
        allowed = list(self.api.creator_info().get("privacy_level_options") or [])
        try:
            post_info = {
                "title": caption(body, marker),
                "privacy_level": privacy_level(body, allowed),
                **{
                    toggle: bool(body.get(POST_SETTINGS, {}).get(toggle, False))
                    for toggle in ("disable_duet", "disable_comment", "disable_stitch")
                },
                "video_cover_timestamp_ms": COVER_AT_MS,
                # TikTok's AI-generated content label.
                "is_aigc": bool(body.get("status", {}).get("containsSyntheticMedia", True)),
            }
        except TikTokRuleError as exc:
            # Refused here, as TikTok would refuse it: the same post is refused every time.
            refused = ChannelError("video/init", 400, "privacy_level_option_mismatch", str(exc))
            raise refused from None
        plan = chunk_plan(size, self.preferred_chunk)
        publish_id, upload_url = self.api.init_post(post_info, plan)
        return f"{upload_url}#publish_id={quote(publish_id)}&chunk_size={plan.chunk_size}"

    def query(self, session_uri: str, size: int) -> SessionState:
        _, publish_id, chunk = _session(session_uri)
        return self._settled(publish_id, size, chunk)

    def send_chunk(self, session_uri: str, data: bytes, start: int, size: int) -> SessionState:
        upload_url, publish_id, chunk = _session(session_uri)
        try:
            answered = self.api.put_chunk(upload_url, data, start, size, "video/mp4")
        except ChannelError as exc:
            if exc.status in (403, 404):
                return SessionState(gone=True)  # the upload_url expired, or is unknown
            if exc.status == 416:
                return self._settled(publish_id, size, chunk)  # out of step: where is it?
            raise
        if answered == 206:
            return SessionState(next_byte=start + len(data))
        return self._settled(publish_id, size, chunk)

    def _settled(self, publish_id: str, size: int, chunk: int) -> SessionState:
        """Where the post stands; once the file is whole, its status polled until it is
        published or failed. Still processing after the polls: TransferInterrupted, and the
        next run asks again (the post is committed, nothing is sent twice)."""
        for poll in range(max(1, self.status_polls)):
            status = self.api.fetch_status(publish_id)
            state = str(status.get("status") or "")
            if state == PUBLISHED:
                return SessionState(next_byte=size, video={"id": posted_id(status, publish_id)})
            if state == FAILED:
                return SessionState(gone=True)
            uploaded = int(status.get("uploaded_bytes") or 0)
            if uploaded < size:
                # TikTok takes whole chunks: resume from the start of the one it holds part of.
                last = (chunk_plan(size, chunk).count - 1) * chunk
                return SessionState(next_byte=min(uploaded - uploaded % chunk, last))
            if poll + 1 < self.status_polls:
                time.sleep(self.status_poll_s)
        raise TransferInterrupted(f"TikTok is still processing post {publish_id}")

    # -- the list, for a gone session ------------------------------------------------------
    def uploads_playlist(self) -> str:
        return "public-videos"  # the creator's public videos: /v2/video/list/ has no id

    def playlist_page(self, playlist_id: str, page_token: str | None) -> dict[str, Any]:
        page = self.api.list_videos(int(page_token) if page_token else None)
        posts = [
            (str(v.get("id")), str(v.get("video_description") or ""))
            for v in page.get("videos") or []
        ]
        more = page.get("has_more") and page.get("cursor") is not None
        return self._page(posts, str(page["cursor"]) if more else None)

    # -- statistics -----------------------------------------------------------------------
    def statistics_batches(self, video_ids: list[str]) -> list[list[str]]:
        """Query Videos takes 20 ids; a private post (named by its publish_id) has no public
        id to ask about, and is left out."""
        public = [v for v in video_ids if not v.startswith("v_pub")]
        return [public[i : i + 20] for i in range(0, len(public), 20)]

    def statistics(self, video_ids: list[str]) -> dict[str, VideoCounters]:
        return {
            str(v["id"]): VideoCounters(
                int(v.get("view_count") or 0),
                int(v.get("like_count") or 0),
                int(v.get("comment_count") or 0),
            )
            for v in self.api.query_videos(video_ids)
        }


class TikTokPublisher(MarkedPostPublisher):
    """TikTok's Content Posting API: each creator opened with its sealed, rotating grant."""

    # The app's client key and secret. Empty: MDAME_TIKTOK_CLIENT_KEY and
    # MDAME_TIKTOK_CLIENT_SECRET, read when a TikTok account is opened, so that a deployment
    # without TikTok accounts needs neither (a dg.EnvVar would fail every publications run).
    client_key: str = ""
    client_secret: str = ""
    base_url: str = ""  # empty: MDAME_TIKTOK_BASE_URL, else open.tiktokapis.com
    master_key_file: str = ""  # empty: MDAME_MASTER_KEY, else $MDAME_HOME/master.key
    timeout_s: float = 60.0
    chunk_size: int = 10 * MIB  # the preferred chunk; chunk_plan keeps it within TikTok's rules
    # An initialized post counts against the creator's daily cap, whatever becomes of it.
    initiation_counted: bool = True
    processing_polls: int = 6  # status polls after the last chunk (30 a minute at most)
    processing_poll_s: float = settings.default("MDAME_TIKTOK_STATUS_POLL_S")
    # TikTok's limits per access token, kept through the ledger: a backfill's posts, and the
    # processes and runs of one creator, never send a call TikTok would answer with 429.
    init_per_minute: int = 6
    status_per_minute: int = 30
    creator_info_per_minute: int = 20
    rate_window_s: float | None = None  # None: MDAME_TIKTOK_RATE_WINDOW_S, else 60

    def _app(self, account: Account) -> tuple[str, str]:
        key = self.client_key or settings.raw(CLIENT_KEY_VAR)
        secret = self.client_secret or settings.raw(CLIENT_SECRET_VAR)
        if not key or not secret:
            missing = [n for n, v in ((CLIENT_KEY_VAR, key), (CLIENT_SECRET_VAR, secret)) if not v]
            raise AppRefused(
                f"account {account.handle} is a TikTok account and {', '.join(missing)} "
                "is not set: the TikTok app's client key and secret (developers.tiktok.com)"
            )
        return key, secret

    def _account_api(self, state: StateStore, account: Account, dimension_slug: str) -> TikTokApi:
        """The account's API client on its stored grant; a rotated refresh token is sealed and
        stored at once (TikTok retires the old one)."""
        client_key, client_secret = self._app(account)
        grant = account_grant(state, account, dimension_slug, self.master_key_file)

        def rotated(refresh_token: str) -> None:
            store_rotated_grant(state, account, grant, refresh_token, self.master_key_file)

        return TikTokApi(
            grant.refresh_token,
            client_key,
            client_secret,
            base_url=self.base_url or None,
            timeout_s=self.timeout_s,
            on_rotate=rotated,
        )

    def channel(self, state: StateStore, account: Account, dimension_slug: str) -> TikTokChannel:
        api = self._account_api(state, account, dimension_slug)
        window = self.rate_window_s
        api.pace = CallPacer(
            state,
            account.id,
            "TikTok",
            {
                "init": self.init_per_minute,
                "status": self.status_per_minute,
                "creator_info": self.creator_info_per_minute,
            },
            settings.get(RATE_WINDOW_ENV) if window is None else window,
            lambda: api.deadline,
        )
        return TikTokChannel(api, self.chunk_size, self.processing_polls, self.processing_poll_s)

    def set_deadline(self, api: Any, deadline: float) -> None:
        api.api.deadline = deadline

    def _uncounted_initiation(self, exc: BaseException) -> str | None:
        # An init TikTok answered with an error created no post (no publish_id): the daily cap
        # counts posts. One that got no answer may have created one, and stays counted.
        if isinstance(exc, ChannelError):
            return f"answered HTTP {exc.status} {exc.reason}: no post was created"
        return super()._uncounted_initiation(exc)

    def chunk_length(self, session_uri: str, offset: int, size: int) -> int:
        _, _, chunk = _session(session_uri)
        plan = chunk_plan(size, chunk)
        start, end = plan.chunk_at(offset)
        return end - start

    # -- health ----------------------------------------------------------------------------
    def health_check(self, timeout: float, scope: HealthScope | None = None) -> list[Health]:
        """Per active TikTok account of the dimensions in scope (read through scope.state): its
        grant opened as channel() opens it, the token refreshed, creator_info asked (Direct
        Post's scope, video.publish; a 401 refreshes once more, as for the publisher) and one
        entry of the video list (video.list: how a post whose answer was lost is found, and
        its statistics read). One finding per account, its subject `<dimension>/<handle>`.

        The app's client key and secret come first: unset or refused, one FAIL for the whole
        provider, naming the variables, never their values. No TikTok account: one SKIP (a
        deployment without TikTok needs neither). TikTok retires a refresh token once it issues
        the next, so each account is probed under its dimension's pipeline lock and the rotated
        token stored as the publisher stores it (a run holding the lock: a WARN, not checked
        now); nothing else is written, and a refused grant is said with `mdame accounts
        connect` as the fix."""
        accounts = active_accounts(scope, "tiktok")
        if not accounts:
            return [Health(Status.SKIP, "no active TikTok account in the database")]
        probe = resolved(self, timeout_s=timeout)
        key = probe.client_key or settings.raw(CLIENT_KEY_VAR)
        secret = probe.client_secret or settings.raw(CLIENT_SECRET_VAR)
        missing = [n for n, v in ((CLIENT_KEY_VAR, key), (CLIENT_SECRET_VAR, secret)) if not v]
        if missing:
            return [
                Health(
                    Status.FAIL,
                    f"{' and '.join(missing)} not set: the TikTok app's client key and secret "
                    f"(developers.tiktok.com), needed by {len(accounts)} active account(s)",
                )
            ]
        redact = Redactor()
        redact.add(key, secret)
        assert scope is not None  # active_accounts read its accounts through it
        found: list[Health] = []
        for slug, account in accounts:
            try:
                found.append(
                    account_finding(
                        scope, slug, account, probe._account_health, redact, (AppRefused,)
                    )
                )
            except AppRefused as exc:
                # The app's credentials, not this account's grant: one finding, for all.
                return [Health(Status.FAIL, redact(first_line(str(exc), 400)))]
        return found

    def _account_health(
        self, state: StateStore, slug: str, account: Account, reconnect: str
    ) -> tuple[Status, str]:
        """One account's probe (see health_check) on a resolved copy of the publisher.
        AppRefused goes up: it is the app's, not the account's."""
        api = self._account_api(state, account, slug)
        where = display_url(self.base_url or settings.raw(BASE_URL_VAR) or TIKTOK_BASE_URL)
        info: dict[str, Any] = {}
        # Each call with the scope it needs: creator_info (Direct Post), then the video list.
        for call, scope in (("creator_info", "video.publish"), ("video/list", "video.list")):
            try:
                if call == "creator_info":
                    info = api.creator_info()
                else:
                    api.list_videos(max_count=1)
            except AppRefused:
                raise
            except GrantRevoked:
                return Status.FAIL, (
                    f"TikTok refused the stored refresh token (invalid_grant): {reconnect}"
                )
            except ChannelError as exc:
                said = f"{call} at {where} answered HTTP {exc.status} {exc.reason}"
                if exc.reason == SCOPE_REFUSED:
                    return Status.FAIL, f"the grant lacks the scope {scope} ({said}): {reconnect}"
                if exc.reason in CANNOT_POST_NOW:
                    return Status.WARN, f"the token works; the creator may not post now ({said})"
                return Status.FAIL, f"{said}: {first_line(exc.message)}"
            except TransferInterrupted as exc:  # NotSent included: no usable answer
                return Status.FAIL, f"no answer from {where} ({first_line(str(exc))})"
        options = ", ".join(str(o) for o in info.get("privacy_level_options") or []) or "none"
        creator = info.get("creator_username") or account.handle
        return Status.OK, (
            f"token refreshed; creator_info answers for {creator} (privacy options {options}); "
            "video.publish and video.list granted"
        )
