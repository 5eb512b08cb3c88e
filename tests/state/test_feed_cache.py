"""The trend sources' conditional-GET cache (0010): validators and last items per source URL,
304s that keep the items, failures counted with an event, and never a key= in a stored URL."""

from __future__ import annotations

import psycopg
import pytest

from mdame_core.state import InvalidInput, NotFound, StateStore

URL = "https://trends.google.com/trending/rss?geo=US"
ITEMS = [{"source": URL, "title": "lakers", "url": "u", "summary": "", "published_at": None,
          "guid": "g"}]  # fmt: skip


def test_a_full_response_is_cached_and_a_304_keeps_its_items(state: StateStore, owner) -> None:
    assert state.get_feed_cache(URL) is None
    state.record_feed_fetch(URL, '"v1"', "Mon, 30 Nov 2026 08:00:00 GMT", ITEMS)
    entry = state.get_feed_cache(URL)
    assert entry is not None
    assert (entry.etag, entry.last_modified, entry.items) == (
        '"v1"',
        "Mon, 30 Nov 2026 08:00:00 GMT",
        ITEMS,
    )
    # A 304: no items; a validator it carried refreshes the stored one, the items stay.
    state.record_feed_fetch(URL, '"v2"', None, None)
    entry = state.get_feed_cache(URL)
    assert entry is not None and (entry.etag, entry.items) == ('"v2"', ITEMS)
    assert entry.last_modified == "Mon, 30 Nov 2026 08:00:00 GMT"
    # A new full response replaces both.
    state.record_feed_fetch(URL, None, None, [])
    entry = state.get_feed_cache(URL)
    assert entry is not None and (entry.etag, entry.items) == (None, [])


def test_a_304_with_nothing_cached_is_refused(state: StateStore) -> None:
    with pytest.raises(NotFound, match="no cached response"):
        state.record_feed_fetch(URL, '"v1"', None, None)


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
    state.record_feed_fetch(URL, None, None, ITEMS)
    assert owner.execute("SELECT failures FROM mdame.feed_cache").fetchone() == (0,)


def test_a_url_with_a_key_is_refused_and_reasons_are_redacted(state: StateStore, owner) -> None:
    with pytest.raises(InvalidInput, match="key= parameter"):
        state.record_feed_fetch(f"{URL}&key=AIzaSECRET", None, None, ITEMS)
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
