"""Gemini TTS through the paid-call path, and its audio as WAV."""

from __future__ import annotations

import io
import wave
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdame_domain.idempotency import idempotency_key
from mdame_domain.model_output import InvalidModelOutput
from mdame_domain.paid_calls import DEFAULT_TTS_MODEL, audio_mime, speech_output_tokens
from mdame_resources.providers.budget import CallContext
from mdame_resources.providers.gemini.client import make_client
from mdame_resources.providers.gemini.output import short
from mdame_resources.providers.gemini.paid import PaidCaller

if TYPE_CHECKING:  # the SDK is imported with the first client (client.make_client)
    from google import genai
    from google.genai import types


def pcm_to_wav(pcm: bytes, rate: int = 24_000) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(pcm)
    return out.getvalue()


def as_wav(audio: bytes, mime: str) -> bytes:
    """WAV bytes from Gemini's audio: raw L16 PCM is wrapped, WAV passes through."""
    kind, rate = audio_mime(mime)
    return pcm_to_wav(audio, rate or 24_000) if kind == "pcm" else audio


def audio_seconds(audio: bytes, mime: str) -> float:
    kind, rate = audio_mime(mime)
    if kind == "pcm":
        return len(audio) / 2 / (rate or 24_000)
    with wave.open(io.BytesIO(audio), "rb") as reader:
        return reader.getnframes() / reader.getframerate()


def write_wav(path: Path, audio: bytes, mime: str) -> Path:
    """Writes Gemini's audio (PCM or WAV, by mime type) as a WAV file at `path`."""
    path.write_bytes(as_wav(audio, mime))
    return path


def _audio_parser(text: str, min_seconds_per_word: float) -> Callable[[Any], tuple[bytes, str]]:
    def parse(response: types.GenerateContentResponse) -> tuple[bytes, str]:
        candidate = response.candidates[0] if response.candidates else None
        parts = candidate.content.parts if candidate and candidate.content else None
        blob = next((p.inline_data for p in parts or [] if p.inline_data), None)
        if blob is None or not blob.data or not blob.mime_type:
            raise InvalidModelOutput("the answer carries no audio")
        try:
            seconds = audio_seconds(blob.data, blob.mime_type)
        except (ValueError, wave.Error) as exc:
            raise InvalidModelOutput(f"unreadable audio: {short(exc)}") from None
        needed = len(text.split()) * min_seconds_per_word
        if seconds < needed:
            raise InvalidModelOutput(f"the audio lasts {seconds:.2f}s, too short for the text")
        return blob.data, blob.mime_type

    return parse


def synthesize_speech(
    text: str,
    voice_name: str,
    *,
    ctx: CallContext,
    api_key: str,
    model: str | None = None,
    language_code: str | None = None,
    work_key: str | None = None,
    base_url: str | None = None,
    timeout_s: float = 120.0,
    max_attempts: int = 2,
    min_seconds_per_word: float = 0.15,
    client: genai.Client | None = None,
) -> tuple[bytes, str]:
    """Gemini TTS through the paid-call path: (audio bytes, mime type). The mime type is
    `audio/L16;codec=pcm;rate=24000` (raw PCM) or `audio/wav`, as the model answers; `as_wav`
    and `write_wav` turn either into a WAV file. Raises BudgetExhausted, ModelBlocked,
    PaidCallTransient, PaidCallRefused or PaidCallFailed (missing, unreadable or too-short
    audio included)."""
    if not text.strip():
        raise ValueError("synthesize_speech needs text")
    model = model or ctx.dimension.gemini_tts_model or DEFAULT_TTS_MODEL
    from google.genai import types

    speech = types.SpeechConfig(
        voice_config=types.VoiceConfig(
            prebuilt_voice_config=types.PrebuiltVoiceConfig(voice_name=voice_name)
        ),
        language_code=language_code,
    )
    config = types.GenerateContentConfig(
        response_modalities=["AUDIO"],
        speech_config=speech,
        max_output_tokens=speech_output_tokens(text),
    )
    key = work_key or idempotency_key(
        "gemini-tts", ctx.dimension.slug, model, voice_name, language_code or "", text
    )
    caller = PaidCaller(
        client or make_client(api_key, base_url, timeout_s), ctx, max_attempts=max_attempts
    )
    result = caller.call(
        work_key=key,
        model=model,
        contents=text,
        config=config,
        parse=_audio_parser(text, min_seconds_per_word),
        store_result=False,  # audio is too big for the ledger; a repeat pays again
    )
    audio, mime = result.value
    return audio, mime
