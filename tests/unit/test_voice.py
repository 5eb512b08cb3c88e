"""espeak-ng voice: phrase splitting, word timings, and real synthesis."""

from __future__ import annotations

import wave

import pytest

from mdame_domain.voice import (
    SENTENCE_PAUSE_S,
    VoiceSynthesisError,
    WordTiming,
    split_phrases,
    synthesize_espeak,
    word_timings,
)


def test_split_phrases_by_sentence_then_six_words() -> None:
    chunks = split_phrases("One two three four five six seven eight. Nine ten! Eleven?")
    assert [c.words for c in chunks] == [
        ("One", "two", "three", "four", "five", "six"),
        ("seven", "eight."),
        ("Nine", "ten!"),
        ("Eleven?",),
    ]
    assert [c.ends_sentence for c in chunks] == [False, True, True, True]
    assert split_phrases("   ") == []


def test_bare_punctuation_sticks_to_a_word() -> None:
    (chunk,) = split_phrases("Wait - really ...")
    assert chunk.words == ("Wait -", "really ...")


def test_word_timings_are_proportional_to_length() -> None:
    timings = word_timings(("a", "abcd"), start_s=1.0, duration_s=1.0)
    assert timings == [WordTiming("a", 1.0, 1.2), WordTiming("abcd", 1.2, 2.0)]


def test_synthesize_short_text_has_real_timings(tmp_path) -> None:
    out = str(tmp_path / "voice.wav")
    text = "Glass rains sideways on this planet. Winds beat the speed of sound."
    track = synthesize_espeak(text, "en-us", out)
    with wave.open(out, "rb") as wav:
        assert wav.getnchannels() == 1 and wav.getsampwidth() == 2
        assert track.sample_rate == wav.getframerate()
        assert track.duration_s == pytest.approx(wav.getnframes() / wav.getframerate(), abs=0.01)
    assert 2.0 < track.duration_s < 8.0
    assert [w.word for w in track.words] == text.split()
    for earlier, later in zip(track.words, track.words[1:], strict=False):
        assert earlier.start_s < earlier.end_s <= later.start_s
    assert track.words[-1].end_s == pytest.approx(track.duration_s, abs=0.01)
    sentence_gap = track.words[6].start_s - track.words[5].end_s
    assert sentence_gap == pytest.approx(SENTENCE_PAUSE_S, abs=0.01)


def test_faster_speech_is_shorter(tmp_path) -> None:
    text = "A short line to time at two speeds."
    slow = synthesize_espeak(text, "en-us", str(tmp_path / "slow.wav"), words_per_minute=130)
    fast = synthesize_espeak(text, "en-us", str(tmp_path / "fast.wav"), words_per_minute=260)
    assert fast.duration_s < slow.duration_s * 0.75


@pytest.mark.parametrize("text", ["", "   \n "])
def test_empty_text_is_refused(tmp_path, text) -> None:
    with pytest.raises(VoiceSynthesisError, match="empty"):
        synthesize_espeak(text, "en-us", str(tmp_path / "v.wav"))


def test_unknown_voice_is_refused(tmp_path) -> None:
    with pytest.raises(VoiceSynthesisError, match="no-such-voice"):
        synthesize_espeak("Hello there.", "no-such-voice", str(tmp_path / "v.wav"))


def test_silent_output_is_refused(tmp_path) -> None:
    with pytest.raises(VoiceSynthesisError, match="silence"):
        synthesize_espeak("... ---", "en-us", str(tmp_path / "v.wav"))
