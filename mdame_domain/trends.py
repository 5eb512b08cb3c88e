"""Trend feeds: parse RSS 2.0 / Atom 1.0 / JSON Feed 1.1, score, dedupe and gate by volume."""

from __future__ import annotations

import hashlib
import json
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from html import unescape
from html.parser import HTMLParser
from typing import Any, cast

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException

from mdame_domain.idempotency import idempotency_key

ATOM_NS = "{http://www.w3.org/2005/Atom}"
CONTENT_NS = "{http://purl.org/rss/1.0/modules/content/}"
JSON_FEED_VERSION_PREFIX = "https://jsonfeed.org/version/1"


@dataclass(frozen=True)
class TrendItem:
    source: str
    title: str
    url: str
    summary: str
    published_at: datetime | None
    guid: str


class FeedError(ValueError):
    """A feed that cannot be read; the message names the feed source and what is wrong."""

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(f"feed {source!r}: {problem}")
        self.source = source
        self.problem = problem


class VolumeGateError(ValueError):
    """Too few trends survived scoring, dedupe and safety to make a day's run worthwhile."""


# --- text cleaning ---------------------------------------------------------------------------

_SKIPPED_HTML_TAGS = frozenset({"script", "style", "noscript", "template"})
_WHITESPACE = re.compile(r"\s+")


class _TextExtractor(HTMLParser):
    """Collects the visible text of an HTML fragment; tags become spaces so words do not fuse."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.chunks: list[str] = []
        self._skip_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED_HTML_TAGS:
            self._skip_depth += 1
        self.chunks.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED_HTML_TAGS and self._skip_depth:
            self._skip_depth -= 1
        self.chunks.append(" ")

    def handle_data(self, data: str) -> None:
        if not self._skip_depth:
            self.chunks.append(data)


def clean_html_text(text: str) -> str:
    """Strip tags, unescape entities (also double-escaped ones) and collapse whitespace."""
    if not text:
        return ""
    extractor = _TextExtractor()
    extractor.feed(text)
    extractor.close()
    # A second unescape catches feeds that escape their HTML twice ("&amp;amp;").
    visible = unescape("".join(extractor.chunks))
    return _WHITESPACE.sub(" ", visible).strip()


# --- dates -----------------------------------------------------------------------------------


def _as_utc(moment: datetime) -> datetime:
    # Naive timestamps in feeds are taken as UTC, so comparisons never mix naive and aware.
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _parse_rfc822(value: str) -> datetime | None:
    try:
        return _as_utc(parsedate_to_datetime(value))
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _parse_iso8601(value: str) -> datetime | None:
    try:
        # OverflowError: year 1 or 9999 with an offset has no UTC equivalent.
        return _as_utc(datetime.fromisoformat(value))
    except (ValueError, OverflowError):
        return None


def timestamp_date(value: Any) -> datetime | None:
    """A Unix timestamp as a UTC datetime; None for anything else, NaN, infinities or a moment
    outside datetime's range (one odd date leaves its item undated, never fails the feed)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def parse_feed_date(value: str | None, *, rfc822_first: bool) -> datetime | None:
    """Parse a feed date; feeds mix formats in practice, so the other format is the fallback."""
    if not value or not value.strip():
        return None
    value = value.strip()
    parsers = (_parse_rfc822, _parse_iso8601) if rfc822_first else (_parse_iso8601, _parse_rfc822)
    for parser in parsers:
        parsed = parser(value)
        if parsed is not None:
            return parsed
    return None


# --- item size -------------------------------------------------------------------------------

# Caps on an item's text, in bytes as PostgreSQL keeps it in JSON (UTF-8, a control character
# escaped to six bytes), since that is what record_trends' 256 KiB limit counts. The stage
# records up to 20 items in one call; at these caps they take under half of it, whatever the
# feed wrote. A Reddit title (300 characters at most) fits whole in any Latin or Cyrillic text.
TITLE_MAX_BYTES = 600
SUMMARY_MAX_BYTES = 2_000
URL_MAX_BYTES = 2_048  # the longest URL browsers and sitemaps reliably accept
GUID_MAX_BYTES = 512
_CUT_MARK = "…"


def stored_size(text: str) -> int:
    """Bytes of `text` as a JSON string in PostgreSQL (without its quotes)."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")) - 2


def _fits(text: str, max_bytes: int) -> bool:
    # Every character takes at least one byte: a longer text cannot fit, and is not measured.
    return len(text) <= max_bytes and stored_size(text) <= max_bytes


def _prefix_within(text: str, max_bytes: int) -> str:
    """The longest prefix of `text` within max_bytes. A str slice cuts between code points,
    never inside a character's UTF-8 bytes, so what is kept is still valid text."""
    text = text[:max_bytes]
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if stored_size(text[:middle]) <= max_bytes:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def cap_text(text: str, max_bytes: int) -> str:
    """`text` itself when it fits, else its longest prefix that fits with a mark of the cut."""
    if _fits(text, max_bytes):
        return text
    return _prefix_within(text, max_bytes - stored_size(_CUT_MARK)).rstrip() + _CUT_MARK


