"""The JSON body of a 200 answer to generateContent, by what the request asks for: text,
speech, a picture, or a judgement of pictures."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from typing import Any

from fakes.gemini.generator import SchemaGenerator
from fakes.gemini.judge import inline_images, judgement
from fakes.gemini.pictures import picture_answer
from fakes.gemini.protocol import (
    BadRequest,
    broken_for,
    count_tokens,
    field_of,
    schema_of,
    text_of,
    thought_tokens,
    usage_metadata,
)
from fakes.gemini.speech import (
    AUDIO_TOKENS_PER_SECOND,
    PCM_MIME,
    SAMPLE_RATE,
    espeak_pcm,
    espeak_voice,
    voice_name,
    wav_of,
)
from fakes.gemini.state import FakeGemini, Fault


def answer(state: FakeGemini, body: Mapping[str, Any], fault: Fault | None) -> dict[str, Any]:
    """The JSON body of a 200 answer to a generateContent request (faults that are a 200)."""
    config = field_of(body, "generationConfig", "generation_config") or {}
    prompt = text_of(body.get("contents"))
    # The system instruction is billed as prompt tokens too.
    system = text_of(field_of(body, "systemInstruction", "system_instruction") or [])
    billed = f"{system}\n{prompt}" if system else prompt
    modalities = [
        str(m).upper() for m in field_of(config, "responseModalities", "response_modalities") or []
    ]
    kind = fault.kind if fault else None
    if kind == "safety":
        return {
            "promptFeedback": {"blockReason": "SAFETY", "safetyRatings": []},
            "usageMetadata": usage_metadata(billed, 0, 0),
        }
    if kind == "empty":
        return {"candidates": [], "usageMetadata": usage_metadata(billed, 0, 0)}
    if kind == "safety_finish":
        return {
            "candidates": [{"finishReason": "SAFETY", "index": 0, "safetyRatings": []}],
            "usageMetadata": usage_metadata(billed, 0, 0),
        }
    if "IMAGE" in modalities:
        return picture_answer(state, config, prompt, billed, kind)
    images = inline_images(body.get("contents"))
    if images:
        return judgement(state, config, prompt, billed, images, kind)
    if "AUDIO" in modalities:
        if voice_name(config) is None:
            raise BadRequest("speechConfig.voiceConfig.prebuiltVoiceConfig.voiceName is required")
        pcm = espeak_pcm(prompt or " ", espeak_voice(config))
        data, mime = (wav_of(pcm), "audio/wav") if state.tts_format == "wav" else (pcm, PCM_MIME)
        seconds = len(pcm) / 2 / SAMPLE_RATE
        part = {"inlineData": {"mimeType": mime, "data": base64.b64encode(data).decode()}}
        return {
            "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}],
            "usageMetadata": usage_metadata(
                billed, math.ceil(seconds * AUDIO_TOKENS_PER_SECOND), 0
            ),
        }
    schema = schema_of(config)
    mime = field_of(config, "responseMimeType", "response_mime_type")
    if kind == "schema":
        text = json.dumps(broken_for(schema))
    elif mime == "application/json" and schema is not None:
        text = json.dumps(SchemaGenerator(prompt, state).value(schema, "$"), ensure_ascii=False)
    else:
        text = SchemaGenerator(prompt, state).sentences(24, "$")
    finish = "STOP"
    if kind == "max_tokens":
        text, finish = text[: max(1, len(text) // 2)], "MAX_TOKENS"
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": text}]},
                "finishReason": finish,
                "index": 0,
            }
        ],
        "usageMetadata": usage_metadata(billed, count_tokens(text), thought_tokens(config)),
        "modelVersion": "fake-gemini",
    }
