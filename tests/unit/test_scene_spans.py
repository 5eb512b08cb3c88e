"""Each scene's span of the voice track, from its narration and the voice's word timings: the
plain alignment (mdame_domain/scene_spans.py)."""

from __future__ import annotations

import pytest

from mdame_domain.scene_spans import number_words, scene_spans, tokens
from mdame_domain.voice import WordTiming

SCENES = [
    "Did you know glass rains sideways?",
    "The wind there is faster than sound.",
    "Scientists found it by watching starlight.",
    "Follow for more.",
]


def _timed(said: str | list[str], gap_s: float = 0.1, word_s: float = 0.3) -> list[WordTiming]:
    """Words (a list, or a text's whitespace words) said one after another, word_s each with
    gap_s between."""
    out, at = [], 0.2
    for word in said.split() if isinstance(said, str) else said:
        out.append(WordTiming(word, round(at, 3), round(at + word_s, 3)))
        at += word_s + gap_s
    return out


def _start_of(words: list[WordTiming], word: str, nth: int = 0) -> float:
    return [w.start_s for w in words if w.word == word][nth]


def test_each_scene_starts_on_its_first_spoken_word_and_ends_where_the_next_starts():
    words = _timed(" ".join(SCENES))
    timing = scene_spans(SCENES, words, total_s=words[-1].end_s + 0.4)

    assert timing.method == "words" and timing.notes == ()
    spans = timing.spans
    assert spans[0].start_s == 0.0 and spans[-1].end_s == words[-1].end_s + 0.4
    assert [s.start_s for s in spans[1:]] == [
        _start_of(words, "The"),
        _start_of(words, "Scientists"),
        _start_of(words, "Follow"),
    ]
    assert [s.first_word for s in spans[1:]] == ["The", "Scientists", "Follow"]
    assert all(a.end_s == b.start_s for a, b in zip(spans, spans[1:], strict=False))
    assert [s.how for s in spans] == ["start", "word", "word", "word"]
    assert timing.word_cuts_s == timing.cuts_s
    assert sum(timing.durations_s) == pytest.approx(words[-1].end_s + 0.4)


def test_words_spoken_differently_are_aligned_by_sequence_not_by_spelling():
    scenes = [
        "Prices rose 20% in 2024 - a well-known trend.",
        "It's the colour of money, folks!",
        "Follow for the 3rd part.",
    ]
    # A voice that reads the numbers, splits the hyphenated word, drops the dash, spells
    # 'colour' its own way and says "its".
    said = ("Prices rose twenty percent in two thousand twenty four a well known trend. "
            "its the color of money folks! Follow for the third part")  # fmt: skip
    words = _timed(said)
    timing = scene_spans(scenes, words, total_s=words[-1].end_s)

    assert timing.method == "words"
    assert timing.cuts_s == [_start_of(words, "its"), _start_of(words, "Follow")]
    assert [s.how for s in timing.spans[1:]] == ["word", "word"]


def test_a_hyphenated_timed_word_splits_its_time_between_its_parts():
    scenes = ["A story about the", "twenty-one new rules."]
    words = _timed(["A", "story", "about", "the", "twenty-one", "new", "rules."])
    # The narration says 'twenty-one' too: the scene starts with the whole timed word.
    assert scene_spans(scenes, words, 5.0).cuts_s == [_start_of(words, "twenty-one")]
    # Cut inside a timed word ('twenty' ends a scene): at its share of the word.
    inside = scene_spans(["A story about the twenty", "one new rules."], words, 5.0)
    word = next(w for w in words if w.word == "twenty-one")
    assert inside.cuts_s == [pytest.approx((word.start_s + word.end_s) / 2)]


