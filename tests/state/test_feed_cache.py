"""The trend sources' conditional-GET cache (0010): validators and last items per source URL,
304s that keep the items, failures counted with an event, and never a key= in a stored URL.
A fetch is recorded by one dimension's trends stage, under that dimension's lock, and its items
are checked against the feed caps."""

from __future__ import annotations

import psycopg
import pytest

from mdame_core.state import Fence, InvalidInput, NotFound, StateStore
from mdame_core.state.feed_cache import DimensionFeedCache
from tests.adminkit import as_admin

URL = "https://trends.google.com/trending/rss?geo=US"
ITEMS = [{"source": URL, "title": "lakers", "url": "u", "summary": "", "published_at": None,
          "guid": "g"}]  # fmt: skip


def _trends_stage(state: StateStore, slug: str) -> DimensionFeedCache:
    """The cache as `slug`'s trends stage writes it: under that dimension's pipeline lock."""
    as_admin(state).upsert_dimension(slug, slug.title())
    grant = state.acquire_pipeline_lock(f"pipeline:{slug}", "trends", 600)
    assert grant is not None
    return state.fenced(Fence(f"pipeline:{slug}", "trends", grant, 600)).for_dimension(slug)


@pytest.fixture
def tech(state: StateStore) -> DimensionFeedCache:
    return _trends_stage(state, "tech")


def test_a_full_response_is_cached_and_a_304_keeps_its_items(
    state: StateStore, tech: DimensionFeedCache
) -> None:
    assert state.get_feed_cache(URL) is None
    tech.record_feed_fetch(URL, '"v1"', "Mon, 30 Nov 2026 08:00:00 GMT", ITEMS)
    entry = state.get_feed_cache(URL)
    assert entry is not None
    assert (entry.etag, entry.last_modified, entry.items) == (
        '"v1"',
        "Mon, 30 Nov 2026 08:00:00 GMT",
        ITEMS,
    )
    # A 304: no items; a validator it carried refreshes the stored one, the items stay. Another
    # dimension listing the same source shares its row, under its own lock.
    _trends_stage(state, "news").record_feed_fetch(URL, '"v2"', None, None)
    entry = state.get_feed_cache(URL)
    assert entry is not None and (entry.etag, entry.items) == ('"v2"', ITEMS)
    assert entry.last_modified == "Mon, 30 Nov 2026 08:00:00 GMT"
    # A new full response replaces both.
    tech.record_feed_fetch(URL, None, None, [])
    entry = state.get_feed_cache(URL)
    assert entry is not None and (entry.etag, entry.items) == (None, [])


def test_a_304_with_nothing_cached_is_refused(tech: DimensionFeedCache) -> None:
    with pytest.raises(NotFound, match="no cached response"):
        tech.record_feed_fetch(URL, '"v1"', None, None)


def _item(**fields: object) -> dict[str, object]:
    return {**ITEMS[0], **fields}


@pytest.mark.parametrize(
    ("items", "needle"),
    [
        ([_item(guid=f"g{i}") for i in range(101)], "over the limit of 100"),
        ([_item(), _item(guid="")], r"items\[1\]"),
        ([{k: v for k, v in ITEMS[0].items() if k != "guid"}], r"items\[0\]"),
        ([_item(title=" ")], r"items\[0\]"),
        ([_item(title="t" * 601)], "title 600"),
        ([_item(title="é" * 301)], "title 600"),  # bytes, as the caps count them
        ([_item(summary="s" * 2001)], r"items\[0\]"),
        ([_item(url="u" * 2049)], r"items\[0\]"),
        ([_item(guid="g" * 513)], r"items\[0\]"),
        ([_item(published_at=20261130)], r"items\[0\]"),
        ([_item(url=None)], r"items\[0\]"),
        (["an item"], r"items\[0\]"),
    ],
)
def test_items_outside_the_feed_caps_are_refused(
    tech: DimensionFeedCache, owner, items: list[object], needle: str
) -> None:
    """What the trends stage caches is what a fresh body gives after the caps (at most 100
    items, each capped): anything else is refused, and the cache keeps what it had."""
    tech.record_feed_fetch(URL, '"v1"', None, ITEMS)
    with pytest.raises(InvalidInput, match=needle):
        tech.record_feed_fetch(URL, '"v2"', None, items)
    entry = tech.get_feed_cache(URL)
    assert entry is not None and (entry.etag, entry.items) == ('"v1"', ITEMS)


def test_items_at_the_feed_caps_are_cached(tech: DimensionFeedCache) -> None:
    at_caps = _item(title="é" * 300, summary="s" * 2000, url="u" * 2048, guid="g" * 512)
    items = [at_caps] + [
        _item(guid=f"g{i}", published_at="2026-11-30T08:00:00+00:00") for i in range(99)
    ]
    tech.record_feed_fetch(URL, '"v1"', None, items)
    entry = tech.get_feed_cache(URL)
    assert entry is not None and entry.items == items


def test_failures_are_counted_and_each_is_an_event(state: StateStore, owner) -> None:
    state.record_feed_failure(URL, "HTTP 500 Internal Server Error", "run-1")
    row_id = state.record_feed_failure(URL, "timed out", "run-2")
    # A source that never answered has no cached response to offer.
    assert state.get_feed_cache(URL) is None
    failures, last_error = owner.execute(
        "SELECT failures, last_error FROM mdame.feed_cache WHERE id = %s", [row_id]
    ).fetchone()
    assert (failures, last_error) == (2, "timed out")
    events = owner.execute(
        """SELECT detail FROM mdame.events WHERE subject_kind = 'feed_source'
            AND subject_id = %s ORDER BY id""",
        [row_id],
    ).fetchall()
    assert [e[0]["reason"] for e in events] == ["HTTP 500 Internal Server Error", "timed out"]
    assert events[1][0]["consecutive_failures"] == 2 and events[1][0]["source"] == URL
    # A fetch that works again ends the streak.
    _trends_stage(state, "tech").record_feed_fetch(URL, None, None, ITEMS)
    assert owner.execute("SELECT failures FROM mdame.feed_cache").fetchone() == (0,)


def test_a_url_with_a_key_is_refused_and_reasons_are_redacted(
    state: StateStore, tech: DimensionFeedCache, owner
) -> None:
    with pytest.raises(InvalidInput, match="key= parameter"):
        tech.record_feed_fetch(f"{URL}&key=AIzaSECRET", None, None, ITEMS)
    with pytest.raises(InvalidInput, match="key= parameter"):
        state.record_feed_failure("https://h/v?key=AIzaSECRET", "x")
    state.record_feed_failure(URL, "GET https://h/v?part=x&key=AIzaSECRET&y=1 failed")
    dump = owner.execute(
        "SELECT (SELECT string_agg(detail::text, ' ') FROM mdame.events)"
        " || (SELECT string_agg(last_error, ' ') FROM mdame.feed_cache)"
    ).fetchone()[0]
    assert "AIzaSECRET" not in dump and "key=[redacted]&y=1" in dump
    with pytest.raises(psycopg.errors.CheckViolation):
        owner.execute("INSERT INTO mdame.feed_cache (source_url) VALUES ('https://h/?key=s')")


def test_the_app_reads_the_cache_but_writes_only_through_the_rpcs(fresh_db) -> None:
    with psycopg.connect(fresh_db.app, autocommit=True) as conn:
        conn.execute("SET ROLE mdame_app")
        assert conn.execute("SELECT count(*) FROM mdame.feed_cache").fetchone() == (0,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO mdame.feed_cache (source_url) VALUES ('https://x')")
