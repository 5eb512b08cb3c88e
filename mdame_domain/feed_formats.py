"""Parsers for the API trend sources: Google Trends' trending RSS (with its ht: namespace),
YouTube's videos.list response and a Reddit listing. Same TrendItem, same strictness and the
same XML defences as mdame_domain.trends.parse_feed, which still parses RSS/Atom/JSON Feed.

Item text is kept as the source wrote it (HTML stripped, as for feeds): instructions hidden in
it are the prompt firewall's to catch at the topics stage, not silently cleaned away here. It is
capped in size (trends.cap_item), so no source's items can overflow what the stage records.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any
from urllib.parse import quote_plus

from mdame_domain.trends import (
    FeedError,
    SkippedItem,
    TrendItem,
    _child_text,
    _require_title,
    _unmark,
    cap_item,
    clean_html_text,
    load_json,
    parse_feed,
    parse_feed_date,
    split_storable,
    timestamp_date,
    xml_root,
)

GOOGLE_TRENDS_NS = "{https://trends.google.com/trending/rss}"
# The older daily-trends feed used this namespace for the same elements.
LEGACY_GOOGLE_TRENDS_NS = "{https://trends.google.com/trends/trendingsearches/daily}"
# The first items a body lists (feeds list the newest first): scoring and deduplication compare
# every candidate with every survivor, so an unbounded feed could stall the stage for hours.
MAX_ITEMS_PER_SOURCE = 100


def parse_source_body(kind: str, text: str, source: str, *, region: str = "") -> list[TrendItem]:
    """Parse a fetched body by its source kind (feed kinds detect RSS/Atom/JSON Feed).

    Whatever the body holds, the outcome is items or a FeedError naming the source: a parser's
    unforeseen exception on hostile input skips this source, never fails the stage."""
    try:
        return _parse_by_kind(kind, text, source, region)[:MAX_ITEMS_PER_SOURCE]
    except FeedError:
        raise
    except Exception as error:  # noqa: BLE001 - one source's body must stay that source's problem
        raise FeedError(
            source, f"unreadable body ({type(error).__name__}: {str(error)[:200]})"
        ) from error


def cached_items(raw: Any, source: str) -> tuple[list[TrendItem], list[SkippedItem]]:
    """A source's cached items (the feed cache's JSON, reused on a 304) under the same caps and
    checks as a fresh body's: its first MAX_ITEMS_PER_SOURCE, each item's text capped and the
    unstorable ones split out. A cache that is not a list of items (corrupt, or written by
    someone else) is a FeedError naming the source, whatever the exception underneath."""
    try:
        if not isinstance(raw, list):
            raise FeedError(source, f"cached items are a {type(raw).__name__}, not a list")
        items = [
            cap_item(_cached_item(data, source, index))
            for index, data in enumerate(raw[:MAX_ITEMS_PER_SOURCE], start=1)
        ]
    except FeedError:
        raise
    except Exception as error:  # noqa: BLE001 - one source's cache must stay that source's problem
        raise FeedError(
            source, f"unreadable cached items ({type(error).__name__}: {str(error)[:200]})"
        ) from error
    return split_storable(items)


def _cached_item(data: Any, source: str, index: int) -> TrendItem:
    if not isinstance(data, dict):
        raise FeedError(source, f"cached item {index} is not an object")
    title, guid = data.get("title"), data.get("guid")
    url, summary = data.get("url", ""), data.get("summary", "")
    published = data.get("published_at")
    if not isinstance(title, str) or not title.strip():
        raise FeedError(source, f"cached item {index} has no title")
    if not isinstance(guid, str) or not guid:
        raise FeedError(source, f"cached item {index} has no guid")
    if not isinstance(url, str) or not isinstance(summary, str):
        raise FeedError(source, f"cached item {index} has a url or summary that is not text")
    if published is not None and not isinstance(published, str):
        raise FeedError(source, f"cached item {index} has a published_at that is not text")
    return TrendItem(
        # The row is this source's: an item naming another source is taken as this one's.
        source=source,
        title=title.strip(),
        url=url,
        summary=summary,
        # As in a fresh body, a date that cannot be read leaves the item undated.
        published_at=parse_feed_date(published, rfc822_first=False),
        guid=guid,
    )


def _parse_by_kind(kind: str, text: str, source: str, region: str) -> list[TrendItem]:
    if kind == "google_trends":
        return parse_google_trends_rss(text, source, region=region)
    if kind == "youtube_most_popular":
        return parse_youtube_videos(text, source)
    if kind == "reddit_top":
        return parse_reddit_listing(text, source)
    return parse_feed(text, source)


def _xml_root(text: str, source: str) -> ET.Element:
    stripped = text.lstrip("\ufeff \t\r\n")
    if not stripped.startswith("<"):
        raise FeedError(source, "not XML (does not start with '<')")
    try:
        return xml_root(stripped, source)
    except ET.ParseError as error:
        line, column = error.position
        raise FeedError(
            source, f"malformed XML (parse error at line {line}, column {column}: {error})"
        ) from None


def _ht(element: ET.Element, name: str) -> str:
    for ns in (GOOGLE_TRENDS_NS, LEGACY_GOOGLE_TRENDS_NS):
        value = _child_text(element, f"{ns}{name}")
        if value:
            return value
    return ""


def _news_items(element: ET.Element) -> list[ET.Element]:
    return element.findall(f"{GOOGLE_TRENDS_NS}news_item") + element.findall(
        f"{LEGACY_GOOGLE_TRENDS_NS}news_item"
    )


def parse_google_trends_rss(text: str, source: str, *, region: str = "") -> list[TrendItem]:
    """Google Trends' trending searches RSS (https://trends.google.com/trending/rss?geo=XX).

    Every item's <link> is the same feed URL, so an item's url is its first news article (or a
    Trends explore link for the term): dedupe by url must not fold all searches into one. The
    summary is the approximate traffic and the news headlines and snippets.
    """
    root = _xml_root(text, source)
    channel = root.find("channel") if root.tag == "rss" else None
    if channel is None:
        raise FeedError(source, f"not a Google Trends RSS feed (root element <{root.tag}>)")
    items: list[TrendItem] = []
    for index, element in enumerate(channel.findall("item"), start=1):
        title = _require_title(_child_text(element, "title"), source, index)
        news = _news_items(element)
        parts = []
        traffic = _ht(element, "approx_traffic")
        if traffic:
            parts.append(f"About {traffic} searches.")
        first_url = ""
        for article in news:
            headline = _ht(article, "news_item_title")
            snippet = _ht(article, "news_item_snippet")
            outlet = _ht(article, "news_item_source")
            first_url = first_url or _ht(article, "news_item_url")
            parts.append(
                " ".join(p for p in (headline, f"({outlet})" if outlet else "", snippet) if p)
            )
        url = first_url or (
            "https://trends.google.com/trends/explore?"
            + (f"geo={region}&" if region else "")
            + f"q={quote_plus(title)}"
        )
        published = parse_feed_date(_child_text(element, "pubDate"), rfc822_first=True)
        items.append(
            _unmark(
                TrendItem(
                    source=source,
                    title=title,
                    url=url,
                    summary=clean_html_text(" ".join(p for p in parts if p)),
                    published_at=published,
                    # A search term trends once per region and day in this feed.
                    guid=f"google-trends:{region or '?'}:{title.lower()}:"
                    + (published.date().isoformat() if published else ""),
                )
            )
        )
    return [cap_item(item) for item in items]


def _str(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def parse_youtube_videos(text: str, source: str) -> list[TrendItem]:
    """A YouTube Data API v3 videos.list response (youtube#videoListResponse)."""
    document = load_json(text, source, "a YouTube videos.list response")
    if not isinstance(document, dict):
        raise FeedError(source, "YouTube response must be an object")
    if "error" in document:
        error = document["error"] if isinstance(document["error"], dict) else {}
        raise FeedError(source, f"YouTube error: {_str(error.get('message'))[:300]}")
    if document.get("kind") != "youtube#videoListResponse":
        raise FeedError(source, f"not a videos.list response (kind {document.get('kind')!r})")
    raw_items = document.get("items", [])
    if not isinstance(raw_items, list):
        raise FeedError(source, "YouTube response has no 'items' list")
    items: list[TrendItem] = []
    for index, raw in enumerate(raw_items, start=1):
        if not isinstance(raw, dict) or not isinstance(raw.get("snippet"), dict):
            raise FeedError(source, f"item {index} has no snippet")
        video_id = _str(raw.get("id"))
        if not video_id:
            raise FeedError(source, f"item {index} has no id")
        snippet = raw["snippet"]
        title = _require_title(_str(snippet.get("title")), source, index)
        stats = raw["statistics"] if isinstance(raw.get("statistics"), dict) else {}
        views = _str(stats.get("viewCount"))
        channel = _str(snippet.get("channelTitle"))
        lead = " ".join(
            p
            for p in (
                f"{channel} on YouTube." if channel else "",
                f"{views} views." if views else "",
            )
            if p
        )
        items.append(
            TrendItem(
                source=source,
                title=title,
                url=f"https://www.youtube.com/watch?v={quote_plus(video_id)}",
                summary=clean_html_text(f"{lead} {_str(snippet.get('description'))}"),
                published_at=parse_feed_date(_str(snippet.get("publishedAt")), rfc822_first=False),
                guid=f"youtube:{video_id}",
            )
        )
    return [cap_item(item) for item in items]


def parse_reddit_listing(text: str, source: str) -> list[TrendItem]:
    """A subreddit listing (/r/<name>/top.json). Stickied posts (moderator notices) and posts
    marked over_18 are not trends of a general-audience channel and are left out."""
    document = load_json(text, source, "a Reddit listing")
    if not isinstance(document, dict) or document.get("kind") != "Listing":
        kind = document.get("kind") if isinstance(document, dict) else type(document).__name__
        raise FeedError(source, f"not a Reddit listing (kind {kind!r})")
    data = document.get("data")
    children = data.get("children") if isinstance(data, dict) else None
    if not isinstance(children, list):
        raise FeedError(source, "Reddit listing has no data.children list")
    items: list[TrendItem] = []
    for index, child in enumerate(children, start=1):
        post = child.get("data") if isinstance(child, dict) else None
        if not isinstance(post, dict):
            raise FeedError(source, f"item {index} has no data")
        if post.get("stickied") is True or post.get("over_18") is True:
            continue
        title = _require_title(_str(post.get("title")), source, index)
        name = _str(post.get("name")) or _str(post.get("id"))
        if not name:
            raise FeedError(source, f"item {index} has no name")
        permalink = _str(post.get("permalink"))
        url = (
            f"https://www.reddit.com{permalink}"
            if permalink.startswith("/")
            else _str(post.get("url"))
        )
        body = _str(post.get("selftext")) or _str(post.get("url"))
        items.append(
            TrendItem(
                source=source,
                title=title,
                url=url,
                summary=clean_html_text(body),
                published_at=timestamp_date(post.get("created_utc")),
                guid=f"reddit:{name}",
            )
        )
    return [cap_item(item) for item in items]
