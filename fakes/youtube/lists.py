"""The YouTube fake's list calls: videos, the channel, its uploads playlist."""

from __future__ import annotations

import time
from typing import Any

from fakes.youtube.plumbing import Plumbing
from fakes.youtube.protocol import LIST_COST, api_error, video_resource


class Lists(Plumbing):
    """videos.list, channels.list and playlistItems.list, each charged a unit."""

    def _charge_list(self, channel: str) -> bool:
        st = self.fake.state
        with st.lock:
            if self.fake.faults.take("list_quota_exceeded") is None and st.charge(
                channel, "units", LIST_COST
            ):
                st.save()
                return True
        self._send(403, api_error(403, "quotaExceeded", "quota exceeded", "youtube.quota"))
        return False

    def videos_list(self, query: dict[str, str]) -> None:
        channel = self._channel()
        if channel is None or not self._charge_list(channel):
            return
        ids = [i for i in query.get("id", "").split(",") if i]
        if len(ids) > 50:  # the API's limit of ids per call (a refused call is still charged)
            self._send(400, api_error(400, "badRequest", f"{len(ids)} ids: at most 50 per call"))
            return
        videos = self.fake.state.data["videos"]
        items = [video_resource(videos[i], query.get("part", "")) for i in ids if i in videos]
        self._send(
            200,
            {
                "kind": "youtube#videoListResponse",
                "items": items,
                "pageInfo": {"totalResults": len(items), "resultsPerPage": len(items)},
            },
        )

    def channels_list(self, query: dict[str, str]) -> None:
        channel = self._channel()
        if channel is None or not self._charge_list(channel):
            return
        ch = self.fake.state.data["channels"][channel]
        item = {
            "kind": "youtube#channel",
            "id": channel,
            "contentDetails": {"relatedPlaylists": {"uploads": ch["uploads"]}},
        }
        self._send(200, {"kind": "youtube#channelListResponse", "items": [item]})

    def playlist_items_list(self, query: dict[str, str]) -> None:
        channel = self._channel()
        if channel is None or not self._charge_list(channel):
            return
        st = self.fake.state
        owner = [
            c for c, ch in st.data["channels"].items() if ch["uploads"] == query.get("playlistId")
        ]
        if not owner:
            self._send(404, api_error(404, "playlistNotFound", "playlist not found"))
            return
        now = time.time()
        ids = [
            vid
            for vid in st.data["channels"][owner[0]]["videos"]
            if st.data["videos"][vid].get("listed_from", 0.0) <= now
        ]
        size = max(1, min(50, int(query.get("maxResults", 5))))
        start = int(query.get("pageToken") or 0)
        page = ids[start : start + size]
        items = []
        for vid in page:
            v = st.data["videos"][vid]
            items.append(
                {
                    "kind": "youtube#playlistItem",
                    "snippet": {
                        **v["snippet"],
                        "resourceId": {"kind": "youtube#video", "videoId": vid},
                    },
                    "contentDetails": {"videoId": vid},
                }
            )
        body: dict[str, Any] = {"kind": "youtube#playlistItemListResponse", "items": items}
        if start + size < len(ids):
            body["nextPageToken"] = str(start + size)
        self._send(200, body)
