"""Feed parsing, scoring, dedupe and the volume gate (no network)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mdame_domain.idempotency import content_hash, idempotency_key
from mdame_domain.trends import (
    FeedError,
    ScoredTrend,
    TrendItem,
    VolumeGateError,
    dedupe_trends,
    normalize_title,
    parse_feed,
    score_trends,
    split_storable,
    unstorable_reason,
    volume_gate,
)

FEEDS_DIR = Path(__file__).resolve().parents[2] / "feeds"
NOW = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)

RSS = """<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0" xmlns:content="http://purl.org/rss/1.0/modules/content/">
  <channel>
    <title>Example</title>
    <item>
      <title>Chip makers &amp; the AI boom</title>
      <link>https://example.com/a</link>
      <guid>guid-a</guid>
      <pubDate>Tue, 17 Nov 2026 10:00:00 +0000</pubDate>
      <description><![CDATA[<p>New   <b>chips</b> &amp;amp; faster&nbsp;models.</p>
        <script>x()</script>]]></description>
    </item>
    <item>
      <title>No guid here</title>
      <link>https://example.com/b</link>
      <pubDate>not a date</pubDate>
      <content:encoded><![CDATA[<div>Body from content:encoded</div>]]></content:encoded>
    </item>
  </channel>
</rss>
"""

ATOM = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <title>Science</title>
  <id>urn:x</id>
  <updated>2026-11-17T00:00:00Z</updated>
  <entry>
    <title type="html">Webb sees &lt;em&gt;water&lt;/em&gt;</title>
    <link rel="self" href="https://example.com/self"/>
    <link rel="alternate" href="https://example.com/webb"/>
    <id>urn:x:webb</id>
    <updated>2026-11-16T08:00:00+01:00</updated>
    <summary type="html">&lt;p&gt;Water vapor found.&lt;/p&gt;</summary>
  </entry>
  <entry>
    <title>Content only</title>
    <link href="https://example.com/c"/>
    <id>urn:x:c</id>
    <published>yesterday</published>
    <content type="xhtml">
      <div xmlns="http://www.w3.org/1999/xhtml">Inline <b>xhtml</b></div>
    </content>
  </entry>
</feed>
"""

JSON_FEED = {
    "version": "https://jsonfeed.org/version/1.1",
    "title": "Kitchen",
    "items": [
        {
            "id": "1",
            "url": "https://example.com/orzo",
            "title": "Lemon orzo",
            "content_html": "<p>Ready in 25 minutes.</p>",
            "date_published": "2026-11-17T09:00:00Z",
        },
        {"id": "2", "title": "Soup", "summary": "Warm.", "date_published": "garbage"},
    ],
}


def _item(title: str, url: str = "", summary: str = "", hours_old: float | None = 1.0) -> TrendItem:
    published = None if hours_old is None else NOW - timedelta(hours=hours_old)
    return TrendItem(
        "test", title, url or f"https://example.com/{title}", summary, published, title
    )


def _scored(title: str, score: float, url: str = "") -> ScoredTrend:
    return ScoredTrend(_item(title, url), score, ())


# --- parsing -----------------------------------------------------------------------------------


def test_rss_items_are_parsed_and_cleaned() -> None:
    items = parse_feed(RSS, "feeds/x.xml")
    assert [i.title for i in items] == ["Chip makers & the AI boom", "No guid here"]
    first, second = items
    assert first.summary == "New chips & faster models."  # double-escaped &amp;amp; too
    assert first.published_at == datetime(2026, 11, 17, 10, 0, tzinfo=UTC)
    assert first.guid == "guid-a"
    assert first.source == "feeds/x.xml"
    assert second.summary == "Body from content:encoded"
    assert second.published_at is None  # unparseable date is not an error
    assert second.guid == "https://example.com/b"  # falls back to the link


def test_atom_entries_are_parsed() -> None:
    items = parse_feed(ATOM, "science.atom")
    webb, content_only = items
    assert webb.title == "Webb sees water"
    assert webb.url == "https://example.com/webb"
    assert webb.summary == "Water vapor found."
    assert webb.published_at == datetime(2026, 11, 16, 7, 0, tzinfo=UTC)
    assert webb.guid == "urn:x:webb"
    assert content_only.url == "https://example.com/c"
    assert content_only.summary == "Inline xhtml"
    assert content_only.published_at is None


def test_json_feed_items_are_parsed() -> None:
    orzo, soup = parse_feed(json.dumps(JSON_FEED), "cooking.json")
    assert (orzo.title, orzo.url, orzo.summary) == (
        "Lemon orzo",
        "https://example.com/orzo",
        "Ready in 25 minutes.",
    )
    assert orzo.published_at == datetime(2026, 11, 17, 9, 0, tzinfo=UTC)
    assert soup.url == "" and soup.guid == "2" and soup.published_at is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "empty document"),
        ("hello world", "not RSS, Atom or JSON Feed"),
        ("<rss><channel><item>\n<title>x</item></rss>", "XML parse error at line"),
        ("<html><body/></html>", "root element <html>"),
        ("<rss version='2.0'/>", "no <channel>"),
        ("{not json", "JSON parse error"),
        ('{"version": "1.0", "items": []}', "not a JSON Feed"),
        ('{"version": "https://jsonfeed.org/version/1.1"}', "no 'items' list"),
    ],
)
def test_malformed_feeds_raise_feed_error_naming_the_source(text: str, expected: str) -> None:
    with pytest.raises(FeedError) as raised:
        parse_feed(text, "feeds/broken.xml")
    assert str(raised.value).startswith("feed 'feeds/broken.xml': ")
    assert expected in str(raised.value)
    assert raised.value.source == "feeds/broken.xml"


