"""The TikTok fake's request handler: its routes, each to the part that answers it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fakes.common import Drop
from fakes.tiktok.control import Control
from fakes.tiktok.oauth import OAuth
from fakes.tiktok.posting import Posting
from fakes.tiktok.upload import Upload
from fakes.tiktok.videos import Videos

ROUTES: dict[tuple[str, str], tuple[Callable[[Any, dict[str, str]], None], str]] = {
    ("POST", "/v2/oauth/token"): (OAuth.token, "token"),
    ("GET", "/v2/auth/authorize"): (OAuth.authorize, "token"),
    ("POST", "/v2/post/publish/creator_info/query"): (Posting.creator_info, "creator_info"),
    ("POST", "/v2/post/publish/video/init"): (Posting.video_init, "init"),
    ("PUT", "/upload"): (Upload.upload, "chunk"),
    ("PUT", "/video"): (Upload.upload, "chunk"),
    ("POST", "/v2/post/publish/status/fetch"): (Posting.status_fetch, "status"),
    ("POST", "/v2/video/list"): (Videos.video_list, "list"),
    ("POST", "/v2/video/query"): (Videos.video_query, "list"),
    ("POST", "/_fake/faults"): (Control.control_faults, "control"),
    ("POST", "/_fake/creators"): (Control.control_creator, "control"),
    ("POST", "/_fake/limits"): (Control.control_limits, "control"),
    ("POST", "/_fake/revoke"): (Control.control_revoke, "control"),
    ("GET", "/_fake/state"): (Control.control_state, "control"),
}


class Handler(Control, Videos, Upload, Posting, OAuth):
    """Every request routed by its method and path to the part that answers it."""

    routes = ROUTES

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        with self.fake.state.lock:
            self.fake.state.data["requests"].append(f"{method} {url.path}?{url.query}")
        route = self.routes.get((method, url.path.rstrip("/")))
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
