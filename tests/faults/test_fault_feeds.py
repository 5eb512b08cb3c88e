"""Live trend sources through real httpx against the local feed server (fakes.feeds), with
the conditional-GET cache in real PostgreSQL: every fault gives a clear per-source error or the
right recovery."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest
from psycopg.types.json import Jsonb

from fakes.feeds import INJECTION_TEXT, FeedServer, running
from mdame_cli.ui import free_port
from mdame_core.settings import REPO_ROOT
from mdame_core.state import Fence, StateStore
from mdame_core.state.feed_cache import DimensionFeedCache
from mdame_domain.feed_formats import MAX_ITEMS_PER_SOURCE
from mdame_domain.feed_sources import FeedSource
from mdame_domain.trends import FeedError
from mdame_domain.trends.sizes import SUMMARY_MAX_BYTES, TITLE_MAX_BYTES, stored_size
from mdame_resources.providers.trends import FeedFileTrendSource, HttpFeedTrendSource
from tests.adminkit import as_admin

KEY = "test-key-not-secret"


@pytest.fixture
def fake() -> Iterator[FeedServer]:
    with running(youtube_key=KEY) as server:
        yield server


@pytest.fixture
def cache(state: StateStore) -> DimensionFeedCache:
    """The feed cache as tech's trends stage uses it: written under tech's pipeline lock."""
    as_admin(state).upsert_dimension("tech", "Tech")
    grant = state.acquire_pipeline_lock("pipeline:tech", "feeds", 600)
    assert grant is not None
    return state.fenced(Fence("pipeline:tech", "feeds", grant, 600)).for_dimension("tech")


def _reader(fake: FeedServer, **overrides: object) -> HttpFeedTrendSource:
    settings: dict[str, object] = {
        "youtube_api_key": KEY,
        "youtube_root_url": fake.base_url,
        "google_trends_root_url": fake.base_url,
        "reddit_root_url": fake.base_url,
        "read_timeout_s": 2.0,
        **overrides,
    }
    return HttpFeedTrendSource(**settings)  # type: ignore[arg-type]


def _rss(fake: FeedServer, path: str = "/feeds/rss.xml") -> FeedSource:
    return FeedSource("rss", url=fake.base_url + path)


def _all_kinds(fake: FeedServer) -> list[FeedSource]:
    return [
        _rss(fake),
        FeedSource("atom", url=fake.base_url + "/feeds/atom.xml"),
        FeedSource("json", url=fake.base_url + "/feeds/feed.json"),
        FeedSource("google_trends", region="US"),
        FeedSource("youtube_most_popular", region="US", category="28", limit=5),
        FeedSource("reddit_top", subreddit="technology"),
    ]


def test_every_kind_is_read_with_a_user_agent(fake: FeedServer) -> None:
    reader = _reader(fake)
    counts = {s.kind: len(reader.fetch(s).items) for s in _all_kinds(fake)}
    # Six stories each; YouTube asked for five; Reddit's stickied post is left out.
    assert counts == {"rss": 6, "atom": 6, "json": 6, "google_trends": 6,
                      "youtube_most_popular": 5, "reddit_top": 6}  # fmt: skip
    assert all(r.headers["user-agent"].startswith("mdame/") for r in fake.requests)
    [youtube] = fake.requests_to("/youtube/")
    assert youtube.query["key"] == [KEY] and youtube.query["chart"] == ["mostPopular"]


def test_a_304_reuses_the_cached_items(fake: FeedServer, cache: DimensionFeedCache) -> None:
    reader = _reader(fake)
    for source in _all_kinds(fake):
        first = reader.fetch(source, cache=cache)
        again = reader.fetch(source, cache=cache)
        assert (first.status, again.status) == ("fetched", "not_modified"), source.kind
        assert again.items == first.items, source.kind
    conditional = [r for r in fake.requests if "if-none-match" in r.headers]
    assert len(conditional) == 6 and all("if-modified-since" in r.headers for r in conditional)
    # A 304 forced by the server (whatever the request said) reuses the cache too.
    fake.faults.push("rss", "304")
    assert reader.fetch(_rss(fake), cache=cache).status == "not_modified"


def test_a_304_with_nothing_cached_is_a_clear_error(
    fake: FeedServer, cache: DimensionFeedCache
) -> None:
    fake.faults.push("rss", "304")
    with pytest.raises(FeedError, match="304 Not Modified, but nothing is cached"):
        _reader(fake).fetch(_rss(fake), cache=cache)


def _cached_items(owner: psycopg.Connection, url: str, items: object) -> None:
    """The cached items of `url` replaced behind the RPC's back: a cache written before its
    checks existed, or by someone else with the database's owner."""
    owner.execute(
        "UPDATE mdame.feed_cache SET items = %s WHERE source_url = %s", [Jsonb(items), url]
    )


