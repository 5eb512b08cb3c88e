"""Repeated topics: a story a dimension covered recently is not picked again.

Feeds repeat (a big story trends for days, sample feeds repeat verbatim), and trends are only
de-duplicated within one day, so the topic stage compares each candidate with the titles the
dimension covered in its lookback window.

Two titles are the same story when, after normalisation (lowercase, punctuation dropped, stop
words dropped, a plural "s" dropped), their word sets
- are equal, or
- have a Jaccard similarity of at least 0.5 (a reworded headline: "Apple unveils M6 chip with
  faster on-device AI" / "Apple unveils new M6 chip with faster on-device AI features" is 0.78),
  or
- one contains at least 80 % of the other's words, the smaller having at least 3 (a headline
  and its longer version: "Webb telescope spots water vapor" inside a 11-word headline is only
  0.45 Jaccard, but 100 % contained).
Different stories that share a subject word stay apart: "Battery recycling plant opens in
Nevada" / "Solid-state battery startup reaches 1,000 charge cycles" is 0.1. The cases are in
tests/unit/test_topics.py.
"""

from __future__ import annotations

from collections.abc import Iterable

from mdame_domain.trends import normalize_title

JACCARD_THRESHOLD = 0.5
CONTAINMENT_THRESHOLD = 0.8
MIN_CONTAINED_WORDS = 3

_STOP_WORDS = """
    a an the and or but of to in on at for from by with as is are was were be been it its
    this that these those into over after before about than then so how why what when who
    your our their his her they we you i
"""
STOP_WORDS = frozenset(_STOP_WORDS.split())


def topic_words(title: str) -> frozenset[str]:
    """The words that carry a title's meaning."""
    words = set()
    for word in normalize_title(title).split():
        if word in STOP_WORDS:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
            word = word[:-1]
        words.add(word)
    return frozenset(words)


def same_story(left: str, right: str) -> bool:
    """Whether two titles report the same story (see the module docstring for the rule)."""
    if normalize_title(left) == normalize_title(right):
        return True
    a, b = topic_words(left), topic_words(right)
    if not a or not b:
        return False
    shared = len(a & b)
    if shared / len(a | b) >= JACCARD_THRESHOLD:
        return True
    smaller = min(len(a), len(b))
    return smaller >= MIN_CONTAINED_WORDS and shared / smaller >= CONTAINMENT_THRESHOLD


def repeat_of(title: str, covered: Iterable[str]) -> str | None:
    """The first covered title that `title` repeats, or None when it is a new story."""
    return next((old for old in covered if same_story(title, old)), None)
