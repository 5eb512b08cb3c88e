"""Typed trend sources: YAML validation, request URLs, charsets, redaction and the parsers of
Google Trends RSS, YouTube videos.list and Reddit listings."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from mdame_domain.dimensions import DimensionConfigError, dimension_from_json, parse_dimension
from mdame_domain.feed_formats import (
    parse_google_trends_rss,
    parse_reddit_listing,
    parse_youtube_videos,
)
from mdame_domain.feed_sources import (
    Endpoints,
    FeedSource,
    decode_body,
    redact,
    request_url,
)
from mdame_domain.trends import FeedError


def _dimension(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "slug": "tech",
        "title": "Tech",
        "visual_style": "neon",
        "palette": ["#000000", "#ffffff"],
        "feeds": ["feeds/tech.xml"],
        "accounts": [{"platform": "outbox", "handle": "t"}],
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


SOURCES = [
    {"type": "rss", "url": "https://example.com/feed.xml"},
    {"type": "atom", "url": "https://example.com/feed.atom"},
    {"type": "json", "url": "https://example.com/feed.json"},
    {"type": "google_trends", "region": "US"},
    {"type": "youtube_most_popular", "region": "GB", "category": 28, "limit": 10},
    {"type": "reddit_top", "subreddit": "technology", "period": "week", "limit": 50},
]


def test_sources_parse_and_survive_the_registry_json_round_trip() -> None:
    config = parse_dimension(_dimension(sources=SOURCES), "tech.yaml")
    kinds = [s.kind for s in config.trend_sources()]
    assert kinds == ["file", "rss", "atom", "json", "google_trends", "youtube_most_popular",
                     "reddit_top"]  # fmt: skip
    youtube = config.sources[4]
    assert (youtube.region, youtube.category, youtube.limit) == ("GB", "28", 10)
    assert dimension_from_json(json.loads(json.dumps(config.to_json()))) == config


def test_feeds_may_be_urls_and_sources_may_replace_feeds() -> None:
    config = parse_dimension(
        _dimension(feeds=["https://example.com/a.xml"], sources=None), "tech.yaml"
    )
    assert config.trend_sources() == (FeedSource("feed", url="https://example.com/a.xml"),)
    only_sources = parse_dimension(_dimension(feeds=None, sources=SOURCES[:1]), "tech.yaml")
    assert only_sources.feeds == () and len(only_sources.trend_sources()) == 1
    with pytest.raises(DimensionConfigError, match="'feeds'.*at least one"):
        parse_dimension(_dimension(feeds=None, sources=[]), "tech.yaml")


@pytest.mark.parametrize(
    ("sources", "field", "reason"),
    [
        ("not a list", "sources", "list"),
        (["https://x"], "sources[0].type", "mapping"),
        ([{"type": "gopher", "url": "https://x"}], "sources[0].type", "one of"),
        ([{"type": "rss", "url": "ftp://example.com/f"}], "sources[0].url", "http"),
        ([{"type": "rss", "url": "https://"}], "sources[0].url", "host"),
        ([{"type": "rss"}], "sources[0].url", "http"),
        ([{"type": "rss", "url": "https://x.org", "region": "US"}], "sources[0].region", "not a"),
        ([{"type": "google_trends", "region": "usa"}], "sources[0].region", "two-letter"),
        ([{"type": "youtube_most_popular"}], "sources[0].region", "two-letter"),
        (
            [{"type": "youtube_most_popular", "region": "US", "category": "music"}],
            "sources[0].category",
            "numeric",
        ),
        (
            [{"type": "youtube_most_popular", "region": "US", "limit": 51}],
            "sources[0].limit",
            "between 1 and 50",
        ),
        ([{"type": "reddit_top", "subreddit": "r/tech"}], "sources[0].subreddit", "subreddit"),
        (
            [{"type": "reddit_top", "subreddit": "tech", "period": "decade"}],
            "sources[0].period",
            "one of",
        ),
        (
            [{"type": "reddit_top", "subreddit": "tech", "limit": True}],
            "sources[0].limit",
            "integer",
        ),
        (
            [{"type": "google_trends", "region": "US"}, {"type": "google_trends", "region": "US"}],
            "sources[1]",
            "duplicates",
        ),
    ],
)
def test_a_bad_source_names_its_field(sources: Any, field: str, reason: str) -> None:
    with pytest.raises(DimensionConfigError, match=reason) as caught:
        parse_dimension(_dimension(sources=sources), "tech.yaml")
    assert caught.value.field_name == field


def test_request_urls_follow_the_configured_endpoints_and_carry_no_key() -> None:
    local = Endpoints("http://127.0.0.1:9/", "http://127.0.0.1:8", "http://127.0.0.1:7")
    youtube = FeedSource("youtube_most_popular", region="US", category="28", limit=5)
    assert request_url(youtube, local) == (
        "http://127.0.0.1:9/youtube/v3/videos?part=snippet,statistics&chart=mostPopular"
        "&regionCode=US&videoCategoryId=28&maxResults=5"
    )
    assert request_url(FeedSource("google_trends", region="DE"), Endpoints()) == (
        "https://trends.google.com/trending/rss?geo=DE"
    )
    reddit = FeedSource("reddit_top", subreddit="science", period="day", limit=3)
    assert (
        request_url(reddit, local)
        == "http://127.0.0.1:7/r/science/top.json?t=day&limit=3&raw_json=1"
    )


def test_redact_removes_key_parameters_and_named_secrets() -> None:
    text = "GET https://h/v?part=x&key=AIza-SECRET%2F1 failed; header AIza-SECRET/1"
    cleaned = redact(text, ["AIza-SECRET/1"])
    assert "SECRET" not in cleaned and "key=[redacted]" in cleaned


# --- bodies -----------------------------------------------------------------------------------

LATIN1_RSS = (
    '<?xml version="1.0" encoding="ISO-8859-1"?><rss version="2.0"><channel>'
    "<item><title>Caf\xe9 cr\xe8me robots</title><guid>1</guid></item></channel></rss>"
).encode("latin-1")


def test_bodies_decode_per_declared_charset() -> None:
    # The header's charset, else the XML declaration's encoding.
    assert "Café crème" in decode_body(LATIN1_RSS, "application/rss+xml; charset=ISO-8859-1", "s")
    assert "Café crème" in decode_body(LATIN1_RSS, "application/rss+xml", "s")
    assert decode_body("\ufeff{}".encode(), "application/json", "s") == "{}"


def test_bodies_invalid_in_their_charset_or_of_an_unknown_one_are_clear_errors() -> None:
    with pytest.raises(FeedError, match=r"feed 'src': body is not valid utf-8 \(byte 0xe9"):
        decode_body(LATIN1_RSS, "application/xml; charset=utf-8", "src")
    with pytest.raises(FeedError, match="unknown charset 'klingon-8'"):
        decode_body(b"<rss/>", "text/xml; charset=klingon-8", "src")


# --- parsers ----------------------------------------------------------------------------------

GOOGLE_TRENDS = """<?xml version="1.0" encoding="UTF-8"?>
<rss xmlns:ht="https://trends.google.com/trending/rss" version="2.0"><channel>
<title>Daily Search Trends</title>
<item><title>solid state battery</title><ht:approx_traffic>50K+</ht:approx_traffic>
  <link>https://trends.google.com/trending/rss?geo=US</link>
  <pubDate>Mon, 30 Nov 2026 08:00:00 -0800</pubDate>
  <ht:picture>https://example.com/p.jpg</ht:picture>
  <ht:news_item><ht:news_item_title>Battery charges a phone in six minutes</ht:news_item_title>
    <ht:news_item_snippet>Engineers showed a cell &amp; a charger.</ht:news_item_snippet>
    <ht:news_item_url>https://example.com/battery</ht:news_item_url>
    <ht:news_item_source>Example News</ht:news_item_source></ht:news_item>