def test_a_304_reuses_cached_items_under_the_caps_of_a_fresh_body(
    fake: FeedServer, cache: DimensionFeedCache, owner: psycopg.Connection
) -> None:
    reader, source = _reader(fake), _rss(fake)
    reader.fetch(source, cache=cache)
    item = {"source": "elsewhere", "url": "https://e.com/" + "u" * 3000, "summary": "s" * 9000,
            "published_at": "not a date"}  # fmt: skip
    _cached_items(
        owner, source.url, [{**item, "title": "t" * 5000, "guid": f"g{i}"} for i in range(150)]
    )
    again = reader.fetch(source, cache=cache)
    assert again.status == "not_modified"
    assert len(again.items) == MAX_ITEMS_PER_SOURCE
    first = again.items[0]
    assert stored_size(first.title) <= TITLE_MAX_BYTES and first.title.endswith("…")
    assert stored_size(first.summary) <= SUMMARY_MAX_BYTES and first.url == ""
    assert first.source == source.url and first.published_at is None


@pytest.mark.parametrize(
    "items",
    [
        [{"title": "no guid"}],
        [{"guid": "g", "title": "t", "url": 5}],
        [{"guid": "g", "title": ["not", "text"]}],
        ["not an object"],
        [{"guid": "g", "title": "t", "published_at": 20261129}],
    ],
)
def test_a_malformed_cache_is_fetched_in_full_or_is_the_sources_error(
    fake: FeedServer, cache: DimensionFeedCache, owner: psycopg.Connection, items: object
) -> None:
    reader, source = _reader(fake), _rss(fake)
    first = reader.fetch(source, cache=cache)
    _cached_items(owner, source.url, items)
    # Not offered for a 304: the full response comes back and replaces the cache.
    again = reader.fetch(source, cache=cache)
    assert again.status == "fetched" and again.items == first.items
    assert "cached items not reused" in again.notes[0]
    assert "if-none-match" not in fake.requests[-1].headers
    entry = cache.get_feed_cache(source.url)
    assert entry is not None and len(entry.items) == len(first.items)
    # A server that answers 304 whatever was asked: that source's FeedError, not a crash.
    _cached_items(owner, source.url, items)
    fake.faults.push("rss", "304")
    with pytest.raises(FeedError, match="nothing is cached to reuse"):
        reader.fetch(source, cache=cache)


def test_a_changed_feed_replaces_the_cache(fake: FeedServer, cache: DimensionFeedCache) -> None:
    reader = _reader(fake)
    reader.fetch(_rss(fake), cache=cache)
    fake.faults.push("rss", "injection")  # different content, so a different ETag
    changed = reader.fetch(_rss(fake), cache=cache)
    assert changed.status == "fetched" and INJECTION_TEXT[:40] in changed.items[0].summary
    entry = cache.get_feed_cache(_rss(fake).url)
    assert entry is not None and INJECTION_TEXT[:40] in entry.items[0]["summary"]


def test_slow_server_hits_the_read_timeout(fake: FeedServer) -> None:
    fake.slow_s = 2.0
    fake.faults.push("rss", "slow")
    started = time.monotonic()
    with pytest.raises(FeedError, match=r"timed out \(ReadTimeout"):
        _reader(fake, read_timeout_s=0.5).fetch(_rss(fake))
    assert time.monotonic() - started < 1.8


def test_slow_server_hits_the_total_deadline(fake: FeedServer) -> None:
    fake.slow_s = 1.0
    fake.faults.push("rss", "slow")
    with pytest.raises(FeedError, match="total deadline passed"):
        _reader(fake, read_timeout_s=5.0, total_timeout_s=0.3).fetch(_rss(fake))


@pytest.mark.parametrize("route", ["rss", "google_trends", "youtube", "reddit"])
def test_server_error_is_a_clear_error(fake: FeedServer, route: str) -> None:
    source = {s.kind: s for s in _all_kinds(fake)}
    kind = {"youtube": "youtube_most_popular", "reddit": "reddit_top"}.get(route, route)
    fake.faults.push(route, "500")
    with pytest.raises(FeedError, match="HTTP 500 Internal Server Error"):
        _reader(fake).fetch(source[kind])


