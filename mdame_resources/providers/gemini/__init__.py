"""Gemini through the official google-genai SDK: one client factory (client.py), one paid-call
path (paid.py), reading answers (output.py), speech (speech.py) and the health check of the key
and the configured models (health.py). What callers use is exported here."""

from mdame_resources.providers.gemini.client import make_client
from mdame_resources.providers.gemini.output import json_config, response_json
from mdame_resources.providers.gemini.paid import (
    ModelBlocked,
    PaidCaller,
    PaidCallFailed,
    PaidCallInFlight,
    PaidCallRefused,
    PaidCallTransient,
    PaidCallUnknown,
    PaidResult,
)
from mdame_resources.providers.gemini.speech import (
    as_wav,
    audio_seconds,
    pcm_to_wav,
    synthesize_speech,
    write_wav,
)

__all__ = [
    "ModelBlocked",
    "PaidCallFailed",
    "PaidCallInFlight",
    "PaidCallRefused",
    "PaidCallTransient",
    "PaidCallUnknown",
    "PaidCaller",
    "PaidResult",
    "as_wav",
    "audio_seconds",
    "json_config",
    "make_client",
    "pcm_to_wav",
    "response_json",
    "synthesize_speech",
    "write_wav",
]
