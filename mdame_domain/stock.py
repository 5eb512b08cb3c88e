"""Stock footage: the candidates Pexels and Pixabay answer, which of them can cover a scene,
in which order, how a chosen file becomes the scene's clip, and how its author is credited.

The provider (mdame_resources/providers/stock.py) sends the searches and downloads; everything
it decides is here, as plain functions: reading each API's answer into `StockVideo`s, the
filter (9:16 after a centre crop at no less than the minimum size, and long enough for the
scene's span), the ranking, the rate-limit headers and the answers' classes, and the ffmpeg
arguments that crop, trim and encode the chosen file like the procedural clips.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from mdame_domain.mediatools import FFMPEG_BASE

PEXELS, PIXABAY = "pexels", "pixabay"
SOURCES = (PEXELS, PIXABAY)
SOURCE_NAMES = {PEXELS: "Pexels", PIXABAY: "Pixabay"}
MP4 = "video/mp4"
# The clip is 9:16, as the render.
ASPECT_W, ASPECT_H = 9, 16
# Narrower than this (width / height) counts as portrait: its 9:16 crop keeps nearly all of it.
PORTRAIT_MAX_RATIO = 0.75
# A reset value below this is a number of seconds, above it a Unix time: Pexels sends the
# time its window rolls over, Pixabay the seconds left in it.
_EPOCH_FLOOR = 1_000_000_000
_PIXABAY_SIZES = ("large", "medium", "small", "tiny")


@dataclass(frozen=True)
class StockFile:
    """One rendition of a video: a file the source serves."""

    url: str
    width: int
    height: int
    fps: float | None = None
    size: int | None = None  # bytes, when the source says (Pixabay does)
    file_type: str = MP4


@dataclass(frozen=True)
class StockVideo:
    """One search result, with every rendition it offers."""

    source: str
    id: str
    page_url: str
    author: str
    author_url: str
    duration_s: float
    width: int
    height: int
    files: tuple[StockFile, ...]
    query: str = ""  # the search that found it

    @property
    def key(self) -> str:
        return f"{self.source}:{self.id}"


@dataclass(frozen=True)
class StockCandidate:
    """A video that can cover the scene, with the rendition chosen for it."""

    source: str
    id: str
    page_url: str
    author: str
    author_url: str
    url: str  # the chosen file
    width: int
    height: int
    duration_s: float
    fps: float | None
    size: int | None = None
    query: str = ""

    @property
    def key(self) -> str:
        return f"{self.source}:{self.id}"

    @property
    def portrait(self) -> bool:
        return self.width <= self.height * PORTRAIT_MAX_RATIO

    def attribution(self) -> str:
        return attribution_line(self.source, self.author, self.page_url)

    def provenance(self) -> dict[str, Any]:
        """What a clip keeps of where it came from (scene results, the description)."""
        return {
            "source": self.source,
            "id": self.id,
            "page_url": self.page_url,
            "author": self.author,
            "author_url": self.author_url,
            "file_url": self.url,
            "width": self.width,
            "height": self.height,
            "footage_duration_s": self.duration_s,
            "fps": self.fps,
            "query": self.query,
            "attribution": self.attribution(),
        }


@dataclass(frozen=True)
class StockNeed:
    """What a scene asks of footage: its span, and the clip size a crop may not fall below."""

    span_s: float
    min_width: int
    min_height: int
    allow_landscape: bool = True
    max_bytes: int | None = None  # a rendition the source says is larger is not chosen

    def __post_init__(self) -> None:
        if self.span_s <= 0 or self.min_width <= 0 or self.min_height <= 0:
            raise ValueError(f"a stock need wants a positive span and size, not {self}")


@dataclass(frozen=True)
class Rejected:
    """A result that cannot cover the scene, and why (for the scene's record)."""

    key: str
    reason: str


@dataclass
class Selection:
    """The usable candidates in rank order, and the rejected with their reasons."""

    candidates: list[StockCandidate] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)


