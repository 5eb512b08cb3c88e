"""Typed trend sources: YAML validation, request URLs, charsets, redaction and the parsers of
Google Trends RSS, YouTube videos.list and Reddit listings."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from mdame_domain.dimensions import DimensionConfigError, dimension_from_json, parse_dimension
from mdame_domain.feed_formats import (
    MAX_ITEMS_PER_SOURCE,
    parse_google_trends_rss,
    parse_reddit_listing,
    parse_source_body,
    parse_youtube_videos,
)
from mdame_domain.feed_sources import (
    Endpoints,
    FeedSource,
    decode_body,
    item_to_json,
    redact,
    redirect_refusal,
    request_url,
)
from mdame_domain.trends import FeedError, TrendItem


def _dimension(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "slug": "tech",
        "title": "Tech",
        "visual_style": "neon",
        "palette": ["#000000", "#ffffff"],
        "feeds": ["feeds/tech.xml"],
        "accounts": [{"platform": "youtube", "handle": "t"}],
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
    # Codecs Python has that do not turn bytes into text.
    with pytest.raises(FeedError, match="charset 'base64' is not a text encoding"):
        decode_body(b"<rss/>", "text/xml; charset=base64", "src")
    with pytest.raises(FeedError, match="body is not valid punycode"):
        decode_body(b"<rss/>", "text/xml; charset=punycode", "src")


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


# --- hostile bodies ---------------------------------------------------------------------------

RPC_LIMIT = 262_144  # record_trends refuses a JSON argument over 256 KiB
MAX_TRENDS = 20  # the trends stage records at most this many items (mdame_assets' MAX_TRENDS)


def _stored_bytes(items: list[TrendItem]) -> int:
    # PostgreSQL's jsonb text: UTF-8, with the same escapes as json.dumps(ensure_ascii=False).
    return len(json.dumps([item_to_json(i) for i in items], ensure_ascii=False).encode())


def _listing(*posts: dict[str, Any]) -> str:
    children = [{"kind": "t3", "data": {"name": f"t3_{n}", "permalink": f"/r/t/comments/{n}/",
                                        **post}} for n, post in enumerate(posts)]  # fmt: skip
    return json.dumps({"kind": "Listing", "data": {"children": children}})


def test_long_self_posts_are_capped_so_a_day_fits_record_trends() -> None:
    # Seven 40,000-character self-posts were 280 KB: record_trends refused the whole day.
    text = "Robots learn to walk. " * 1820
    body = _listing(*({"title": f"Post {n} " + "t" * 700, "selftext": text} for n in range(7)))
    items = parse_source_body("reddit_top", body, "rd")
    assert len(items) == 7 and _stored_bytes(items) < RPC_LIMIT // 4
    first = items[0]
    # Cut between characters, and the cut is marked.
    assert first.summary.endswith("…") and text.startswith(first.summary[:-1])
    assert first.title.endswith("…") and first.title.startswith("Post 0 ttt")


def test_a_full_day_of_worst_case_items_stays_well_under_the_rpc_limit() -> None:
    # Escaped control characters (6 bytes each in JSON) and 4-byte characters in every field.
    nasty = '\x01😀"\\' * 20_000
    feed = {"version": "https://jsonfeed.org/version/1.1", "items": [
        {"id": f"{n}{nasty}", "title": nasty, "url": "https://x.org/" + nasty,
         "summary": nasty, "date_published": "2026-11-30T07:00:00Z"} for n in range(MAX_TRENDS)
    ]}  # fmt: skip
    items = parse_source_body("json", json.dumps(feed), "j")
    assert len(items) == MAX_TRENDS and _stored_bytes(items) < RPC_LIMIT // 2
    # Guids cut to the cap stay distinct; a URL over its cap is dropped, not cut into another.
    assert len({i.guid for i in items}) == MAX_TRENDS
    assert {i.url for i in items} == {""}


@pytest.mark.parametrize("kind", ["json", "youtube_most_popular", "reddit_top"])
def test_json_nested_a_thousand_deep_is_a_feed_error(kind: str) -> None:
    with pytest.raises(FeedError, match="feed 'deep': .*nested too deeply"):
        parse_source_body(kind, '{"a": ' * 1000 + "1" + "}" * 1000, "deep")


@pytest.mark.parametrize("created", ["Infinity", "-Infinity", "NaN", "1e300", "-1e300", "1e400"])
def test_a_timestamp_out_of_range_leaves_the_item_undated(created: str) -> None:
    body = _listing({"title": "fine", "created_utc": "CREATED"}).replace('"CREATED"', created)
    [item] = parse_source_body("reddit_top", body, "rd")
    assert (item.title, item.published_at) == ("fine", None)


@pytest.mark.parametrize(
    ("kind", "body", "problem"),
    [
        ("reddit_top", '{"kind": "Listing", "n": ' + "9" * 5000 + "}", "JSON parse error"),
        (
            "json",
            '{"version": "https://jsonfeed.org/version/1.1", "items": [{"title": "t", '
            '"date_published": "0001-01-01T00:00:00+01:00", "id": NaN}]}',
            None,
        ),
        (
            "rss",
            "<rss><channel><item><title>\ue000ffffffff\ue001</title></item></channel></rss>",
            None,
        ),
    ],
)
def test_odd_values_never_escape_as_other_exceptions(
    kind: str, body: str, problem: str | None
) -> None:
    if problem is None:
        [item] = parse_source_body(kind, body, "odd")
        assert item.published_at is None and item.guid != "nan"
    else:
        with pytest.raises(FeedError, match=problem):
            parse_source_body(kind, body, "odd")


# Small enough for expat's own amplification limit: &a5; is a megabyte of "a" from 0.5 KB.
_ENTITIES = '<!ENTITY a "aaaaaaaaaa">' + "".join(
    f'<!ENTITY a{i} "{("&a" + str(i - 1 if i > 1 else "") + ";") * 10}">' for i in range(1, 6)
)


@pytest.mark.parametrize(
    "prolog",
    [
        "",
        "<!-- <a> -->",  # an element-like comment once ended the DOCTYPE search early
        "<?pi <b?>",
        '<?xml version="1.0"?>\n<!-- x -->\n',
    ],
)
@pytest.mark.parametrize("kind", ["rss", "google_trends"])
def test_doctypes_are_refused_however_they_are_hidden(prolog: str, kind: str) -> None:
    bomb = f"{prolog}<!DOCTYPE rss [{_ENTITIES}]><rss><channel><item><title>&a5;</title>"
    with pytest.raises(FeedError, match="feed 'x': DOCTYPE/ENTITY declarations are not allowed"):
        parse_source_body(kind, bomb + "</item></channel></rss>", "x")


def test_external_doctypes_are_refused_too() -> None:
    body = '<!DOCTYPE rss SYSTEM "file:///etc/passwd"><rss><channel></channel></rss>'
    with pytest.raises(FeedError, match="DOCTYPE/ENTITY"):
        parse_source_body("atom", body, "x")


# --- redirects --------------------------------------------------------------------------------

_ADDRESSES = {
    "feeds.example.com": ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"],
    "mixed.example.com": ["93.184.215.14", "10.1.2.3"],
    "mapped.example.com": ["::ffff:127.0.0.1"],
}


@pytest.mark.parametrize(
    ("target", "refusal"),
    [
        ("http://127.0.0.1:8080/elsewhere.xml", None),  # the configured origin is trusted
        ("https://feeds.example.com/rss", None),
        ("http://feeds.example.com/rss", "only https redirects are followed, not http"),
        ("http://169.254.169.254/latest/meta-data/", "only https"),
        ("https://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"),
        ("https://127.0.0.1:8081/", "127.0.0.1 is a loopback address"),  # another port
        ("https://mixed.example.com/", r"mixed.example.com \(10.1.2.3\) is a private address"),
        ("https://mapped.example.com/", "loopback"),
        ("https://[::1]/", "::1 is a loopback address"),
        ("https://[fe80::1]/", "link-local"),
        ("https://224.0.0.1/", "multicast"),
        ("https://100.64.0.1/", "non-public"),
        ("https://nowhere.example.com/", "'nowhere.example.com' does not resolve"),
        ("https://x.org:port/", "not a valid URL"),
    ],
)
def test_redirects_leave_the_configured_origin_only_over_https_to_public_hosts(
    target: str, refusal: str | None
) -> None:
    found = redirect_refusal(
        "http://127.0.0.1:8080/feed.xml", target, lambda host: _ADDRESSES.get(host, [])
    )
    if refusal is None:
        assert found is None
    else:
        assert found is not None and re.search(refusal, found), found


def test_a_body_listing_thousands_of_items_gives_its_first_hundred() -> None:
    entries = "".join(
        f"<item><title>Story number {n} about topic {n * 7919 % 104729}</title>"
        f"<link>https://example.org/{n}</link></item>"
        for n in range(3000)
    )
    body = f'<?xml version="1.0"?><rss version="2.0"><channel>{entries}</channel></rss>'

    items = parse_source_body("feed", body, "big")

    assert len(items) == MAX_ITEMS_PER_SOURCE == 100
    assert [i.url for i in items[:2]] == ["https://example.org/0", "https://example.org/1"]
