"""parse_feed: RSS 2.0, Atom 1.0 and JSON Feed 1.x documents into TrendItems, with the XML
defences (no DTD or entities; characters XML forbids marked and put back) the feed formats
share."""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from dataclasses import fields, replace
from typing import Any, cast

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException

from mdame_domain.idempotency import idempotency_key
from mdame_domain.trends.dates import parse_feed_date
from mdame_domain.trends.items import FeedError, TrendItem
from mdame_domain.trends.sizes import cap_item
from mdame_domain.trends.text import clean_html_text

ATOM_NS = "{http://www.w3.org/2005/Atom}"
CONTENT_NS = "{http://purl.org/rss/1.0/modules/content/}"
JSON_FEED_VERSION_PREFIX = "https://jsonfeed.org/version/1"


def parse_feed(text: str, source: str) -> list[TrendItem]:
    """Detect the format of `text` (RSS 2.0, Atom 1.0 or JSON Feed 1.x) and return its items.

    Strict: an item without a title raises FeedError naming its 1-based index. Item order is kept.
    Every item's text is capped (cap_item).
    """
    stripped = text.lstrip("\ufeff \t\r\n")
    if not stripped:
        raise FeedError(source, "empty document")
    if stripped.startswith("{"):
        return [cap_item(item) for item in _parse_json_feed(stripped, source)]
    if stripped.startswith("<"):
        return [cap_item(item) for item in _parse_xml_feed(stripped, source)]
    raise FeedError(source, "not RSS, Atom or JSON Feed (does not start with '<' or '{')")


