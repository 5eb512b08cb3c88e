"""Trend scoring: recency, keyword relevance and summary quality, each item scored in [0, 1]."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from mdame_domain.trends.dates import _as_utc
from mdame_domain.trends.items import TrendItem

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