def test_huge_body_is_aborted_at_the_cap_while_streaming(fake: FeedServer) -> None:
    fake.faults.push("rss", "huge")
    started = time.monotonic()
    with pytest.raises(FeedError, match="over the 200000-byte cap \\(aborted while streaming\\)"):
        _reader(fake, max_bytes=200_000).fetch(_rss(fake))
    assert time.monotonic() - started < 5


def test_declared_length_over_the_cap_is_refused_before_reading(fake: FeedServer) -> None:
    with pytest.raises(FeedError, match=r"response of \d+ bytes is over the 500-byte cap"):
        _reader(fake, max_bytes=500).fetch(_rss(fake))


def test_non_utf8_body_decodes_per_its_declared_charset(fake: FeedServer) -> None:
    fake.faults.push("rss", "non_utf8")
    fake.faults.push("google_trends", "non_utf8")
    reader = _reader(fake)
    titles = [i.title for i in reader.fetch(_rss(fake)).items]
    assert "Robot chef at a Lyon café plates crème brûlée" in titles
    summaries = [i.summary for i in reader.fetch(FeedSource("google_trends", region="FR")).items]
    assert any("crème brûlée" in s for s in summaries)


def test_mislabeled_charset_is_a_clear_error(fake: FeedServer) -> None:
    fake.faults.push("rss", "mislabeled_charset")
    with pytest.raises(FeedError, match=r"body is not valid utf-8 \(byte 0x"):
        _reader(fake).fetch(_rss(fake))


@pytest.mark.parametrize(
    ("route", "problem"),
    [
        ("rss", "XML parse error"),
        ("atom", "XML parse error"),
        ("google_trends", "malformed XML"),
        ("json", "JSON parse error"),
        ("youtube", "JSON parse error"),
        ("reddit", "JSON parse error"),
    ],
)
def test_malformed_body_is_a_clear_per_source_error(
    fake: FeedServer, route: str, problem: str
) -> None:
    kinds = {"youtube": "youtube_most_popular", "reddit": "reddit_top"}
    source = {s.kind: s for s in _all_kinds(fake)}[kinds.get(route, route)]
    fake.faults.push(route, "malformed_xml")
    with pytest.raises(FeedError, match=problem) as caught:
        _reader(fake).fetch(source)
    assert caught.value.source.startswith(fake.base_url)


def test_injection_text_reaches_the_items_unchanged(fake: FeedServer) -> None:
    # Not the fetcher's to clean away: the prompt firewall at topics must see it (and does,
    # tests/pipeline/test_trend_sources.py).
    fake.set_fault("*", "injection")
    for source in _all_kinds(fake):
        items = _reader(fake).fetch(source).items
        assert any(INJECTION_TEXT in i.summary for i in items), source.kind


def test_redirects_are_followed_up_to_the_bound(fake: FeedServer) -> None:
    reader = _reader(fake, max_redirects=3)
    assert len(reader.fetch(_rss(fake, "/redirect/3/feeds/rss.xml")).items) == 6
    with pytest.raises(FeedError, match="more than 3 redirects"):
        reader.fetch(_rss(fake, "/redirect/4/feeds/rss.xml"))
    with pytest.raises(FeedError, match="more than 3 redirects"):
        reader.fetch(_rss(fake, "/redirect/loop"))
    assert len(fake.requests_to("/redirect/loop")) == 4


def test_youtube_needs_the_key_and_errors_never_show_it(fake: FeedServer) -> None:
    source = FeedSource("youtube_most_popular", region="US")
    with pytest.raises(FeedError, match="YOUTUBE_API_KEY is not set"):
        _reader(fake, youtube_api_key=None).fetch(source)
    assert fake.requests_to("/youtube/") == []
    wrong = "wrong-key-zz9"
    with pytest.raises(FeedError, match=r"HTTP 400 Bad Request: API key not valid") as caught:
        _reader(fake, youtube_api_key=wrong).fetch(source)
    assert wrong not in str(caught.value) and "key=" not in str(caught.value)
    # Transport and URL errors stay this source's FeedError, with no httpx exception attached.
    for root in ("http://127.0.0.1:9", "htp://x.org", "http://exa\x01mple.com"):
        with pytest.raises(FeedError, match="fetch failed") as refused:
            _reader(fake, youtube_root_url=root).fetch(source)
        assert KEY not in str(refused.value)
        assert refused.value.__context__ is None and refused.value.__cause__ is None


