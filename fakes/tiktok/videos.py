"""The Display API on the TikTok fake: the video list and video query."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fakes.tiktok.auth import Auth
from fakes.tiktok.protocol import LISTED_TEXT_MAX, VIDEO_FIELDS

if TYPE_CHECKING:
    from fakes.tiktok.server import FakeTikTok


class Videos(Auth):
    """The Display API: the creator's public videos, listed or queried by id."""

    def _display_call(self, query: dict[str, str]) -> tuple[str, dict[str, Any], list] | None:
        """A Display API call's (open_id, body, fields), or None once it was answered: the
        caller, counted (every authenticated call, for ledgers to be checked against), within
        the per-app limit, its body and fields valid."""
        raw = self._body()
        caller = self._caller("video.list")
        if caller is None:
            return None
        open_id, _token = caller
        with self.fake.state.lock:
            calls = self.fake.state.data["list_calls"]
            calls[open_id] = calls.get(open_id, 0) + 1
        # The Display API's limit is per app, not per access token.
        if not self._allowed(open_id, "_app", "list") or self._server_fault("list_5xx"):
            return None
        body = self._json(raw)
        if body is None:
            return None
        fields = [f for f in query.get("fields", "").split(",") if f]
        if not fields or set(fields) - VIDEO_FIELDS:
            self._api("invalid_params", f"fields must be among {sorted(VIDEO_FIELDS)}")
            return None
        return open_id, body, fields

    def video_list(self, query: dict[str, str]) -> None:
        call = self._display_call(query)
        if call is None:
            return
        open_id, body, fields = call
        max_count, cursor = body.get("max_count", 10), body.get("cursor")
        if type(max_count) is not int or not 1 <= max_count <= 20:
            self._api("invalid_params", "max_count must be an integer from 1 to 20.")
            return
        if cursor is not None and type(cursor) is not int:
            self._api("invalid_params", "cursor must be an integer (a time in ms).")
            return
        fake = self.fake
        with fake.state.lock:
            username = fake.state.data["creators"][open_id]["username"]
            videos = [
                v
                for v in fake.videos(open_id)
                if fake.public_now(v) and (cursor is None or v["create_ms"] < cursor)
            ]
        page = videos[:max_count]
        data = {
            "videos": [_video_object(fake, v, username, fields) for v in page],
            "cursor": page[-1]["create_ms"] if page else (cursor or 0),
            "has_more": len(videos) > max_count,
        }
        self._api("ok", "", data)

    def video_query(self, query: dict[str, str]) -> None:
        """The Display API's Query Videos: the creator's own public videos among
        filters.video_ids (1-20), with the fields asked for."""
        call = self._display_call(query)
        if call is None:
            return
        open_id, body, fields = call
        ids = (body.get("filters") or {}).get("video_ids")
        if not isinstance(ids, list) or not 1 <= len(ids) <= 20:
            self._api("invalid_params", "filters.video_ids must list 1 to 20 video ids.")
            return
        fake = self.fake
        with fake.state.lock:
            username = fake.state.data["creators"][open_id]["username"]
            found = [v for v in fake.videos(open_id) if v["id"] in ids and fake.public_now(v)]
        videos = [_video_object(fake, v, username, fields) for v in found]
        self._api("ok", "", {"videos": videos, "cursor": 0, "has_more": False})


def _video_object(
    fake: FakeTikTok, v: dict[str, Any], username: str, fields: list[str]
) -> dict[str, Any]:
    text = v["title"][:LISTED_TEXT_MAX]
    share = f"https://www.tiktok.com/@{username}/video/{v['id']}"
    embed = f"https://www.tiktok.com/embed/v2/{v['id']}"
    stats = v.get("statistics") or {}
    full: dict[str, Any] = {
        "id": v["id"],
        "create_time": v["create_ms"] // 1000,
        "cover_image_url": f"{fake.base_url}cover/{v['id']}.jpeg",
        "share_url": share,
        "video_description": text,
        "duration": 0,
        "height": 1920,
        "width": 1080,
        "title": text,
        "embed_html": f'<blockquote class="tiktok-embed" cite="{share}"></blockquote>',
        "embed_link": embed,
        "like_count": stats.get("like_count", 0),
        "comment_count": stats.get("comment_count", 0),
        "share_count": stats.get("share_count", 0),
        "view_count": stats.get("view_count", 0),
    }
    return {f: full[f] for f in fields}