</item>
<item><title>lakers</title><ht:approx_traffic>200K+</ht:approx_traffic>
  <link>https://trends.google.com/trending/rss?geo=US</link></item>
</channel></rss>"""


def test_google_trends_items_get_distinct_urls_and_their_news_as_summary() -> None:
    first, second = parse_google_trends_rss(GOOGLE_TRENDS, "gt", region="US")
    assert first.title == "solid state battery"
    assert first.url == "https://example.com/battery"
    assert first.summary == (
        "About 50K+ searches. Battery charges a phone in six minutes (Example News) "
        "Engineers showed a cell & a charger."
    )
    assert first.published_at == datetime(2026, 11, 30, 16, 0, tzinfo=UTC)
    assert first.guid == "google-trends:US:solid state battery:2026-11-30"
    # Every item's <link> is the same feed URL: dedupe by url would fold them into one.
    assert second.url == "https://trends.google.com/trends/explore?geo=US&q=lakers"


def test_google_trends_malformed_xml_and_entities_are_refused() -> None:
    with pytest.raises(FeedError, match="feed 'gt': malformed XML"):
        parse_google_trends_rss(GOOGLE_TRENDS[:300], "gt")
    with pytest.raises(FeedError, match="DOCTYPE/ENTITY"):
        parse_google_trends_rss('<!DOCTYPE x [<!ENTITY a "b">]><rss/>', "gt")


def _video(video_id: str, title: str, **snippet: Any) -> dict[str, Any]:
    return {
        "kind": "youtube#video",
        "id": video_id,
        "snippet": {"title": title, "publishedAt": "2026-11-30T07:00:00Z", **snippet},
        "statistics": {"viewCount": "1200"},
    }


def test_youtube_videos_become_items() -> None:
    body = json.dumps(
        {
            "kind": "youtube#videoListResponse",
            "items": [_video("abc123", "Robot dog learns stairs", channelTitle="Lab",
                             description="<b>New</b> gait software")],
        }
    )  # fmt: skip
    [item] = parse_youtube_videos(body, "yt")
    assert item.url == "https://www.youtube.com/watch?v=abc123"
    assert item.guid == "youtube:abc123"
    assert item.summary == "Lab on YouTube. 1200 views. New gait software"
    assert item.published_at == datetime(2026, 11, 30, 7, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("{", "not a YouTube videos.list response"),
        ('{"error": {"code": 403, "message": "quota"}}', "YouTube error: quota"),
        ('{"kind": "youtube#searchListResponse"}', "not a videos.list response"),
        ('{"kind": "youtube#videoListResponse", "items": [{"id": "x"}]}', "item 1 has no snippet"),
    ],
)
def test_bad_youtube_bodies_are_clear_errors(body: str, problem: str) -> None:
    with pytest.raises(FeedError, match=problem):
        parse_youtube_videos(body, "yt")


def test_reddit_listing_skips_stickied_and_over_18_posts() -> None:
    def post(name: str, **extra: Any) -> dict[str, Any]:
        data = {"name": name, "title": f"Post {name}", "permalink": f"/r/t/comments/{name}/x/",
                "created_utc": 1_795_000_000, "selftext": "Body text", **extra}  # fmt: skip
        return {"kind": "t3", "data": data}

    body = json.dumps(
        {
            "kind": "Listing",
            "data": {"children": [post("t3_a", stickied=True), post("t3_b", over_18=True),
                                  post("t3_c")]},
        }
    )  # fmt: skip
    [item] = parse_reddit_listing(body, "rd")
    assert (item.guid, item.url) == ("reddit:t3_c", "https://www.reddit.com/r/t/comments/t3_c/x/")
    assert item.published_at == datetime.fromtimestamp(1_795_000_000, UTC)
    with pytest.raises(FeedError, match="not a Reddit listing"):
        parse_reddit_listing("[]", "rd")