def test_item_without_title_names_its_index() -> None:
    feed = {"version": "https://jsonfeed.org/version/1.1", "items": [{"title": "ok"}, {"id": "x"}]}
    with pytest.raises(FeedError, match=r"feed 'x.json': item 2 has no title"):
        parse_feed(json.dumps(feed), "x.json")
    rss = "<rss><channel><item><title> </title></item></channel></rss>"
    with pytest.raises(FeedError, match="item 1 has no title"):
        parse_feed(rss, "r.xml")


def test_entity_declarations_are_refused() -> None:
    bomb = (
        '<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]>\n'
        "<rss><channel><item><title>&lol2;</title></item></channel></rss>"
    )
    with pytest.raises(FeedError, match="DOCTYPE/ENTITY"):
        parse_feed(bomb, "evil.xml")


def test_cdata_mentioning_doctype_is_still_accepted() -> None:
    rss = (
        "<rss><channel><item><title>T</title>"
        "<description><![CDATA[<!DOCTYPE html><p>Hi</p>]]></description></item></channel></rss>"
    )
    assert parse_feed(rss, "ok.xml")[0].summary == "Hi"


@pytest.mark.parametrize("name", ["tech.xml", "science.atom", "cooking.json"])
def test_sample_feeds_parse_with_dates_and_summaries(name: str) -> None:
    items = parse_feed((FEEDS_DIR / name).read_text(encoding="utf-8"), f"feeds/{name}")
    assert len(items) >= 10
    assert all(i.summary and i.url and i.guid for i in items)
    assert all(i.published_at and i.published_at.year == 2026 for i in items)
    assert len({i.guid for i in items}) == len(items)


# --- scoring -----------------------------------------------------------------------------------


def test_scores_are_in_range_and_sorted() -> None:
    items = [
        _item("Old unrelated", summary="short", hours_old=240),
        _item("Fresh AI chip news", summary="word " * 20, hours_old=0.5),
        _item("Undated AI story", hours_old=None),
        _item("Future dated chip", hours_old=-5),
    ]
    scored = score_trends(items, ["ai", "chip"], NOW)
    assert [s.item.title for s in scored][0] == "Fresh AI chip news"
    assert all(0.0 <= s.score <= 1.0 for s in scored)
    assert [s.score for s in scored] == sorted((s.score for s in scored), reverse=True)
    by_title = {s.item.title: s for s in scored}
    assert by_title["Fresh AI chip news"].matched_keywords == ("ai", "chip")
    assert by_title["Old unrelated"].matched_keywords == ()
    assert by_title["Old unrelated"].score < by_title["Undated AI story"].score


def test_recency_decays_by_half_life_and_unknown_is_neutral() -> None:
    fresh, day_old, undated = score_trends(
        [_item("a", hours_old=0), _item("b", hours_old=24), _item("c", hours_old=None)], [], NOW
    )
    # relevance is neutral (0.5) without keywords and summaries are empty: only recency differs.
    assert fresh.score == pytest.approx(0.45 * 1.0 + 0.45 * 0.5)
    assert day_old.score == pytest.approx(0.45 * 0.5 + 0.45 * 0.5)
    assert undated.score == day_old.score
    assert (day_old.item.title, undated.item.title) == ("b", "c")  # ties sort by title


def test_keyword_match_is_whole_word_and_case_insensitive() -> None:
    items = [_item("Chipotle opens", summary="no match"), _item("New CHIPS announced")]
    scored = {s.item.title: s for s in score_trends(items, ["chip", "open source"], NOW)}
    assert scored["Chipotle opens"].matched_keywords == ()
    assert scored["New CHIPS announced"].matched_keywords == ("chip",)
    multi = score_trends([_item("An open-source model")], ["open source"], NOW)[0]
    assert multi.matched_keywords == ("open source",)


def test_scoring_is_deterministic_and_validates_half_life() -> None:
    items = [_item(f"Story {n}", summary="AI " * n, hours_old=n) for n in range(8)]
    assert score_trends(items, ["ai"], NOW) == score_trends(list(reversed(items)), ["ai"], NOW)
    with pytest.raises(ValueError, match="half_life_hours"):
        score_trends(items, [], NOW, half_life_hours=0)


# --- dedupe ------------------------------------------------------------------------------------


def test_normalize_title() -> None:
    assert normalize_title("  Apple's NEW   chip -- faster!  ") == "apples new chip faster"


