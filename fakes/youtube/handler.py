"""The YouTube fake's request handler: its routes, each to the part that answers it."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fakes.common import Drop
from fakes.youtube.control import Control
from fakes.youtube.lists import Lists
from fakes.youtube.oauth import OAuth
from fakes.youtube.protocol import api_error
from fakes.youtube.session import Session
from fakes.youtube.thumbnails import Thumbnails
from fakes.youtube.upload import Upload


def _request_kind(method: str, path: str, query: dict[str, str], headers: Any) -> str:
    if path.endswith("/token"):
        return "token"
    if "/thumbnails/" in path:
        return "thumbnail"
    if path.startswith("/upload/") and method == "POST":
        return "initiate"
    if path.startswith("/upload/"):
        return "status" if "*" in headers.get("Content-Range", "") else "chunk"
    return "list"


ROUTES: dict[tuple[str, str], Any] = {
    ("POST", "/token"): OAuth.token,
    ("GET", "/o/oauth2/auth"): OAuth.authorize,
    ("POST", "/upload/youtube/v3/videos"): Upload.initiate,
    ("POST", "/resumable/upload/youtube/v3/videos"): Upload.initiate,
    ("PUT", "/upload/youtube/v3/videos"): Session.put,
    ("PUT", "/resumable/upload/youtube/v3/videos"): Session.put,
    ("POST", "/upload/youtube/v3/thumbnails/set"): Thumbnails.thumbnails_set,
    ("GET", "/youtube/v3/videos"): Lists.videos_list,
    ("GET", "/youtube/v3/channels"): Lists.channels_list,
    ("GET", "/youtube/v3/playlistItems"): Lists.playlist_items_list,
    ("POST", "/_fake/faults"): Control.control_faults,
    ("POST", "/_fake/channels"): Control.control_channel,
    ("GET", "/_fake/state"): Control.control_state,
}


class Handler(Control, Lists, Thumbnails, Session, Upload, OAuth):
    """Every request routed by its method and path to the part that answers it."""

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        st = self.fake.state
        with st.lock:
            st.data["requests"].append(f"{method} {url.path}?{url.query}")
        kind = _request_kind(method, url.path, query, self.headers)
        self._expire_early(kind)
        slow = self.fake.faults.pop_first(
            lambda f: f["fault"] == "slow" and f.get("on") in (None, kind)
        )
        if slow is not None:
            time.sleep(float(slow.get("seconds", 1.0)))
        try:
            route = ROUTES.get((method, url.path.rstrip("/")))
            if route is None:
                self._send(
                    404, api_error(404, "notFound", f"no route {method} {url.path}", "global")
                )
                return
            route(self, query)
        except Drop as drop:
            self._drop(drop.reset)
