"""FakeTikTok: the server's lifecycle, what a test sets up on it and what it reads back."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from fakes.common import NamedFaults, new_secret, serving, store_demo_grant
from fakes.platform_common import PlatformServer
from fakes.tiktok.faults import FAULTS
from fakes.tiktok.handler import Handler
from fakes.tiktok.model import Model, posted_at
from fakes.tiktok.protocol import DEFAULT_SCOPES, PRIVATE_OPTIONS, PUBLIC_OPTIONS
from fakes.tiktok.state import State


def open_id_for(username: str) -> str:
    """The open_id the fake gives a creator (stable across restarts and runs)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"tiktok:{username}"))


class FakeTikTok(Model, PlatformServer):
    """The server. Start with `running(...)` in tests, or `main()` standalone. The kinds
    `unauthorized()` lists: creator_info, init, status, list."""

    state: State

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
        return Handler

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
        now = self.clock()
        with self.state.lock:
            found = [
                dict(v)
                for v in self.state.data["videos"].values()
                if (open_id is None or v["open_id"] == open_id) and posted_at(v) <= now
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

    def expire_tokens(self, open_id: str, spare: bool = True) -> None:
        """The creator's access tokens expire now, before their time (refused from now on);
        `spare`: the next one issued is spared its first request."""
        with self.state.lock:
            for token in self.state.data["tokens"].values():
                if token["open_id"] == open_id and not token.get("spared"):
                    token["expires_at"] = min(token["expires_at"], self.clock() - 1)
            self.state.data["creators"][open_id]["expired_early"] = spare
            self.state.save()


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
