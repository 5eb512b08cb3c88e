"""Trend feeds: parse RSS 2.0 / Atom 1.0 / JSON Feed 1.1, score, dedupe and gate by volume.

The package: `items` (TrendItem, FeedError), `text` (HTML text cleaning), `dates` (feed dates),
`sizes` (the caps on an item's text), `parsing` (parse_feed and the XML defences), `storable`
(items PostgreSQL cannot store), `scoring` (score_trends) and `selection` (dedupe_trends and the
volume gate). Import the names from here.
"""

from __future__ import annotations

# Every name the module defined before it became this package is importable from here: the
# public ones are listed in __all__, the private helpers carry noqa: F401.
from mdame_domain.trends.dates import (  # noqa: F401
    _as_utc,
    _parse_iso8601,
    _parse_rfc822,
    parse_feed_date,
    timestamp_date,
)
from mdame_domain.trends.items import (
    FeedError,
    TrendItem,
)
from mdame_domain.trends.parsing import (  # noqa: F401
    _MARKER,
    _XML_CHAR_REF,
    _XML_ILLEGAL_RAW,
    ATOM_NS,
    CONTENT_NS,
    JSON_FEED_VERSION_PREFIX,
    _atom_link,
    _child_text,
    _fallback_guid,
    _json_string,
    _mark,
    _mark_illegal_characters,
    _parse_atom,
    _parse_json_feed,
    _parse_rss,
    _parse_xml_feed,
    _require_title,
    _restore,
    _unmark,
    _xml_illegal,
    load_json,
    parse_feed,
    xml_root,
)
from mdame_domain.trends.scoring import (  # noqa: F401
    KEYWORDS_FOR_FULL_RELEVANCE,
    NO_KEYWORDS_RELEVANCE,
    RECENCY_WEIGHT,
    RELEVANCE_WEIGHT,
    SUBSTANTIVE_SUMMARY_WORDS,
    SUMMARY_WEIGHT,
    UNKNOWN_DATE_RECENCY,
    ScoredTrend,
    _score_item,
    keyword_pattern,
    matching_keywords,
    recency_score,
    score_trends,
)
from mdame_domain.trends.selection import (  # noqa: F401
    _APOSTROPHES,
    _PUNCTUATION,
    SHORT_TITLE_WORDS,
    VolumeGateError,
    _is_duplicate,
    _jaccard,
    _shingles,
    dedupe_trends,
    normalize_title,
    title_similarity,
    volume_gate,
)
from mdame_domain.trends.sizes import (  # noqa: F401
    _CUT_MARK,
    GUID_MAX_BYTES,
    SUMMARY_MAX_BYTES,
    TITLE_MAX_BYTES,
    URL_MAX_BYTES,
    _cap_guid,
    _fits,
    _prefix_within,
    cap_item,
    cap_text,
    stored_size,
)
from mdame_domain.trends.storable import (
    SkippedItem,
    split_storable,
    unstorable_reason,
)
from mdame_domain.trends.text import (  # noqa: F401
    _SKIPPED_HTML_TAGS,
    _WHITESPACE,
    _TextExtractor,
    clean_html_text,
)

__all__ = [
    "ATOM_NS",
    "CONTENT_NS",
    "FeedError",
    "GUID_MAX_BYTES",
    "JSON_FEED_VERSION_PREFIX",
    "KEYWORDS_FOR_FULL_RELEVANCE",
    "NO_KEYWORDS_RELEVANCE",
    "RECENCY_WEIGHT",
    "RELEVANCE_WEIGHT",
    "SHORT_TITLE_WORDS",
    "SUBSTANTIVE_SUMMARY_WORDS",
    "SUMMARY_MAX_BYTES",
    "SUMMARY_WEIGHT",
    "ScoredTrend",
    "SkippedItem",
    "TITLE_MAX_BYTES",
    "TrendItem",
    "UNKNOWN_DATE_RECENCY",
    "URL_MAX_BYTES",
    "VolumeGateError",
    "cap_item",
    "cap_text",
    "clean_html_text",
    "dedupe_trends",
    "keyword_pattern",
    "load_json",
    "matching_keywords",
    "normalize_title",
    "parse_feed",
    "parse_feed_date",
    "recency_score",
    "score_trends",
    "split_storable",
    "stored_size",
    "timestamp_date",
    "title_similarity",
    "unstorable_reason",
    "volume_gate",
    "xml_root",
]