# --- reading the answers -------------------------------------------------------------------


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def parse_pexels(body: Mapping[str, Any], query: str = "") -> list[StockVideo]:
    """The videos of a Pexels /videos/search answer (`videos[]`); entries without an id or
    files are skipped."""
    videos = []
    for item in body.get("videos") or []:
        if not isinstance(item, Mapping) or item.get("id") is None:
            continue
        user = _mapping(item.get("user"))
        files = tuple(
            StockFile(
                url=str(f.get("link") or ""),
                width=_int(f.get("width")),
                height=_int(f.get("height")),
                fps=_float(f.get("fps")),
                size=_int(f.get("size")) or None,
                file_type=str(f.get("file_type") or ""),
            )
            for f in item.get("video_files") or []
            if isinstance(f, Mapping)
        )
        videos.append(
            StockVideo(
                source=PEXELS,
                id=str(item["id"]),
                page_url=str(item.get("url") or ""),
                author=str(user.get("name") or ""),
                author_url=str(user.get("url") or ""),
                duration_s=float(_float(item.get("duration")) or 0.0),
                width=_int(item.get("width")),
                height=_int(item.get("height")),
                files=files,
                query=query,
            )
        )
    return videos


def parse_pixabay(body: Mapping[str, Any], query: str = "") -> list[StockVideo]:
    """The hits of a Pixabay /api/videos/ answer. A size Pixabay does not have comes with an
    empty URL and zero size: it is no rendition. Pixabay names the user, not a profile URL;
    the profile URL is built from the name and the user id, as pixabay.com links them."""
    videos = []
    for hit in body.get("hits") or []:
        if not isinstance(hit, Mapping) or hit.get("id") is None:
            continue
        sizes = _mapping(hit.get("videos"))
        files = []
        for name in _PIXABAY_SIZES:
            one = sizes.get(name)
            if isinstance(one, Mapping) and one.get("url"):
                files.append(
                    StockFile(
                        url=str(one["url"]),
                        width=_int(one.get("width")),
                        height=_int(one.get("height")),
                        size=_int(one.get("size")) or None,
                    )
                )
        user, user_id = str(hit.get("user") or ""), _int(hit.get("user_id"))
        author_url = f"https://pixabay.com/users/{user}-{user_id}/" if user and user_id else ""
        largest = max(files, key=lambda f: f.width * f.height, default=None)
        videos.append(
            StockVideo(
                source=PIXABAY,
                id=str(hit["id"]),
                page_url=str(hit.get("pageURL") or ""),
                author=user,
                author_url=author_url,
                duration_s=float(_float(hit.get("duration")) or 0.0),
                width=largest.width if largest else 0,
                height=largest.height if largest else 0,
                files=tuple(files),
                query=query,
            )
        )
    return videos


# --- the filter and the ranking ----------------------------------------------------------


def crop_size(width: int, height: int) -> tuple[int, int]:
    """The largest 9:16 rectangle inside a width x height frame (what the centre crop keeps)."""
    if width <= 0 or height <= 0:
        return 0, 0
    if width * ASPECT_H > height * ASPECT_W:  # wider than 9:16: the sides go
        return height * ASPECT_W // ASPECT_H, height
    return width, width * ASPECT_H // ASPECT_W


def _covers(file: StockFile, need: StockNeed) -> bool:
    w, h = crop_size(file.width, file.height)
    return w >= need.min_width and h >= need.min_height


