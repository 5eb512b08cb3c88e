"""A generated corpus of malformed feeds of every source kind: reading one (decode_body, then
parse_source_body, as the live reader does) gives items within the size caps or a FeedError,
never another exception. Deterministic: seeded mutations of valid samples, plus hand-written
nasties."""

from __future__ import annotations

import codecs
import json
import random
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from fakes.feeds import FeedServer
from mdame_domain.feed_formats import parse_source_body
from mdame_domain.feed_sources import decode_body, item_to_json
from mdame_domain.trends import (
    GUID_MAX_BYTES,
    SUMMARY_MAX_BYTES,
    TITLE_MAX_BYTES,
    URL_MAX_BYTES,
    FeedError,
    TrendItem,
    stored_size,
)

RPC_LIMIT = 262_144  # record_trends refuses a JSON argument over 256 KiB
MAX_TRENDS = 20  # the trends stage records at most this many items
SEED = 20_261_130
MUTANTS_PER_SAMPLE = 150


def _samples() -> dict[str, tuple[str, str]]:
    """Valid bodies per source kind, with their Content-Type."""
    fake = FeedServer()
    fake.now = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)  # the same bodies on every run
    fake.base_url = "http://127.0.0.1:1"
    return {
        "rss": (fake.rss(None), "application/rss+xml"),
        "atom": (fake.atom(None), "application/atom+xml"),
        "json": (fake.json_feed(None), "application/feed+json"),
        "google_trends": (fake.google_trends("US", None), "application/rss+xml"),
        "youtube_most_popular": (fake.youtube("US", "28", 25, None), "application/json"),
        "reddit_top": (fake.reddit("tech", 25, None), "application/json"),
    }


# --- text and byte mutations -------------------------------------------------------------------

HUGE = "Ünïcödé 😀 " * 60_000  # about a megabyte of UTF-8
NASTY_TOKENS = [
    "\x00", "\x01\x02\x1f", "\x7f", "\ufffe", "\uffff", "\ud800", "\udfff", "\ue000ffffffff\ue001",
    "\ue0001\ue001", "&#0;", "&#x1;", "&#xD800;", "&#99999999;", "&#x110000;", "&a;", "&amp;amp;",
    "<!DOCTYPE x [<!ENTITY a 'b'>]>", "<!-- <a> -->", "<?pi <b?>", "<![CDATA[", "]]>", "<", ">",
    "</item>", "<item>", "<title>", "</channel>", "{", "}", "[", "]", '"', "\\", "\\u0000",
    "\\ud800", ",", ":", "Infinity", "-Infinity", "NaN", "1e999", "-1e999", "9" * 5000, "null",
    "true", "\ufeff", "\u202e", "\u0301" * 50, "A" * 70_000, HUGE,
]  # fmt: skip


def _mutate_text(text: str, rng: random.Random) -> str:
    at = rng.randrange(len(text) + 1)
    span = rng.randrange(1, 200)
    choice = rng.randrange(6)
    if choice == 0:
        return text[:at]  # truncated
    if choice == 1:
        return text[:at] + text[at + span :]  # a piece missing
    if choice == 2:
        return text[:at] + text[at : at + span] * rng.randrange(2, 50) + text[at:]  # repeated
    if choice == 3:
        return text[:at] + chr(rng.randrange(0x110000)) + text[at + 1 :]  # any code point
    return text[:at] + rng.choice(NASTY_TOKENS) + text[at:]


def _mutate_bytes(body: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(body) + 1)
    choice = rng.randrange(4)
    if choice == 0:
        return body[:at] + bytes([rng.randrange(0x80, 0x100)]) + body[at + 1 :]  # bad UTF-8
    if choice == 1:
        return rng.choice([codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE]) + body
    if choice == 2:
        return body[:at]  # cut inside a multi-byte character, maybe
    return body.decode("utf-8", "replace").encode("utf-16")  # declared by its BOM


# --- structural mutations (JSON values, XML elements) ------------------------------------------

NASTY_VALUES: list[Any] = [
    None, True, 0, -1, 2**70, 1e308, float("inf"), float("-inf"), float("nan"), "", " ",
    "\x00", "\ud800", HUGE, [], {}, [None], {"": None}, "A" * 70_000,
]  # fmt: skip


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict | list):
        children = value.items() if isinstance(value, dict) else enumerate(value)
        for key, child in children:
            yield from _paths(child, (*path, key))


