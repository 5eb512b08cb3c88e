"""Typed trend sources of a dimension (feeds, Google Trends, YouTube, Reddit), their requests,
body decoding and secret redaction. Pure: no HTTP client, no Dagster.

A source's `key` is its request URL without any secret: the feed cache is keyed by it and it is
the label in logs, events, metadata and each item's `source`. The YouTube API key is added to
the request by the fetcher only, and `redact` removes it from any text that could carry it.
"""

from __future__ import annotations

import codecs
import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

from mdame_domain import redaction
from mdame_domain.trends import FeedError, TrendItem

# Kinds a dimension's `sources:` entry may name. rss/atom/json are one HTTP feed kind (the
# parser detects the format); the name documents what the operator expects.
FEED_KINDS = ("rss", "atom", "json", "feed")
SOURCE_KINDS = (*FEED_KINDS, "google_trends", "youtube_most_popular", "reddit_top")
REDDIT_PERIODS = ("hour", "day", "week", "month", "year", "all")

DEFAULT_YOUTUBE_ROOT_URL = "https://www.googleapis.com"
DEFAULT_GOOGLE_TRENDS_ROOT_URL = "https://trends.google.com"
DEFAULT_REDDIT_ROOT_URL = "https://www.reddit.com"

_REGION = re.compile(r"^[A-Z]{2}$")
_SUBREDDIT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_]{1,20}$")
_CATEGORY = re.compile(r"^[0-9]{1,4}$")