def test_unspoken_words_fall_back_to_the_next_spoken_one_or_between_neighbours_and_say_so():
    scenes = ["One two three four.", "Five six seven eight.", "Nine ten.", "Eleven twelve."]
    # 'Five' is not said; scene 2 ('Nine ten') is not said at all.
    said = "One two three four. six seven eight. Eleven twelve."
    words = _timed(said)
    # A floor under the gap the unsaid scene is placed in, so the placement itself shows.
    timing = scene_spans(scenes, words, total_s=words[-1].end_s, min_scene_s=0.05)

    assert timing.method == "words"
    first, second, third = timing.spans[1:]
    assert (first.how, first.first_word, first.start_s) == (
        "later word", "six", _start_of(words, "six"),
    )  # fmt: skip
    assert third.start_s == _start_of(words, "Eleven")
    assert second.how == "interpolated"
    eight_end = next(w.end_s for w in words if w.word == "eight.")
    assert eight_end <= second.start_s <= third.start_s
    assert any("scene 1's first 1 word(s)" in n for n in timing.notes)
    assert any("none of scene 2's words" in n for n in timing.notes)


def test_a_voice_that_said_another_text_falls_back_to_the_weights_and_says_so():
    words = _timed("completely unrelated speech about cooking pasta tonight")
    timing = scene_spans(SCENES, words, total_s=10.0, weights=[0.1, 0.4, 0.4, 0.1])

    assert timing.method == "weights"
    assert timing.cuts_s == pytest.approx([1.0, 5.0, 9.0])
    assert [s.how for s in timing.spans[1:]] == ["weights"] * 3
    assert "the cuts follow the plan's weights" in timing.notes[0]
    # No words at all: the narrations' word counts.
    assert scene_spans(["a b", "c d"], [], 4.0).cuts_s == [2.0]


def test_a_very_short_scene_gets_the_floor_moving_its_cuts_as_little_as_possible():
    scenes = ["One two three four five.", "Six.", "Seven eight nine ten eleven."]
    words = _timed("One two three four five. Six. Seven eight nine ten eleven.",
                   gap_s=0.0, word_s=0.2)  # fmt: skip
    six, seven = _start_of(words, "Six."), _start_of(words, "Seven")
    assert seven - six == pytest.approx(0.2)  # shorter than the floor

    timing = scene_spans(scenes, words, total_s=words[-1].end_s, min_scene_s=0.5)

    first, second = timing.cuts_s
    assert second - first == pytest.approx(0.5)
    # The 0.3 s missing is shared: each cut moves 0.15 s, the least the largest move can be.
    assert first == pytest.approx(six - 0.15) and second == pytest.approx(seven + 0.15)
    assert [s.words_start_s for s in timing.spans[1:]] == [six, seven]
    assert "2 cut(s) moved" in timing.notes[-1]
    # A cut with room is not moved: only the crowded one.
    roomy = scene_spans(["One two three four five.", "Six.", "Seven eight nine ten eleven."],
                        words, total_s=words[-1].end_s, min_scene_s=0.1)  # fmt: skip
    assert roomy.cuts_s == [six, seven] and roomy.notes == ()


def test_the_floor_at_the_tracks_ends_and_a_track_too_short_for_it():
    words = _timed(["Hi.", "There", "we", "go."], gap_s=0.0, word_s=0.2)
    # 'There' starts 0.4 s in: scene 0 gets its floor of 0.5 s, and no more moves.
    timing = scene_spans(["Hi.", "There we go."], words, total_s=1.2, min_scene_s=0.5)
    assert timing.cuts_s == [pytest.approx(0.5)]
    # Three scenes in 0.9 s cannot have 0.5 s each: the floor is a third each.
    short = scene_spans(["a", "b", "c"], _timed(["a", "b", "c"], 0.0, 0.1), 0.9, min_scene_s=0.5)
    assert short.min_scene_s == pytest.approx(0.3)
    assert short.durations_s == pytest.approx([0.3, 0.3, 0.3])


def test_tokens_and_numbers_as_a_voice_says_them():
    assert tokens("It's 20% faster - 1,200 km/h!") == [
        "its", "twenty", "percent", "faster", "one", "thousand", "two", "hundred", "km", "h",
    ]  # fmt: skip
    assert tokens("Café déjà-vu") == ["cafe", "deja", "vu"]
    assert number_words("3.5") == ["three", "point", "five"]
    assert number_words("21st") == ["twenty", "first"]
    assert number_words("40th") == ["fortieth"]
    assert number_words("1000000") == ["one", "million"]


def test_bad_input_is_refused():
    with pytest.raises(ValueError):
        scene_spans([], [], 3.0)
    with pytest.raises(ValueError):
        scene_spans(["a"], [], 0.0)
