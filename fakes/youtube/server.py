"""FakeYouTube: the server's lifecycle, what a test sets up on it and what it reads back."""

from __future__ import annotations

import contextlib
import hashlib
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from fakes.common import NamedFaults, new_secret, serving, store_demo_grant
from fakes.platform_common import PlatformServer
from fakes.youtube.faults import FAULTS
from fakes.youtube.handler import Handler
from fakes.youtube.protocol import quota_day
from fakes.youtube.state import State


class FakeYouTube(PlatformServer):
    """The server. Start with `running(...)` in tests, or `main()` standalone. The kinds
    `unauthorized()` lists: initiate, chunk, status, list, thumbnail."""

    state: State

    def __init__(self, state_dir: str | Path, port: int = 0, host: str = "127.0.0.1") -> None:
        self.state = State(Path(state_dir))
        self.state.load()
        self.faults = NamedFaults(FAULTS)
        super().__init__(host, port)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return Handler

    @property
    def token_uri(self) -> str:
        return f"{self.base_url}token"

    # -- set-up and inspection (tests) ---------------------------------------------------
    def add_channel(self, handle: str, refresh_token: str) -> str:
        """A channel whose owner granted `refresh_token`; returns the channel id."""
        with self.state.lock:
            for cid, ch in self.state.data["channels"].items():
                if ch["handle"] == handle:
                    ch["refresh_token"] = refresh_token
                    self.state.save()
                    return str(cid)
            cid = "UC" + hashlib.sha256(handle.encode()).hexdigest()[:22]
            self.state.data["channels"][cid] = {
                "handle": handle,
                "refresh_token": refresh_token,
                "uploads": "UU" + cid[2:],
                "videos": [],
            }
            self.state.save()
            return cid

    def allow_custom_thumbnails(self, channel_id: str, allowed: bool) -> None:
        """A channel may set custom thumbnails (a verified one) or not (thumbnails.set: 403)."""
        with self.state.lock:
            self.state.data["channels"][channel_id]["custom_thumbnails"] = allowed
            self.state.save()

    def thumbnail(self, video_id: str) -> dict[str, Any] | None:
        """The custom thumbnail set on a video ({"sha256", "size", "sets"}), if any."""
        with self.state.lock:
            found = self.state.data["videos"][video_id].get("thumbnail")
            return dict(found) if found else None

    def set_limits(self, **limits: int) -> None:
        with self.state.lock:
            self.state.data["limits"].update(limits)
            self.state.save()

    def videos(self, channel_id: str | None = None) -> list[dict[str, Any]]:
        with self.state.lock:
            return [
                dict(v)
                for v in self.state.data["videos"].values()
                if channel_id is None or v["channel"] == channel_id
            ]

    def add_video(self, channel_id: str, title: str) -> str:
        """A processed public video already on the channel (as if uploaded long ago), for tests
        that read videos without uploading them first. Returns its id."""
        with self.state.lock:
            video_id = "v" + hashlib.sha256(f"{channel_id}|{title}".encode()).hexdigest()[:10]
            self.state.data["videos"][video_id] = {
                "id": video_id,
                "channel": channel_id,
                "upload_id": "",
                "sha256": "",
                "size": 0,
                "snippet": {"title": title},
                "status": {"uploadStatus": "processed", "privacyStatus": "public"},
                "processing": "succeeded",
                "published_at": datetime.now(UTC).isoformat(),
            }
            self.state.data["channels"][channel_id]["videos"].insert(0, video_id)
            self.state.save()
            return video_id

    def remove_video(self, video_id: str) -> None:
        """The video is deleted from its channel (by its owner, or by YouTube): lists and
        videos.list no longer have it."""
        with self.state.lock:
            video = self.state.data["videos"].pop(video_id)
            uploads = self.state.data["channels"][video["channel"]]["videos"]
            uploads[:] = [v for v in uploads if v != video_id]
            self.state.save()

    def set_statistics(self, video_id: str, views: int, likes: int, comments: int = 0) -> None:
        """What videos.list(part="statistics") answers for a video from now on."""
        with self.state.lock:
            self.state.data["videos"][video_id]["statistics"] = {
                "viewCount": str(views),
                "likeCount": str(likes),
                "commentCount": str(comments),
            }
            self.state.save()

    def video_bytes(self, video_id: str) -> bytes:
        with self.state.lock:
            return self.state.blob(self.state.data["videos"][video_id]["upload_id"]).read_bytes()

    def counters(self, channel_id: str, day: str | None = None) -> dict[str, int]:
        with self.state.lock:
            by_day = self.state.data["counters"].get(day or quota_day(), {})
            return dict(by_day.get(channel_id, {"insert": 0, "search": 0, "units": 0}))

    def sessions(self) -> dict[str, dict[str, Any]]:
        with self.state.lock:
            return {k: dict(v) for k, v in self.state.data["sessions"].items()}

    def expire_sessions(self, status: int = 404) -> None:
        with self.state.lock:
            for s in self.state.data["sessions"].values():
                s["gone"] = status
            self.state.save()

    def initiations(self) -> list[dict[str, Any]]:
        """Every videos.insert initiation received with a valid token, oldest first:
        {"channel", "description", "counted", "at"}."""
        with self.state.lock:
            return [dict(i) for i in self.state.data["initiations"]]


def connect_accounts(fake: FakeYouTube, state: Any, env: str, accounts: list[Any]) -> None:
    """Demo wiring (`make demo PROVIDERS=fakes`): each account gets a channel on the fake and
    its grant stored encrypted (fakes.common.store_demo_grant)."""
    for account in accounts:
        token = new_secret("1//fake-", 24)
        fake.add_channel(account.handle, token)
        store_demo_grant(state, env, account, token)


def running(state_dir: str | Path, port: int = 0) -> contextlib.AbstractContextManager[FakeYouTube]:
    """The fake on 127.0.0.1 (an ephemeral port by default) for the duration of the block."""
    return serving(FakeYouTube(state_dir, port))