def test_dedupe_drops_exact_and_near_duplicates_keeping_higher_score() -> None:
    scored = [
        _scored("Apple unveils M6 chip with faster on-device AI", 0.7),
        _scored("Quantum sensor detects magnetic signals", 0.5),
        _scored("Apple unveils new M6 chip with faster on-device AI features", 0.9),
        _scored("quantum sensor detects magnetic signals!", 0.4),
        _scored("Different story entirely", 0.3, url="https://example.com/shared"),
        _scored("Another headline, same link", 0.2, url="https://example.com/shared"),
    ]
    kept = [s.item.title for s in dedupe_trends(scored)]
    assert kept == [
        "Quantum sensor detects magnetic signals",
        "Apple unveils new M6 chip with faster on-device AI features",
        "Different story entirely",
    ]


def test_dedupe_uses_shingles_for_long_titles() -> None:
    base = (
        "the city council approved a new plan to expand bike lanes across the downtown core today"
    )
    reordered = (
        "today across the downtown core the city council approved a plan to expand new lanes"
    )
    near = base + " officials said"
    kept = dedupe_trends([_scored(base, 0.5), _scored(near, 0.6), _scored(reordered, 0.4)])
    # The near copy shares nearly all 3-word runs; the reordered one shares words but few runs.
    assert [s.item.title for s in kept] == [near, reordered]


def test_dedupe_keeps_distinct_titles_and_sample_feed_near_duplicate_is_caught() -> None:
    items = parse_feed((FEEDS_DIR / "tech.xml").read_text(encoding="utf-8"), "feeds/tech.xml")
    scored = score_trends(items, ["AI", "chip"], NOW)
    deduped = dedupe_trends(scored)
    assert len(deduped) == len(items) - 1
    apple = [s for s in deduped if "M6" in s.item.title]
    assert len(apple) == 1


# --- volume gate -------------------------------------------------------------------------------


def test_volume_gate_returns_top_items() -> None:
    scored = [_scored(f"t{n}", n / 10) for n in range(6)]
    assert [s.item.title for s in volume_gate(scored, 2, 3)] == ["t5", "t4", "t3"]


def test_volume_gate_raises_with_counts() -> None:
    with pytest.raises(VolumeGateError, match="1 trend.*at least 3"):
        volume_gate([_scored("only", 0.5)], 3, 5)
    assert issubclass(VolumeGateError, ValueError)
    with pytest.raises(ValueError, match="invalid volume gate"):
        volume_gate([], 5, 2)


# --- idempotency -------------------------------------------------------------------------------


def test_idempotency_key_and_content_hash() -> None:
    key = idempotency_key("tech", "topic-1", "script")
    assert key == content_hash("tech:topic-1:script")
    assert len(key) == 64 and key == idempotency_key("tech", "topic-1", "script")
    assert idempotency_key("tech", 1) == idempotency_key("tech", "1")
    assert content_hash(b"abc") == content_hash("abc")
    assert content_hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


# --- unstorable items --------------------------------------------------------------------------

BAD_RSS = """<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0"><channel><title>t</title>
  <item><title>Fine item</title><guid>ok</guid></item>
  <item><title>Nul by reference&#0;here</title><guid>ref</guid></item>
  <item><title>Nul raw\x00here</title><guid>raw</guid></item>
  <item><title>Bell &#x7; is only odd</title><guid>bell</guid></item>
  <item><title>Also fine &#233;</title><guid>fine-2</guid></item>
</channel></rss>"""


def test_a_nul_in_one_xml_item_skips_that_item_not_the_feed() -> None:
    items = parse_feed(BAD_RSS, "feeds/bad.xml")  # the document no longer fails to parse
    assert [i.guid for i in items] == ["ok", "ref", "raw", "bell", "fine-2"]
    assert items[1].title == "Nul by reference\x00here"  # the marker is put back
    assert items[4].title == "Also fine \u00e9"  # legal references are left to the parser
    kept, skipped = split_storable(items)
    assert [i.guid for i in kept] == ["ok", "bell", "fine-2"]  # a bell is odd but storable
    assert [(s.guid, s.reason) for s in skipped] == [
        ("ref", "title contains a NUL character (U+0000)"),
        ("raw", "title contains a NUL character (U+0000)"),
    ]
    assert "feeds/bad.xml" in str(skipped[0])


def test_json_feed_nul_and_lone_surrogates_are_skipped() -> None:
    feed = {
        "version": "https://jsonfeed.org/version/1.1",
        "items": [
            {"id": "ok", "title": "Fine"},
            {"id": "nul", "title": "Fine", "summary": "bad \u0000 summary"},
            {"id": "sur", "title": "Lone \ud800 surrogate"},
            {"id": "url\u0000", "title": "Bad guid"},
        ],
    }
    items = parse_feed(json.dumps(feed), "x.json")
    kept, skipped = split_storable(items)
    assert [i.guid for i in kept] == ["ok"]
    assert [s.reason for s in skipped] == [
        "summary contains a NUL character (U+0000)",
        "title contains a lone surrogate (U+D800)",
        "guid contains a NUL character (U+0000)",
    ]
    assert skipped[2].guid == "url\\x00"  # printable in a log line
    assert unstorable_reason(kept[0]) is None