def choose_file(video: StockVideo, need: StockNeed) -> StockFile | str:
    """The smallest MP4 rendition whose 9:16 crop is at least the need's size (the least to
    download that is never scaled up), or why none is."""
    mp4 = [f for f in video.files if f.url and f.file_type.split(";")[0].strip() == MP4]
    if not mp4:
        return "no MP4 file"
    sized = [f for f in mp4 if f.width > 0 and f.height > 0]
    big_enough = [f for f in sized if _covers(f, need)]
    if not big_enough:
        best = max(sized, key=lambda f: crop_size(f.width, f.height), default=None)
        got = "no size" if best is None else "x".join(map(str, crop_size(best.width, best.height)))
        return f"too small: its 9:16 crop is {got}, under {need.min_width}x{need.min_height}"
    if need.max_bytes is not None:
        fitting = [f for f in big_enough if f.size is None or f.size <= need.max_bytes]
        if not fitting:
            return f"every file large enough is over the {need.max_bytes}-byte cap"
        big_enough = fitting
    return min(big_enough, key=lambda f: (f.width * f.height, f.size or 0))


def select(
    videos: Iterable[StockVideo], need: StockNeed, seen: set[str] | None = None
) -> Selection:
    """The videos that can cover the scene, ranked: portrait footage first (a 9:16 crop of a
    landscape one keeps a third of it), then in the source's own order (its relevance to the
    query). `seen`: keys already offered (by another query), skipped and added to."""
    picked: list[tuple[int, int, StockCandidate]] = []
    rejected: list[Rejected] = []
    seen = set() if seen is None else seen
    for order, video in enumerate(videos):
        if video.key in seen:
            continue
        seen.add(video.key)
        reason = None
        if video.duration_s < need.span_s:
            reason = f"too short: {video.duration_s:g} s for a {need.span_s:.2f} s span"
        chosen = choose_file(video, need) if reason is None else reason
        if isinstance(chosen, str):
            rejected.append(Rejected(video.key, chosen))
            continue
        candidate = StockCandidate(
            source=video.source,
            id=video.id,
            page_url=video.page_url,
            author=video.author,
            author_url=video.author_url,
            url=chosen.url,
            width=chosen.width,
            height=chosen.height,
            duration_s=video.duration_s,
            fps=chosen.fps,
            size=chosen.size,
            query=video.query,
        )
        if not candidate.portrait and not need.allow_landscape:
            rejected.append(Rejected(video.key, "landscape, and landscape footage is off"))
            continue
        picked.append((0 if candidate.portrait else 1, order, candidate))
    picked.sort(key=lambda item: (item[0], item[1]))
    return Selection([c for _, _, c in picked], rejected)


# --- the clip ----------------------------------------------------------------------------


def trim_start(duration_s: float, span_s: float) -> float:
    """Where the scene's span starts in the footage: centred, away from the fades and cuts
    footage tends to open and close with; 0 when it barely fits."""
    if span_s >= duration_s:
        return 0.0
    return math.floor((duration_s - span_s) / 2 * 100) / 100


def crop_filter(width: int, height: int, fps: int) -> str:
    """Centre-crop any frame to 9:16, scale it to width x height, at a constant fps."""
    return (
        f"crop='min(iw,ih*{ASPECT_W}/{ASPECT_H})':'min(ih,iw*{ASPECT_H}/{ASPECT_W})',"
        f"scale={width}:{height}:flags=lanczos,setsar=1,fps={fps},format=yuv420p"
    )


def clip_args(
    src: str, out: str, start_s: float, duration_s: float, width: int, height: int, fps: int = 24
) -> list[str]:
    """ffmpeg arguments for the scene's clip from downloaded footage: `duration_s` from
    `start_s`, cropped to 9:16 at width x height, H.264 without audio, as the procedural
    clips (mdame_domain/visuals.py)."""
    if duration_s <= 0 or start_s < 0:
        raise ValueError(
            f"a clip wants a positive duration from a start >= 0, not {start_s}+{duration_s}"
        )
    return [
        *FFMPEG_BASE,
        "-loglevel", "error",
        "-ss", f"{start_s:.3f}",
        "-i", src,
        "-t", f"{duration_s:.3f}",
        "-vf", crop_filter(width, height, fps),
        "-an",
        "-c:v", "libx264",
        "-preset", "ultrafast",
        "-pix_fmt", "yuv420p",
        "-movflags", "+faststart",
        out,
    ]  # fmt: skip


