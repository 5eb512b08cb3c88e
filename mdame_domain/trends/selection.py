"""Which scored trends go on: exact and near duplicates dropped (dedupe_trends), then the volume
gate (at least a minimum, at most a maximum, best first)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from mdame_domain.trends.scoring import ScoredTrend
from mdame_domain.trends.text import _WHITESPACE


class VolumeGateError(ValueError):
    """Too few trends survived scoring, dedupe and safety to make a day's run worthwhile."""


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