def _replaced(document: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = json.loads(json.dumps(document))
    parent = copy
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = new
    return copy


def _json_variants(text: str, rng: random.Random) -> Iterator[str]:
    """Null in every field, then random nasty values anywhere."""
    document = json.loads(text)
    paths = list(_paths(document))
    for path in paths:
        yield json.dumps(_replaced(document, path, None))
    for _ in range(len(paths) // 2):
        yield json.dumps(_replaced(document, rng.choice(paths), rng.choice(NASTY_VALUES)))


def _xml_variants(text: str, rng: random.Random) -> Iterator[str]:
    """Every element emptied in turn, then random nasty text in random elements."""
    root = ET.fromstring(text)
    count = sum(1 for _ in root.iter())
    for index in range(count):
        copy = ET.fromstring(text)
        element = list(copy.iter())[index]
        element.clear()
        yield ET.tostring(copy, encoding="unicode")
    for _ in range(count // 2):
        copy = ET.fromstring(text)
        element = rng.choice(list(copy.iter()))
        element.text = str(rng.choice(NASTY_VALUES))
        yield ET.tostring(copy, encoding="unicode")


# --- hand-written nasties ----------------------------------------------------------------------


def _entity_bomb(levels: int) -> str:
    entities = '<!ENTITY a0 "aaaaaaaaaa">' + "".join(
        f'<!ENTITY a{i} "{f"&a{i - 1};" * 10}">' for i in range(1, levels + 1)
    )
    return f"<!DOCTYPE rss [{entities}]><rss><channel><item><title>&a{levels};</title>"


def _nasties() -> list[tuple[str, bytes, str]]:
    """(kind, body, content type) written by hand."""
    deep_json = '{"a": ' * 5000 + "1" + "}" * 5000
    deep_xml = "<rss><channel><item><title>" + "<b>" * 50_000 + "x" + "</b>" * 50_000
    bodies = [
        "", " ", "\ufeff", "\x00", "null", "[]", "{}", '""', "0", "Infinity", "NaN",
        "[" * 1000 + "]" * 1000, deep_json, deep_xml + "</title></item></channel></rss>",
        _entity_bomb(5) + "</item></channel></rss>", _entity_bomb(9) + "</item></channel></rss>",
        "<!-- <a> -->" + _entity_bomb(4) + "</item></channel></rss>",
        '<?xml version="1.0"?><?pi <b?>' + _entity_bomb(4) + "</item></channel></rss>",
        '<!DOCTYPE rss SYSTEM "file:///etc/passwd"><rss/>',
        '<!DOCTYPE rss PUBLIC "-//x//y" "http://169.254.169.254/x.dtd"><rss/>',
        "<rss><channel><item><title>&xxe;</title></item></channel></rss>",
        "<rss><channel><item><title>" + "x" * 3_000_000 + "</title></item></channel></rss>",
        "<rss><channel>" + "<item><title>t</title></item>" * 5_000 + "</channel></rss>",
        '<feed xmlns="http://www.w3.org/2005/Atom"><entry><title>t</title>'
        '<published>0001-01-01T00:00:00+14:00</published></entry></feed>',
        "<rss><channel><item><title>t</title><pubDate>Fri, 31 Dec 9999 23:59:59 -1200"
        "</pubDate></item></channel></rss>",
        '{"kind": "Listing", "data": {"children": [{"data": {"name": "a", "title": "t", '
        '"created_utc": 1e999}}]}}',
        '{"kind": "Listing", "data": {"children": [{"data": {"name": "a", "title": "t", '
        '"created_utc": ' + "9" * 4000 + "}}]}}",
        '{"kind": "youtube#videoListResponse", "items": [{"id": "' + "x" * 200_000
        + '", "snippet": {"title": "t", "publishedAt": "99999-01-01"}}]}',
        '{"version": "https://jsonfeed.org/version/1.1", "items": [{"title": "t", "id": NaN, '
        '"url": "' + "u" * 100_000 + '"}]}',
    ]  # fmt: skip
    kinds = ["rss", "atom", "json", "google_trends", "youtube_most_popular", "reddit_top"]
    out = [(kind, body.encode("utf-8", "surrogatepass"), "") for body in bodies for kind in kinds]
    for charset in ("utf-16", "base64", "rot13", "punycode", "klingon-8", "utf-32", "idna"):
        out.append(("rss", b"<rss><channel></channel></rss>", f"text/xml; charset={charset}"))
    return out


# --- the corpus --------------------------------------------------------------------------------


def corpus() -> list[tuple[str, bytes, str]]:
    rng = random.Random(SEED)
    cases = _nasties()
    for kind, (text, content_type) in _samples().items():
        structural = _xml_variants if text.lstrip().startswith("<") else _json_variants
        variants = list(structural(text, rng))
        for _ in range(MUTANTS_PER_SAMPLE):
            variants.append(_mutate_text(rng.choice([text, *variants]), rng))
        for variant in variants:
            body = variant.encode("utf-8", "surrogatepass")
            cases.append((kind, body, content_type))
            if rng.random() < 0.2:
                cases.append((kind, _mutate_bytes(body, rng), content_type))
    return cases


def _read(kind: str, body: bytes, content_type: str) -> list[TrendItem]:
    """What the live reader does with a fetched body."""
    text = decode_body(body, content_type or None, "src")
    return parse_source_body(kind, text, "src", region="US")


def _within_caps(item: TrendItem) -> bool:
    return (
        stored_size(item.title) <= TITLE_MAX_BYTES
        and stored_size(item.summary) <= SUMMARY_MAX_BYTES
        and stored_size(item.url) <= URL_MAX_BYTES
        and stored_size(item.guid) <= GUID_MAX_BYTES
    )


def test_the_corpus_is_deterministic_and_large() -> None:
    first, second = corpus(), corpus()
    assert first == second and len(first) >= 1_000


def test_no_malformed_feed_raises_anything_but_feed_error() -> None:
    cases = corpus()
    started = time.monotonic()
    parsed = refused = 0
    for kind, body, content_type in cases:
        try:
            items = _read(kind, body, content_type)
        except FeedError as error:
            assert error.source == "src"
            refused += 1
            continue
        except Exception as error:  # noqa: BLE001 - the failure to report
            pytest.fail(f"{kind} body {body[:120]!r} raised {type(error).__name__}: {error}")
        parsed += 1
        assert all(_within_caps(item) for item in items), (kind, body[:120])
        day = json.dumps([item_to_json(i) for i in items[:MAX_TRENDS]], ensure_ascii=False)
        assert len(day.encode("utf-8", "surrogatepass")) < RPC_LIMIT // 2
    # Both outcomes are well represented: the mutations neither all break nor all pass.
    assert parsed > 200 and refused > 200, (parsed, refused)
    # About 3 s here; a pathological case (an expansion, a quadratic parse) would show.
    assert time.monotonic() - started < 30