class SourceConfigError(ValueError):
    """A bad `sources:` entry; `field` is the entry's field (dimensions.py adds the index)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class FeedSource:
    """One trend source. `kind` is 'file' for a sample feed file (the offline demo), a feed kind
    for a URL, or one of the API kinds with their own fields."""

    kind: str
    url: str = ""  # file path (kind 'file') or feed URL (feed kinds)
    region: str = ""  # google_trends, youtube_most_popular
    category: str = ""  # youtube_most_popular: videoCategoryId, '' for all categories
    subreddit: str = ""  # reddit_top
    period: str = "day"  # reddit_top
    limit: int = 25  # youtube maxResults (1-50), reddit limit (1-100)

    @property
    def is_file(self) -> bool:
        return self.kind == "file"

    @property
    def needs_api_key(self) -> bool:
        return self.kind == "youtube_most_popular"


@dataclass(frozen=True)
class Endpoints:
    """Where the API kinds are fetched from: the real services, a gateway or local fakes."""

    youtube_root_url: str = DEFAULT_YOUTUBE_ROOT_URL
    google_trends_root_url: str = DEFAULT_GOOGLE_TRENDS_ROOT_URL
    reddit_root_url: str = DEFAULT_REDDIT_ROOT_URL


def source_from_feed_entry(entry: str) -> FeedSource:
    """A legacy `feeds:` entry: an http(s) URL is a feed, anything else a file path."""
    scheme = urlsplit(entry).scheme.lower()
    return (
        FeedSource(kind="feed", url=entry)
        if scheme in ("http", "https")
        else FeedSource("file", entry)
    )


def parse_source(raw: Any) -> FeedSource:
    """Validate one `sources:` entry (a mapping with `type` and the type's fields)."""
    if not isinstance(raw, Mapping):
        raise SourceConfigError("type", "expected a mapping with a 'type' field")
    kind = raw.get("type")
    if kind not in SOURCE_KINDS:
        raise SourceConfigError("type", f"must be one of {', '.join(SOURCE_KINDS)}")
    allowed = {"type", *_FIELDS[kind]}
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        raise SourceConfigError(unknown[0], f"is not a field of a {kind} source")
    if kind in FEED_KINDS:
        url = raw.get("url")
        if not isinstance(url, str) or urlsplit(url).scheme.lower() not in ("http", "https"):
            raise SourceConfigError("url", "expected an http(s) URL")
        if not urlsplit(url).netloc:
            raise SourceConfigError("url", "expected an http(s) URL with a host")
        return FeedSource(kind=kind, url=url)
    if kind == "reddit_top":
        return _parse_reddit(raw)
    region = raw.get("region")
    if not isinstance(region, str) or not _REGION.match(region):
        raise SourceConfigError("region", "expected a two-letter region code like 'US'")
    if kind == "google_trends":
        return FeedSource(kind=kind, region=region)
    if kind == "youtube_most_popular":
        category = raw.get("category", "")
        if isinstance(category, int) and not isinstance(category, bool):
            category = str(category)
        if not isinstance(category, str) or (category and not _CATEGORY.match(category)):
            raise SourceConfigError("category", "expected a numeric video category id like 28")
        return FeedSource(kind=kind, region=region, category=category, limit=_limit(raw, 25, 50))
    raise AssertionError(kind)  # pragma: no cover - every kind returns above


def _parse_reddit(raw: Mapping[str, Any]) -> FeedSource:
    subreddit = raw.get("subreddit")
    if not isinstance(subreddit, str) or not _SUBREDDIT.match(subreddit):
        raise SourceConfigError("subreddit", "expected a subreddit name like 'technology'")
    period = raw.get("period", "day")
    if period not in REDDIT_PERIODS:
        raise SourceConfigError("period", f"must be one of {', '.join(REDDIT_PERIODS)}")
    return FeedSource(
        kind="reddit_top", subreddit=subreddit, period=period, limit=_limit(raw, 25, 100)
    )


def parse_sources(raw: Any) -> tuple[FeedSource, ...]:
    """Validate the `sources:` list; errors name `sources[i].field`."""
    if not isinstance(raw, list):
        raise SourceConfigError("sources", "expected a list of sources")
    parsed = []
    for index, entry in enumerate(raw):
        try:
            parsed.append(parse_source(entry))
        except SourceConfigError as exc:
            raise SourceConfigError(f"sources[{index}].{exc.field}", exc.reason) from None
    keys = [source_key(s, Endpoints()) for s in parsed]
    for index, key in enumerate(keys):
        if key in keys[:index]:
            raise SourceConfigError(f"sources[{index}]", "duplicates an earlier source")
    return tuple(parsed)


_FIELDS: dict[str, tuple[str, ...]] = {
    **{kind: ("url",) for kind in FEED_KINDS},
    "google_trends": ("region",),
    "youtube_most_popular": ("region", "category", "limit"),
    "reddit_top": ("subreddit", "period", "limit"),
}


def _limit(raw: Mapping[str, Any], default: int, most: int) -> int:
    value = raw.get("limit", default)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= most:
        raise SourceConfigError("limit", f"expected an integer between 1 and {most}")
    return value


def source_from_json(data: Mapping[str, Any]) -> FeedSource:
    """The inverse of dataclasses.asdict (the registry stores dimensions as JSON)."""
    return FeedSource(**dict(data))


# --- requests ---------------------------------------------------------------------------------


def request_url(source: FeedSource, endpoints: Endpoints) -> str:
    """The URL a source is fetched from, without secrets (the YouTube key is added later)."""
    if source.kind in FEED_KINDS or source.is_file:
        return source.url
    if source.kind == "google_trends":
        root = endpoints.google_trends_root_url.rstrip("/")
        return f"{root}/trending/rss?{urlencode({'geo': source.region})}"
    if source.kind == "youtube_most_popular":
        params = {"part": "snippet,statistics", "chart": "mostPopular", "regionCode": source.region}
        if source.category:
            params["videoCategoryId"] = source.category
        params["maxResults"] = str(source.limit)
        root = endpoints.youtube_root_url.rstrip("/")
        return f"{root}/youtube/v3/videos?{urlencode(params, safe=',')}"
    if source.kind == "reddit_top":
        root = endpoints.reddit_root_url.rstrip("/")
        query = urlencode({"t": source.period, "limit": source.limit, "raw_json": 1})
        return f"{root}/r/{source.subreddit}/top.json?{query}"
    raise ValueError(f"unknown source kind {source.kind!r}")


def source_key(source: FeedSource, endpoints: Endpoints) -> str:
    """The source's label and feed-cache key: its request URL (never carrying a secret)."""
    return request_url(source, endpoints)


# --- redirects --------------------------------------------------------------------------------


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return (
        scheme,
        (parts.hostname or "").lower(),
        parts.port or {"http": 80, "https": 443}.get(scheme),
    )


def _address_kind(address: str) -> str | None:
    """What makes an address not public (loopback, private, ...), or None for a public one."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    kinds = (
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("private", ip.is_private),
        ("multicast", ip.is_multicast),
        ("reserved", ip.is_reserved),
        ("unspecified", ip.is_unspecified),
        ("non-public", not ip.is_global),
    )
    return next((name for name, matches in kinds if matches), None)


def redirect_refusal(
    configured_url: str, target_url: str, resolve: Callable[[str], Sequence[str]]
) -> str | None:
    """Why a redirect to `target_url` must not be followed, or None to follow it.

    The configured URL is trusted as configured (local fakes and gateways are plain http on
    private addresses), and so is its own origin. Anywhere else a redirect may lead only over
    https to a host whose every address is public: a feed must not steer the fetcher to a
    cloud metadata service or an internal host, nor off TLS. `resolve` gives a host's addresses.
    """
    try:
        target = _origin(target_url)
        if target == _origin(configured_url):
            return None
    except ValueError:  # a port that is not a number
        return "not a valid URL"
    scheme, host, _port = target
    if scheme != "https":
        return f"only https redirects are followed, not {scheme or 'a relative URL'}"
    try:
        addresses = [ipaddress.ip_address(host).compressed]
    except ValueError:
        addresses = list(resolve(host))
    if not addresses:
        return f"host {host!r} does not resolve"
    for address in addresses:
        kind = _address_kind(address.split("%")[0])
        if kind is not None:
            named = address if address == host else f"{host} ({address})"
            return f"{named} is a {kind} address"
    return None


# --- secrets ----------------------------------------------------------------------------------


def redact(text: str, secrets: Sequence[str] = ()) -> str:
    """Text safe to log: every `key=` query value (and every other credential parameter) and
    every given secret (also URL-encoded) replaced. httpx errors, for one, quote the request
    URL, which carries the API key."""
    return redaction.redact(text, secrets)


# --- bodies -----------------------------------------------------------------------------------

_CHARSET_PARAM = re.compile(r"""(?i)charset\s*=\s*["']?([A-Za-z0-9._:+-]+)""")
_XML_DECL_ENCODING = re.compile(rb"""^<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._:+-]+)["']""")
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def declared_charset(body: bytes, content_type: str | None) -> str:
    """The body's charset: the Content-Type's charset (it wins, RFC 7303), a BOM, the XML
    declaration's encoding, else UTF-8 (the default of XML and JSON)."""
    match = _CHARSET_PARAM.search(content_type or "")
    if match:
        return match.group(1).lower()
    for bom, name in _BOMS:
        if body.startswith(bom):
            return name
    declared = _XML_DECL_ENCODING.match(body.lstrip()[:400])
    if declared:
        return declared.group(1).decode("ascii").lower()
    return "utf-8"


def decode_body(body: bytes, content_type: str | None, source: str) -> str:
    """Decode per the declared charset; an unknown charset or bytes invalid in it is a
    FeedError naming the source (never silently replaced characters)."""
    charset = declared_charset(body, content_type)
    try:
        codec = codecs.lookup(charset)
    except LookupError:
        raise FeedError(source, f"unknown charset {charset!r}") from None
    name = "utf-8-sig" if codec.name == "utf-8" else codec.name  # a BOM is not content
    try:
        return body.decode(name)
    except UnicodeDecodeError as exc:
        byte = body[exc.start : exc.start + 1].hex()
        problem = f"body is not valid {charset} (byte 0x{byte} at offset {exc.start})"
    except LookupError:  # a codec Python has but not for text, such as base64 or rot13
        problem = f"charset {charset!r} is not a text encoding"
    except UnicodeError as exc:  # codecs such as punycode raise the base class
        problem = f"body is not valid {charset} ({str(exc)[:200]})"
    raise FeedError(source, problem)


# --- items as JSON (the feed cache keeps the last items of a source; read back by
# feed_formats.cached_items) ---------------------------------------------------------------


def item_to_json(item: TrendItem) -> dict[str, Any]:
    return {
        "source": item.source,
        "title": item.title,
        "url": item.url,
        "summary": item.summary,
        "published_at": item.published_at.isoformat() if item.published_at else None,
        "guid": item.guid,
    }