# --- credit --------------------------------------------------------------------------------


def attribution_line(source: str, author: str, page_url: str) -> str:
    """'Video by NAME on Pexels: URL', the credit both sources ask for where possible."""
    name = SOURCE_NAMES.get(source, source)
    by = f"Video by {author.strip()} on {name}" if author.strip() else f"Video on {name}"
    return f"{by}: {page_url}" if page_url else by


def attribution_lines(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """One credit per footage used (provenance records, scene order), each once."""
    lines = [
        attribution_line(
            str(r.get("source", "")), str(r.get("author", "")), str(r.get("page_url", ""))
        )
        for r in records
        if r.get("source") in SOURCES
    ]
    return list(dict.fromkeys(lines))


# --- rate limits and answers -----------------------------------------------------------------


def _header(headers: Mapping[str, str], name: str) -> str | None:
    lowered = name.lower()
    for key, value in headers.items():
        if key.lower() == lowered:
            return value
    return None


def rate_reset(headers: Mapping[str, str], now: datetime) -> datetime | None:
    """When the rate window rolls over, from X-Ratelimit-Reset: a Unix time (Pexels) or the
    seconds left (Pixabay); None when absent or unreadable."""
    raw = _header(headers, "X-Ratelimit-Reset")
    number = _float(raw)
    if number is None:
        return now if raw is not None and raw.strip() == "0" else None
    if number >= _EPOCH_FLOOR:
        return datetime.fromtimestamp(number, UTC)
    return now + timedelta(seconds=number)


def rate_remaining(headers: Mapping[str, str]) -> int | None:
    raw = _header(headers, "X-Ratelimit-Remaining")
    if raw is None or not raw.strip().lstrip("-").isdigit():
        return None
    return int(raw)


def answer_class(source: str, status: int, body: str) -> str:
    """How an API answer counts: 'ok'; 'wait' (429: the rate window); 'transient' (5xx, 408);
    'key' (the key refused: 401, 403, or Pixabay's 400 naming "key"); 'refused' (any other
    4xx: the same request meets it again)."""
    if 200 <= status < 300:
        return "ok"
    if status == 429:
        return "wait"
    if status >= 500 or status == 408:
        return "transient"
    if status in (401, 403):
        return "key"
    if source == PIXABAY and status == 400 and '"key"' in body.lower():
        return "key"
    return "refused"


def wait_until(
    status: int,
    headers: Mapping[str, str],
    now: datetime,
    default_wait_s: float,
    last_reset: datetime | None = None,
) -> datetime | None:
    """Until when a source may not be asked again: after a 429, its reset header, else the
    reset the last answer announced (Pexels' docs say a 429 may come without the headers),
    else `default_wait_s` from now; after an answer whose X-Ratelimit-Remaining is 0, its
    reset. None when it may be asked at once."""
    reset = rate_reset(headers, now)
    if status == 429:
        if reset is not None and reset > now:
            return reset
        if last_reset is not None and last_reset > now:
            return last_reset
        return now + timedelta(seconds=default_wait_s)
    if rate_remaining(headers) == 0 and reset is not None and reset > now:
        return reset
    return None


def first_line(text: str, limit: int = 300) -> str:
    """An error body as one short line (Pixabay answers plain text, Pexels JSON)."""
    return " ".join(text.split())[:limit]


def key_fix(source: str, variable: str) -> str:
    name = SOURCE_NAMES.get(source, source)
    other = SOURCE_NAMES[PIXABAY if source == PEXELS else PEXELS]
    return f"set {variable} to a valid {name} API key, or unset it to search {other} only"


def ordered_sources(configured: Sequence[str]) -> list[str]:
    """The sources in the order searched: Pexels, then Pixabay."""
    return [s for s in SOURCES if s in configured]
