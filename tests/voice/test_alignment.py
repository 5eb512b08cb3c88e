"""align_words against the Edge fake's own word timings for the same text, and the audio
helpers the Gemini fallback uses (PCM or WAV by mime type)."""

from __future__ import annotations

import asyncio
import os
import statistics
import wave
from pathlib import Path

import pytest

from fakes.edge_tts import running
from mdame_domain.speech import (
    align_words,
    audio_to_wav,
    coverage_problems,
    decode_to_wav,
    spoken_words,
    syllables,
)
from mdame_domain.voice import VoiceSynthesisError, WordTiming

TEXTS = [
    "Scientists found a planet where it rains glass sideways. Winds there beat the speed of "
    "sound, about 8,700 kilometres an hour. The planet, called HD 189733b, looks deep blue from "
    "far away, but up close it would kill you in seconds. Would you still visit it? Follow for "
    "more space facts every day.",
    "Your phone battery is lying to you. That last ten percent drains faster because the "
    "voltage curve flattens out near empty, and the software guesses. Keep it between twenty "
    "and eighty percent, and it lives years longer. Which trick do you use?",
]
MEAN_BOUND_S = 0.15
MAX_BOUND_S = 0.6


async def _edge_stream(url: str, text: str) -> tuple[bytes, list[WordTiming]]:
    import edge_tts
    import edge_tts.communicate

    edge_tts.communicate.WSS_URL = url
    communicate = edge_tts.Communicate(text, "en-US-AriaNeural", boundary="WordBoundary")
    audio, words = b"", []
    async for chunk in communicate.stream():
        if chunk["type"] == "audio":
            audio += chunk["data"]
        elif chunk["type"] == "WordBoundary":
            start = chunk["offset"] / 1e7
            words.append(WordTiming(chunk["text"], start, start + chunk["duration"] / 1e7))
    return audio, words


def test_alignment_error_against_edge_timings(tmp_path: Path) -> None:
    os.environ["NO_PROXY"] = "127.0.0.1"
    errors: list[float] = []
    with running() as server:
        for index, text in enumerate(TEXTS):
            audio, reference = asyncio.run(_edge_stream(server.wss_url, text))
            mp3 = tmp_path / f"{index}.mp3"
            mp3.write_bytes(audio)
            wav = tmp_path / f"{index}.wav"
            decode_to_wav(mp3, wav)  # the timings are stripped: only the audio is kept
            aligned = align_words(text, wav)
            assert [w.word for w in aligned] == [w.word for w in reference]
            for ref, got in zip(reference, aligned, strict=True):
                assert got.start_s < got.end_s
                errors += [abs(ref.start_s - got.start_s), abs(ref.end_s - got.end_s)]
    mean, worst = statistics.mean(errors), max(errors)
    print(f"\nalign_words vs Edge timings: mean error {mean * 1000:.0f} ms, "
          f"max {worst * 1000:.0f} ms over {len(errors) // 2} words")  # fmt: skip
    assert mean < MEAN_BOUND_S and worst < MAX_BOUND_S


def test_alignment_needs_speech(tmp_path: Path) -> None:
    silent = tmp_path / "silent.wav"
    with wave.open(str(silent), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(24000)
        wav.writeframes(b"\0" * 48000)
    with pytest.raises(VoiceSynthesisError, match="no speech"):
        align_words("Hello there.", silent)


def test_syllables_read_numbers_out() -> None:
    assert syllables("cat") < syllables("elephant")
    assert syllables("8,700") > syllables("eight")  # "eight thousand seven hundred"
    assert syllables("AI") == pytest.approx(2.2)


def test_pcm_and_wav_by_mime_type(tmp_path: Path) -> None:
    pcm = b"\x10\x00\xf0\xff" * 12000  # 24000 samples of 16-bit mono
    out = tmp_path / "pcm.wav"
    assert audio_to_wav(pcm, "audio/L16;codec=pcm;rate=24000", out) == pytest.approx(1.0)
    with wave.open(str(out), "rb") as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.readframes(2)) == (
            24000, 1, pcm[:4],
        )  # fmt: skip
    again = tmp_path / "again.wav"
    assert audio_to_wav(out.read_bytes(), "audio/wav", again) == pytest.approx(1.0, abs=0.01)
    with pytest.raises(VoiceSynthesisError, match="unsupported"):
        audio_to_wav(pcm, "text/plain", tmp_path / "x.wav")
    with pytest.raises(VoiceSynthesisError, match="no audio"):
        audio_to_wav(b"", "audio/wav", tmp_path / "y.wav")
    with pytest.raises(VoiceSynthesisError, match="decoded"):
        audio_to_wav(b"not a wav file at all", "audio/wav", tmp_path / "z.wav")


def test_coverage_problems_catch_each_shortfall() -> None:
    text = "one two three four five six seven eight nine ten"
    words = [WordTiming(w, i * 0.3, i * 0.3 + 0.25) for i, w in enumerate(spoken_words(text))]
    assert coverage_problems(text, words, 3.0) == []
    assert "word boundaries received" in " ".join(coverage_problems(text, words[:5], 3.0))
    wrong_end = [*words[:-1], WordTiming("banana", 2.7, 2.95)]
    assert "last word received" in " ".join(coverage_problems(text, wrong_end, 3.0))
    assert "run to" in " ".join(coverage_problems(text, words, 1.0))
    assert "no audio" in coverage_problems(text, words, 0.0)
    assert "too short" in " ".join(coverage_problems(text, [], 0.5))