def load_json(text: str, source: str, what: str) -> Any:
    """The JSON document, or a FeedError saying `text` is not `what` and why."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        problem = f"JSON parse error at line {error.lineno}: {error.msg}"
    except RecursionError:
        problem = "JSON nested too deeply"
    except ValueError as error:  # say, an integer of more digits than Python converts
        problem = f"JSON parse error: {str(error)[:200]}"
    raise FeedError(source, f"not {what} ({problem})")


def xml_root(text: str, source: str) -> ET.Element:
    """The document's root element; ET.ParseError for malformed XML (the caller words it).

    defusedxml refuses any DTD, so no entity is ever declared: no expansion attack ("billion
    laughs"), no external entity, whatever comments or processing instructions come first.
    Characters XML forbids are marked first (_mark_illegal_characters).
    """
    try:
        root = SafeET.fromstring(
            _mark_illegal_characters(text), forbid_dtd=True, forbid_entities=True
        )
    except DefusedXmlException as error:
        raise FeedError(
            source, f"DOCTYPE/ENTITY declarations are not allowed in feeds ({error})"
        ) from None
    return cast(ET.Element, root)


# Characters XML 1.0 forbids (NUL and most C0 controls, surrogates, U+FFFE/U+FFFF), raw or as
# character references. One such character in one item would make the whole document
# unparseable, so they are swapped for a private-use marker before parsing and put back in the
# items afterwards, where split_storable skips the item that carries one.
_XML_ILLEGAL_RAW = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_XML_CHAR_REF = re.compile(r"&#(?:[xX]([0-9a-fA-F]{1,8})|([0-9]{1,10}));")
_MARKER = re.compile("\ue000([0-9a-f]{1,8})\ue001")


def _xml_illegal(code: int) -> bool:
    return (
        (code < 0x20 and code not in (0x09, 0x0A, 0x0D))
        or 0xD800 <= code <= 0xDFFF
        or code in (0xFFFE, 0xFFFF)
    )


def _mark(code: int) -> str:
    return f"\ue000{code:x}\ue001"


def _mark_illegal_characters(text: str) -> str:
    def reference(match: re.Match[str]) -> str:
        code = int(match.group(1), 16) if match.group(1) else int(match.group(2))
        return _mark(code) if _xml_illegal(code) else match.group(0)

    text = _XML_ILLEGAL_RAW.sub(lambda m: _mark(ord(m.group(0))), text)
    return _XML_CHAR_REF.sub(reference, text)


def _restore(match: re.Match[str]) -> str:
    # Only what _mark made is put back: a feed may spell a marker itself, of any number.
    code = int(match.group(1), 16)
    return chr(code) if _xml_illegal(code) else match.group(0)


def _unmark(item: TrendItem) -> TrendItem:
    changes: dict[str, Any] = {
        f.name: _MARKER.sub(_restore, value)
        for f in fields(item)
        if isinstance(value := getattr(item, f.name), str) and "\ue000" in value
    }
    return replace(item, **changes) if changes else item


def _parse_xml_feed(text: str, source: str) -> list[TrendItem]:
    try:
        root = xml_root(text, source)
    except ET.ParseError as error:
        line, column = error.position
        detail = f"XML parse error at line {line}, column {column}: {error}"
        raise FeedError(source, f"not RSS, Atom or JSON Feed ({detail})") from None
    if root.tag == "rss":
        return [_unmark(item) for item in _parse_rss(root, source)]
    if root.tag == f"{ATOM_NS}feed":
        return [_unmark(item) for item in _parse_atom(root, source)]
    raise FeedError(source, f"not RSS, Atom or JSON Feed (root element <{root.tag}>)")


def _child_text(element: ET.Element, tag: str) -> str:
    child = element.find(tag)
    if child is None:
        return ""
    return "".join(child.itertext()).strip()


def _fallback_guid(source: str, url: str, title: str) -> str:
    # A stable identity for items that carry neither a guid nor a link.
    return url or idempotency_key(source, title)


def _require_title(raw_title: str, source: str, index: int) -> str:
    title = clean_html_text(raw_title)
    if not title:
        raise FeedError(source, f"item {index} has no title")
    return title


def _parse_rss(root: ET.Element, source: str) -> list[TrendItem]:
    channel = root.find("channel")
    if channel is None:
        raise FeedError(source, "RSS document has no <channel>")
    items: list[TrendItem] = []
    for index, element in enumerate(channel.findall("item"), start=1):
        title = _require_title(_child_text(element, "title"), source, index)
        url = _child_text(element, "link")
        body = _child_text(element, "description") or _child_text(element, f"{CONTENT_NS}encoded")
        items.append(
            TrendItem(
                source=source,
                title=title,
                url=url,
                summary=clean_html_text(body),
                published_at=parse_feed_date(_child_text(element, "pubDate"), rfc822_first=True),
                guid=_child_text(element, "guid") or _fallback_guid(source, url, title),
            )
        )
    return items


def _atom_link(entry: ET.Element) -> str:
    # rel="alternate" is the article itself; a link without rel means the same per RFC 4287.
    for link in entry.findall(f"{ATOM_NS}link"):
        if link.get("rel", "alternate") == "alternate" and link.get("href"):
            return link.get("href", "").strip()
    return ""


def _parse_atom(root: ET.Element, source: str) -> list[TrendItem]:
    items: list[TrendItem] = []
    for index, entry in enumerate(root.findall(f"{ATOM_NS}entry"), start=1):
        title = _require_title(_child_text(entry, f"{ATOM_NS}title"), source, index)
        url = _atom_link(entry)
        body = _child_text(entry, f"{ATOM_NS}summary") or _child_text(entry, f"{ATOM_NS}content")
        date_text = _child_text(entry, f"{ATOM_NS}published") or _child_text(
            entry, f"{ATOM_NS}updated"
        )
        items.append(
            TrendItem(
                source=source,
                title=title,
                url=url,
                summary=clean_html_text(body),
                published_at=parse_feed_date(date_text, rfc822_first=False),
                guid=_child_text(entry, f"{ATOM_NS}id") or _fallback_guid(source, url, title),
            )
        )
    return items


def _json_string(item: dict[str, Any], *keys: str) -> str:
    for key in keys:
        value = item.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return str(value)
    return ""


def _parse_json_feed(text: str, source: str) -> list[TrendItem]:
    document = load_json(text, source, "RSS, Atom or JSON Feed")
    if not isinstance(document, dict):
        raise FeedError(source, "JSON Feed must be an object")
    version = document.get("version")
    if not isinstance(version, str) or not version.startswith(JSON_FEED_VERSION_PREFIX):
        raise FeedError(source, f"not a JSON Feed (version is {version!r})")
    raw_items = document.get("items")
    if not isinstance(raw_items, list):
        raise FeedError(source, "JSON Feed has no 'items' list")
    items: list[TrendItem] = []
    for index, raw in enumerate(raw_items, start=1):
        if not isinstance(raw, dict):
            raise FeedError(source, f"item {index} is not an object")
        title = _require_title(_json_string(raw, "title"), source, index)
        url = _json_string(raw, "url", "external_url")
        body = _json_string(raw, "summary", "content_text", "content_html")
        date_text = _json_string(raw, "date_published", "date_modified")
        items.append(
            TrendItem(
                source=source,
                title=title,
                url=url,
                summary=clean_html_text(body),
                published_at=parse_feed_date(date_text, rfc822_first=False),
                guid=_json_string(raw, "id") or _fallback_guid(source, url, title),
            )
        )
    return items
