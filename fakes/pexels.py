"""A local Pexels Videos API server, for the stock footage provider's real httpx client.

    GET /videos/search?query=&orientation=&size=&per_page=&page=   (also /v1/videos/search)
    with the header `Authorization: <key>`

answers as api.pexels.com does: {page, per_page, total_results, url, videos[], next_page?},
each video {id, width, height, duration, url (its pexels.com page), image, full_res, tags,
avg_color, user {id, name, url}, video_files [{id, quality, file_type, width, height, fps,
link}], video_pictures [{id, nr, picture}]}. `orientation` (portrait, landscape, square)
and `size` (large: 4K, medium: Full HD, small: HD, by the video's smaller side) filter as the
API does, and so do min_width / max_width / min_duration / max_duration. The file links
and pictures point back at this server.

Every 2xx answer carries X-Ratelimit-Limit, X-Ratelimit-Remaining and X-Ratelimit-Reset, the
Unix time the window rolls over. Past the limit (default 200 an hour, `set_limits`), 429.
A missing or refused key: 401 {"error": ...} (the shape of the official client's
ErrorResponse; the text is this server's). What footage a query finds, the files, the faults
and the controls: fakes/stock_common/.

    python -m fakes.pexels --port 8095 [--key KEY] [--rate-limit N]
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fakes.common import serving
from fakes.stock_common import Footage, Slot, StockHandler, StockServer, stock_main

SOURCE = "pexels"
MAX_PER_PAGE = 80
DEFAULT_PER_PAGE = 15
# The API's order for a query (the off-topic slot moves first for about half the queries).
TEMPLATE = (
    Slot("off_topic", "portrait", 8, 25),
    Slot("too_short", "portrait", 1, 30),
    Slot("low_res", "low_res", 6, 25),
    Slot("on_topic", "portrait", 7, 30),
    Slot("landscape", "landscape", 9, 25),
    Slot("small_landscape", "small_landscape", 6, 25),
)
# `size`: the smallest side a video must reach.
_SIZES = {"large": 2160, "medium": 1080, "small": 720}
_QUALITY = {1080: "hd", 720: "hd", 2160: "uhd"}


class FakePexels(StockServer):
    source = SOURCE
    TEMPLATE = TEMPLATE

    def reset_header(self, window_end: float) -> str:
        return str(math.ceil(window_end))

    def handler(self) -> type[StockHandler]:
        return _Handler


def _slug(text: str) -> str:
    return "-".join(text.lower().split())


def _video(fake: FakePexels, footage: Footage) -> dict[str, Any]:
    files = [
        {
            "id": footage.id * 10 + i,
            "quality": _QUALITY.get(min(w, h), "sd"),
            "file_type": "video/mp4",
            "width": w,
            "height": h,
            "fps": float(footage.fps),
            "link": fake.link(footage.file_path(w, h)),
        }
        for i, (w, h) in enumerate(footage.renditions)
    ]
    picture = fake.link(footage.picture_path())
    return {
        "id": footage.id,
        "width": footage.width,
        "height": footage.height,
        "duration": footage.seconds,
        "full_res": None,
        "tags": [],
        "url": f"https://www.pexels.com/video/{footage.word}-{footage.id}/",
        "image": picture,
        "avg_color": None,
        "user": {
            "id": footage.author_id,
            "name": footage.author,
            "url": f"https://www.pexels.com/@{_slug(footage.author)}-{footage.author_id}",
        },
        "video_files": files,
        "video_pictures": [{"id": footage.id * 10, "nr": 0, "picture": picture}],
    }


def _keeps(footage: Footage, query: dict[str, str]) -> bool:
    orientation = query.get("orientation", "")
    w, h = footage.width, footage.height
    if orientation == "portrait" and not h > w:
        return False
    if orientation == "landscape" and not w > h:
        return False
    if orientation == "square" and w != h:
        return False
    if min(w, h) < _SIZES.get(query.get("size", ""), 0):
        return False
    for name, ok in (
        ("min_width", lambda v: w >= v),
        ("max_width", lambda v: w <= v),
        ("min_duration", lambda v: footage.seconds >= v),
        ("max_duration", lambda v: footage.seconds <= v),
    ):
        if query.get(name, "").isdigit() and not ok(int(query[name])):
            return False
    return True


class _Handler(StockHandler):
    fake: FakePexels
    SEARCH_PATHS = ("/videos/search", "/v1/videos/search")

    def key_of(self, query: dict[str, str]) -> str:
        return self.headers.get("Authorization", "").strip()

    def refuse_key(self) -> None:
        self._send(401, {"error": "Your API key is invalid or missing. Get one on pexels.com/api."})

    def rate_limited(self, headers: dict[str, str]) -> None:
        self._send(429, {"error": "Rate limit exceeded"}, headers)

    def search_answer(self, query: dict[str, str], found: list[Footage]) -> dict[str, Any] | None:
        words = query.get("query", "").strip()
        if not words:
            self._send(400, {"error": "query is required"})
            return None
        try:
            per_page = min(MAX_PER_PAGE, max(1, int(query.get("per_page") or DEFAULT_PER_PAGE)))
            page = max(1, int(query.get("page") or 1))
        except ValueError:
            self._send(400, {"error": "per_page and page must be numbers"})
            return None
        kept = [f for f in found if _keeps(f, query)]
        shown = kept[(page - 1) * per_page : page * per_page]
        answer: dict[str, Any] = {
            "page": page,
            "per_page": per_page,
            "total_results": len(kept),
            "url": f"https://www.pexels.com/search/videos/{quote(words)}/",
            "videos": [_video(self.fake, f) for f in shown],
        }
        if page * per_page < len(kept):
            answer["next_page"] = (
                f"{self.fake.base_url}videos/search/?page={page + 1}&per_page={per_page}"
                f"&query={quote(words)}"
            )
        return answer


def running(
    state_dir: str | Path | None = None, port: int = 0
) -> contextlib.AbstractContextManager[FakePexels]:
    """The server on 127.0.0.1 (an ephemeral port by default) for the duration of the block;
    its state in `state_dir` (a temporary folder when None)."""
    return serving(FakePexels(state_dir, port))


def main(argv: list[str] | None = None) -> None:
    stock_main(FakePexels, "Pexels", 200, 3600, __doc__.split("\n")[0], argv)


if __name__ == "__main__":
    main()