def _cap_guid(guid: str) -> str:
    # A guid is the item's identity: one over the cap keeps a prefix plus a hash of the whole,
    # so two long guids that share a prefix stay two items.
    if _fits(guid, GUID_MAX_BYTES):
        return guid
    digest = hashlib.sha256(guid.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return _prefix_within(guid, GUID_MAX_BYTES - len(digest) - 1) + "#" + digest


def cap_item(item: TrendItem) -> TrendItem:
    """The item with every text field within its cap. A URL over its cap is dropped, not cut:
    a cut URL points somewhere else."""
    return replace(
        item,
        title=cap_text(item.title, TITLE_MAX_BYTES),
        summary=cap_text(item.summary, SUMMARY_MAX_BYTES),
        url=item.url if _fits(item.url, URL_MAX_BYTES) else "",
        guid=_cap_guid(item.guid),
    )


# --- parsing ---------------------------------------------------------------------------------


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


# --- storable items --------------------------------------------------------------------------


@dataclass(frozen=True)
class SkippedItem:
    """A feed item left out of the stage, and why (for the log and the run's metadata)."""

    source: str
    guid: str
    reason: str

    def __str__(self) -> str:
        return f"feed {self.source!r} item {self.guid[:80]!r}: {self.reason}"


def unstorable_reason(item: TrendItem) -> str | None:
    """Why PostgreSQL could not store the item's text (NUL, a lone surrogate), or None."""
    for f in fields(item):
        value = getattr(item, f.name)
        if not isinstance(value, str):
            continue
        if "\x00" in value:
            return f"{f.name} contains a NUL character (U+0000)"
        bad = next((c for c in value if "\ud800" <= c <= "\udfff"), None)
        if bad is not None:
            return f"{f.name} contains a lone surrogate (U+{ord(bad):04X})"
    return None


def split_storable(items: Iterable[TrendItem]) -> tuple[list[TrendItem], list[SkippedItem]]:
    """The items that can be stored, and the ones skipped: one bad item never fails the stage."""
    kept: list[TrendItem] = []
    skipped: list[SkippedItem] = []
    for item in items:
        reason = unstorable_reason(item)
        if reason is None:
            kept.append(item)
        else:
            guid = item.guid.encode("utf-8", "backslashreplace").decode("utf-8")
            skipped.append(SkippedItem(item.source, guid.replace("\x00", "\\x00"), reason))
    return kept, skipped


# --- scoring ---------------------------------------------------------------------------------

RECENCY_WEIGHT = 0.45
RELEVANCE_WEIGHT = 0.45
SUMMARY_WEIGHT = 0.10
UNKNOWN_DATE_RECENCY = 0.5
NO_KEYWORDS_RELEVANCE = 0.5
KEYWORDS_FOR_FULL_RELEVANCE = 3
SUBSTANTIVE_SUMMARY_WORDS = 12


@dataclass(frozen=True)
class ScoredTrend:
    item: TrendItem
    score: float
    matched_keywords: tuple[str, ...]


def keyword_pattern(keyword: str) -> re.Pattern[str]:
    """Case-insensitive whole-word match (plural s/es allowed); any spacing/hyphen inside."""
    words = [re.escape(word) for word in re.split(r"[\s\-]+", keyword.strip()) if word]
    body = r"[\s\-]+".join(words)
    return re.compile(rf"(?<!\w){body}(?:s|es)?(?!\w)", re.IGNORECASE)


def matching_keywords(text: str, keywords: Sequence[str]) -> tuple[str, ...]:
    """Keywords (stripped, first spelling kept, in the given order) that occur in `text`."""
    matched: list[str] = []
    seen: set[str] = set()
    for keyword in keywords:
        cleaned = keyword.strip()
        if not cleaned or cleaned.lower() in seen:
            continue
        seen.add(cleaned.lower())
        if keyword_pattern(cleaned).search(text):
            matched.append(cleaned)
    return tuple(matched)


def recency_score(published_at: datetime | None, now: datetime, half_life_hours: float) -> float:
    if published_at is None:
        return UNKNOWN_DATE_RECENCY
    age_hours = max(0.0, (_as_utc(now) - published_at).total_seconds() / 3600.0)
    return math.pow(0.5, age_hours / half_life_hours)


def score_trends(
    items: Iterable[TrendItem],
    keywords: Sequence[str],
    now: datetime,
    half_life_hours: float = 24.0,
) -> list[ScoredTrend]:
    """Score items in [0, 1] and sort by score (desc), then title, then url.

    score = 0.45 * recency + 0.45 * relevance + 0.10 * summary_quality, where
      recency         = 0.5 ** (age_hours / half_life_hours); future dates count as age 0;
                        an unknown date gets the neutral 0.5
      relevance       = min(1, matched / min(3, len(keywords))), matching keywords
                        case-insensitively as whole words in title + summary;
                        0.5 (neutral) when no keywords are configured
      summary_quality = min(1, summary_words / 12): a substantive summary gives a small bonus
    """
    if half_life_hours <= 0:
        raise ValueError(f"half_life_hours must be positive, got {half_life_hours}")
    active_keywords = [keyword for keyword in keywords if keyword.strip()]
    scored = [_score_item(item, active_keywords, now, half_life_hours) for item in items]
    return sorted(scored, key=lambda s: (-s.score, s.item.title, s.item.url))


def _score_item(
    item: TrendItem, keywords: Sequence[str], now: datetime, half_life_hours: float
) -> ScoredTrend:
    matched = matching_keywords(f"{item.title} {item.summary}", keywords)
    if keywords:
        needed = min(KEYWORDS_FOR_FULL_RELEVANCE, len({k.strip().lower() for k in keywords}))
        relevance = min(1.0, len(matched) / needed)
    else:
        relevance = NO_KEYWORDS_RELEVANCE
    summary_quality = min(1.0, len(item.summary.split()) / SUBSTANTIVE_SUMMARY_WORDS)
    score = (
        RECENCY_WEIGHT * recency_score(item.published_at, now, half_life_hours)
        + RELEVANCE_WEIGHT * relevance
        + SUMMARY_WEIGHT * summary_quality
    )
    # Rounded so reports and tie-breaks do not hinge on the last float bits.
    return ScoredTrend(
        item=item, score=round(min(1.0, max(0.0, score)), 6), matched_keywords=matched
    )


# --- dedupe ----------------------------------------------------------------------------------

SHORT_TITLE_WORDS = 12
_APOSTROPHES = re.compile(r"['\u2019]")
_PUNCTUATION = re.compile(r"[^\w\s]|_")


def normalize_title(title: str) -> str:
    """Lowercase, drop apostrophes ("AI's" -> "ais"), turn other punctuation into spaces."""
    lowered = _APOSTROPHES.sub("", title.lower())
    return _WHITESPACE.sub(" ", _PUNCTUATION.sub(" ", lowered)).strip()


def _jaccard(left: set[Any], right: set[Any]) -> float:
    if not left and not right:
        return 1.0
    return len(left & right) / len(left | right)


def _shingles(words: list[str], size: int = 3) -> set[tuple[str, ...]]:
    if len(words) < size:
        return {tuple(words)}
    return {tuple(words[i : i + size]) for i in range(len(words) - size + 1)}


def title_similarity(left: str, right: str) -> float:
    """Jaccard of word 3-shingles; for short titles (<= 12 words) the word-set Jaccard if higher.

    Headlines are short, and a reworded headline shares its words but few 3-word runs.
    """
    left_words = normalize_title(left).split()
    right_words = normalize_title(right).split()
    similarity = _jaccard(_shingles(left_words), _shingles(right_words))
    if min(len(left_words), len(right_words)) <= SHORT_TITLE_WORDS:
        similarity = max(similarity, _jaccard(set(left_words), set(right_words)))
    return similarity


def _is_duplicate(candidate: ScoredTrend, kept: ScoredTrend, near_threshold: float) -> bool:
    if candidate.item.url and candidate.item.url == kept.item.url:
        return True
    if normalize_title(candidate.item.title) == normalize_title(kept.item.title):
        return True
    return title_similarity(candidate.item.title, kept.item.title) >= near_threshold


def dedupe_trends(scored: Sequence[ScoredTrend], near_threshold: float = 0.6) -> list[ScoredTrend]:
    """Drop exact (same normalized title or url) and near duplicates, keeping the higher score.

    Candidates are considered best-first (ties: earlier first); survivors keep the input order.
    """
    best_first = sorted(range(len(scored)), key=lambda i: (-scored[i].score, i))
    kept_indexes: list[int] = []
    for index in best_first:
        candidate = scored[index]
        if not any(_is_duplicate(candidate, scored[k], near_threshold) for k in kept_indexes):
            kept_indexes.append(index)
    return [scored[i] for i in sorted(kept_indexes)]


def volume_gate(scored: Sequence[ScoredTrend], min_items: int, max_items: int) -> list[ScoredTrend]:
    """Return the top `max_items` by score; raise VolumeGateError when fewer than `min_items`."""
    if min_items < 0 or max_items < 1 or min_items > max_items:
        raise ValueError(
            f"invalid volume gate bounds: min_items={min_items}, max_items={max_items}"
        )
    if len(scored) < min_items:
        raise VolumeGateError(
            f"volume gate: {len(scored)} trend(s) passed, at least {min_items} required"
        )
    ranked = sorted(scored, key=lambda s: -s.score)  # stable: equal scores keep input order
    return ranked[:max_items]
