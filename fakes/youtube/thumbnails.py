"""thumbnails.set on the YouTube fake."""

from __future__ import annotations

import hashlib

from fakes.youtube.plumbing import Plumbing
from fakes.youtube.protocol import THUMBNAIL_COST, THUMBNAIL_MAX_BYTES, api_error


class Thumbnails(Plumbing):
    """thumbnails.set: a custom thumbnail, charged against the channel's units."""

    def thumbnails_set(self, query: dict[str, str]) -> None:
        channel = self._channel("thumbnail")
        if channel is None:
            self._body()
            return
        data = self._body()
        if self.fake.faults.take("thumbnail_5xx") is not None:
            self._send(503, api_error(503, "backendError", "Backend Error"))
            return
        st = self.fake.state
        with st.lock:
            video = st.data["videos"].get(query.get("videoId", ""))
            if video is None or video["channel"] != channel:
                self._send(404, api_error(404, "videoNotFound", "video not found"))
                return
            if not st.data["channels"][channel].get("custom_thumbnails", True):
                self._send(
                    403,
                    api_error(
                        403,
                        "forbidden",
                        "The authenticated user doesn't have permissions to upload and set "
                        "custom video thumbnails.",
                        "youtube.thumbnail",
                    ),
                )
                return
            if not data.startswith(b"\xff\xd8") or len(data) > THUMBNAIL_MAX_BYTES:
                self._send(400, api_error(400, "invalidImage", "not a JPEG up to 2 MB"))
                return
            if not st.charge(channel, "units", THUMBNAIL_COST):
                self._send(403, api_error(403, "quotaExceeded", "quota exceeded", "youtube.quota"))
                return
            (st.folder / "bytes" / f"thumbnail-{video['id']}.jpg").write_bytes(data)
            sets = int((video.get("thumbnail") or {}).get("sets", 0)) + 1
            video["thumbnail"] = {
                "sha256": hashlib.sha256(data).hexdigest(),
                "size": len(data),
                "sets": sets,
            }
            st.save()
        url = f"{self.fake.base_url}vi/{video['id']}/maxresdefault.jpg"
        self._send(
            200,
            {
                "kind": "youtube#thumbnailSetResponse",
                "items": [{"default": {"url": url, "width": 120, "height": 90}}],
            },
        )
