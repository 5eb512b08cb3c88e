"""A local Pixabay Videos API server, for the stock footage provider's real httpx client.

    GET /api/videos/?key=KEY&q=&per_page=&page=   (the key travels in the query)

answers as pixabay.com does: {total, totalHits, hits[]}, each hit {id, pageURL, type, tags,
duration, videos {large, medium, small, tiny: {url, width, height, size, thumbnail}}, views,
downloads, likes, comments, user_id, user, userImageURL}; a size the video does not have comes
with an empty url and zeros, as Pixabay sends it. The file links and thumbnails point back at
this server. per_page must be 3-200 and q at most 100 characters, else 400.

Every answer carries X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset, the
seconds left in the window. Past the limit (default 100 a minute, `set_limits`), 429. A
missing or refused key: 400 with the text `[ERROR 400] "key" is wrong or missing.` (plain text,
as Pixabay answers its errors). What footage a query finds, the files, the faults and the
controls: fakes/stock_common/.

    python -m fakes.pixabay --port 8096 [--key KEY] [--rate-limit N]
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Any

from fakes.common import serving
from fakes.stock_common import (
    Footage,
    Slot,
    StockHandler,
    StockServer,
    file_size_estimate,
    stock_main,
)

SOURCE = "pixabay"
SIZES = ("large", "medium", "small", "tiny")
MAX_Q_CHARS = 100
TEMPLATE = (
    Slot("off_topic", "landscape", 8, 25),
    Slot("too_short", "landscape", 1, 25),
    Slot("on_topic", "portrait", 10, 30),
    Slot("landscape", "landscape", 7, 25),
    Slot("small_landscape", "small_landscape", 6, 25),
    Slot("low_res", "low_res", 6, 25),
)
_ABSENT = {"url": "", "width": 0, "height": 0, "size": 0, "thumbnail": ""}


class FakePixabay(StockServer):
    source = SOURCE
    TEMPLATE = TEMPLATE
    LIMITS = {"rate_limit": 100, "rate_window": 60.0}

    def reset_header(self, window_end: float) -> str:
        return str(max(0, math.ceil(window_end - self.clock())))

    def handler(self) -> type[StockHandler]:
        return _Handler


def _sizes(fake: FakePixabay, footage: Footage) -> dict[str, Any]:
    """Pixabay's four sizes from the footage's renditions, largest first: a 4K `large` is never
    there, so the renditions fill medium, small and tiny (fewer: the smaller sizes)."""
    renditions = list(footage.renditions[:3])
    named = dict(zip(SIZES[1 : 1 + len(renditions)], renditions, strict=True))
    if len(renditions) == 1:  # a small video: its one file is the tiny size
        named = {"tiny": renditions[0]}
    thumbnail = fake.link(footage.picture_path())
    out: dict[str, Any] = {}
    for name in SIZES:
        if name not in named:
            out[name] = dict(_ABSENT)
            continue
        w, h = named[name]
        out[name] = {
            "url": fake.link(footage.file_path(w, h)),
            "width": w,
            "height": h,
            "size": file_size_estimate(w, h, footage.seconds),
            "thumbnail": thumbnail,
        }
    return out


def _hit(fake: FakePixabay, footage: Footage) -> dict[str, Any]:
    user = footage.author.replace(" ", "")
    return {
        "id": footage.id,
        "pageURL": f"https://pixabay.com/videos/{footage.word}-{footage.id}/",
        "type": "film",
        "tags": f"{footage.word}, nature, background",
        "duration": footage.seconds,
        "videos": _sizes(fake, footage),
        "views": footage.id % 10_000,
        "downloads": footage.id % 1_000,
        "likes": footage.id % 100,
        "comments": footage.id % 10,
        "user_id": footage.author_id,
        "user": user,
        "userImageURL": "",
    }


class _Handler(StockHandler):
    fake: FakePixabay
    SEARCH_PATHS = ("/api/videos",)

    def key_of(self, query: dict[str, str]) -> str:
        return query.get("key", "").strip()

    def refuse_key(self) -> None:
        self.send_text(400, '[ERROR 400] "key" is wrong or missing.')

    def rate_limited(self, headers: dict[str, str]) -> None:
        self.send_text(429, "[ERROR 429] Too many requests. Please slow down.", headers)

    def search_answer(self, query: dict[str, str], found: list[Footage]) -> dict[str, Any] | None:
        words = query.get("q", "")
        if len(words) > MAX_Q_CHARS:
            self.send_text(400, '[ERROR 400] "q" exceeds the maximum length of 100 characters.')
            return None
        try:
            per_page = int(query.get("per_page") or 20)
            page = max(1, int(query.get("page") or 1))
        except ValueError:
            self.send_text(400, '[ERROR 400] "per_page" is not a number.')
            return None
        if not 3 <= per_page <= 200:
            self.send_text(400, '[ERROR 400] "per_page" is out of valid range.')
            return None
        shown = found[(page - 1) * per_page : page * per_page]
        return {
            "total": len(found),
            "totalHits": len(found),
            "hits": [_hit(self.fake, f) for f in shown],
        }


def running(
    state_dir: str | Path | None = None, port: int = 0
) -> contextlib.AbstractContextManager[FakePixabay]:
    """The server on 127.0.0.1 (an ephemeral port by default) for the duration of the block;
    its state in `state_dir` (a temporary folder when None)."""
    return serving(FakePixabay(state_dir, port))


def main(argv: list[str] | None = None) -> None:
    stock_main(FakePixabay, "Pixabay", 100, 60, __doc__.split("\n")[0], argv)


if __name__ == "__main__":
    main()