def test_each_provider_refuses_the_other_kind_of_source(fake: FeedServer) -> None:
    with pytest.raises(FeedError, match="read by the offline provider"):
        _reader(fake).fetch(FeedSource("file", url="feeds/tech.xml"))
    with pytest.raises(FeedError, match="reads feed files only"):
        FeedFileTrendSource().fetch(_rss(fake))
    assert FeedFileTrendSource().fetch(FeedSource("file", url="feeds/tech.xml")).items
    # The demo against fakes reads the sample files beside its live sources.
    sample = _reader(fake, read_files=True).fetch(FeedSource("file", url="feeds/tech.xml"))
    assert sample.status == "file" and sample.items


def test_the_server_runs_standalone() -> None:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "fakes.feeds", "--port", str(port), "--fault", "atom=500"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,  # fakes/ is a dev tool beside tests/, importable from the repository root
    )
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == f"fake feeds on http://127.0.0.1:{port}"
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/feeds/rss.xml").status_code == 200
        assert httpx.get(f"{base}/feeds/atom.xml").status_code == 500
        assert (
            httpx.get(f"{base}/youtube/v3/videos?part=snippet&chart=mostPopular").status_code == 403
        )
    finally:
        server.terminate()
        server.wait(timeout=10)


class Canned:
    """A local server answering each path with a canned (status, headers, body); it counts the
    connections it accepts and records each path asked for."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.paths: list[str] = []
        self.connections = 0
        canned = self

        class Handler(BaseHTTPRequestHandler):
            def setup(self) -> None:
                canned.connections += 1
                super().setup()

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:  # noqa: N802 - stdlib name
                path = urlsplit(self.path).path
                canned.paths.append(path)
                status, headers, body = canned.routes.get(path, (404, {}, b"not found"))
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}"


@contextmanager
def canned() -> Iterator[Canned]:
    server = Canned()
    thread = threading.Thread(target=server.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()


def _long_post(n: int) -> dict[str, object]:
    data = {"name": f"t3_{n}", "title": f"Long post {n}", "permalink": f"/r/long/comments/{n}/",
            "created_utc": 1, "selftext": "A robot walks. " * 2700}  # fmt: skip
    return {"kind": "t3", "data": data}


def test_seven_long_self_posts_fit_one_record_trends_call(state: StateStore) -> None:
    # 40,000 characters each: uncapped, the day's items were over record_trends' 256 KiB.
    listing = {"kind": "Listing", "data": {"children": [_long_post(n) for n in range(7)]}}
    with canned() as server:
        server.routes["/r/long/top.json"] = (200, {}, json.dumps(listing).encode())
        reader = HttpFeedTrendSource(reddit_root_url=server.base_url)
        items = reader.fetch(FeedSource("reddit_top", subreddit="long", limit=7)).items
    dimension = as_admin(state).upsert_dimension("tech", "Tech")
    token = state.acquire_pipeline_lock("pipeline:tech", "test", 600)
    assert token is not None
    writer = state.fenced(Fence("pipeline:tech", "test", token, 600))
    # The payload the trends stage records for each item.
    day = {"dimension_id": dimension, "partition_date": "2026-11-29", "published_at": None}
    payloads = [{**day, "title": i.title, "summary": i.summary, "url": i.url,
                 "source": i.source, "score": 0.5, "keywords": []} for i in items]  # fmt: skip
    trends = [{"key": f"k{n}", "payload": p} for n, p in enumerate(payloads)]
    assert len(writer.record_trends("tech", trends)) == 7


RSS_BODY = b"<rss><channel><item><title>t</title></item></channel></rss>"


@pytest.mark.parametrize(
    ("location", "reason"),
    [
        ("http://169.254.169.254/latest/meta-data/", "only https redirects are followed, not http"),
        ("http://127.0.0.1:{port}/feed.xml", "only https redirects are followed, not http"),
        ("https://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"),
        ("https://localhost:{port}/feed.xml", r"localhost \(.+\) is a loopback address"),
    ],
)
def test_a_redirect_off_https_or_to_a_private_address_skips_the_source(
    location: str, reason: str
) -> None:
    with canned() as origin, canned() as target:
        target.routes["/feed.xml"] = (200, {}, RSS_BODY)
        redirect = location.format(port=target.port)
        origin.routes["/feed.xml"] = (302, {"Location": redirect}, b"")
        source = FeedSource("rss", url=origin.base_url + "/feed.xml")
        with pytest.raises(FeedError, match=f"redirect to {re.escape(redirect)} refused: {reason}"):
            HttpFeedTrendSource().fetch(source)
        assert origin.paths == ["/feed.xml"]
        assert target.connections == 0  # not even a connection to the target
