"""TTS answers: speech by espeak-ng as raw 24 kHz PCM or a WAV file, and the voice a
request's speechConfig asks for."""

from __future__ import annotations

import io
import subprocess
import wave
from collections.abc import Mapping
from typing import Any

from fakes.gemini.protocol import field_of

PCM_MIME = "audio/L16;codec=pcm;rate=24000"
SAMPLE_RATE = 24_000
# Gemini counts audio at 25 tokens per second.
AUDIO_TOKENS_PER_SECOND = 25


def espeak_pcm(text: str, voice: str = "en-us") -> bytes:
    """Raw 16-bit mono PCM at 24 kHz of `text`, spoken by espeak-ng (resampled by ffmpeg)."""
    espeak = subprocess.run(
        ["espeak-ng", "-v", voice, "--stdout", text], capture_output=True, check=True
    )
    done = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", "pipe:0", "-ac", "1", "-ar", str(SAMPLE_RATE)]
        + ["-f", "s16le", "pipe:1"],
        input=espeak.stdout,
        capture_output=True,
        check=True,
    )
    return done.stdout


def wav_of(pcm: bytes) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(SAMPLE_RATE)
        writer.writeframes(pcm)
    return out.getvalue()


def espeak_voice(config: Mapping[str, Any]) -> str:
    speech = field_of(config, "speechConfig", "speech_config") or {}
    language = field_of(speech, "languageCode", "language_code")
    if isinstance(language, str) and language:
        return language.lower()
    return "en-us"


def voice_name(config: Mapping[str, Any]) -> str | None:
    speech = field_of(config, "speechConfig", "speech_config") or {}
    voice = field_of(speech, "voiceConfig", "voice_config") or {}
    prebuilt = field_of(voice, "prebuiltVoiceConfig", "prebuilt_voice_config") or {}
    name = field_of(prebuilt, "voiceName", "voice_name")
    return name if isinstance(name, str) and name else None
