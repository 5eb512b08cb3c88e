"""Topic repeats: the thresholds of mdame_domain.topics, justified case by case."""

from __future__ import annotations

import pytest

from mdame_domain.topics import repeat_of, same_story, topic_words

SAME = [
    # Exact, after normalisation.
    ("Apple unveils M6 chip", "apple unveils M6 chip!"),
    # A reworded headline (Jaccard 7/9 = 0.78); both are in the sample tech feed.
    (
        "Apple unveils M6 chip with faster on-device AI",
        "Apple unveils new M6 chip with faster on-device AI features",
    ),
    # A short headline and its long version: Jaccard 5/11 = 0.45, containment 5/5.
    (
        "Webb telescope spots water vapor",
        "Webb telescope spots water vapor around a young rocky planet, astronomers say",
    ),
    # Plurals and stop words do not make a new story.
    ("New enzyme breaks down PET plastic in hours", "New enzymes break down PET plastics"),
]

DIFFERENT = [
    # One shared subject word is not one story (Jaccard 1/10).
    (
        "Battery recycling plant opens in Nevada",
        "Solid-state battery startup reaches 1,000 charge cycles in lab tests",
    ),
    # A follow-up: 3 of 4 words contained (0.75), Jaccard 3/7.
    ("Apple unveils M6 chip", "Apple M6 chip review: faster, but pricier"),
    # Containment needs at least 3 words on the smaller side: "AI news" is in many headlines.
    ("AI news", "AI chip export ban news roundup"),
    # Same template, other subject.
    (
        "Raspberry Pi launches a $25 board for classroom robotics",
        "Linux 7.0 kernel lands with better power management for laptops",
    ),
]


@pytest.mark.parametrize(("left", "right"), SAME)
def test_same_story(left: str, right: str) -> None:
    assert same_story(left, right) and same_story(right, left)


@pytest.mark.parametrize(("left", "right"), DIFFERENT)
def test_different_stories(left: str, right: str) -> None:
    assert not same_story(left, right) and not same_story(right, left)


def test_words_and_first_repeat() -> None:
    assert topic_words("The chips are in the news!") == {"chip", "new"}
    assert topic_words("!!!") == frozenset()
    covered = [
        "Fusion experiment holds hot plasma for a record 22 minutes",
        "Apple unveils M6 chip",
    ]
    assert repeat_of("Apple unveils the M6 chip", covered) == "Apple unveils M6 chip"
    assert repeat_of("Bees recognize flower patterns", covered) is None
    assert repeat_of("Anything", []) is None
