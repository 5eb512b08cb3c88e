"""FakeInstagram: the server's lifecycle, what a test sets up on it and what it reads back."""

from __future__ import annotations

import contextlib
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from fakes.common import new_secret, serving, store_demo_grant
from fakes.instagram.faults import FAULTS, Faults
from fakes.instagram.handler import Handler
from fakes.instagram.protocol import (
    DEFAULT_VERSION,
    PUBLISH_WINDOW,
    REEL_METRICS,
    THROTTLE_MESSAGES,
    TOKEN_LIFETIME,
)
from fakes.instagram.state import State, container_status
from fakes.platform_common import PlatformServer


class FakeInstagram(PlatformServer):
    """The server. Start with `running(...)` in tests, or `main()` standalone. The kinds
    `unauthorized()` lists: create, upload, status, list, publish, limit, account, ..., refresh."""

    state: State

    def __init__(self, state_dir: str | Path, port: int = 0, host: str = "127.0.0.1") -> None:
        self.state = State(Path(state_dir))
        self.state.load()
        self.faults = Faults(FAULTS)
        super().__init__(host, port)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return Handler

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
                cid: {**c, "status_code": container_status(c, now, settings)}
                for cid, c in self.state.data["containers"].items()
            }

    def publishing_usage(self, ig_user_id: str) -> int:
        """Posts published in the current rolling window (content_publishing_limit)."""
        with self.state.lock:
            window = self.state.data["settings"]["publish_window"]
            return self.state.publishes_since(ig_user_id, time.time() - window)


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
