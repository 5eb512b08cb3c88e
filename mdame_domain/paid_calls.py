"""What a paid model call costs, before and after: prices, estimates, request hashes, backoff.

Prices are integer micro-dollars per million tokens (so cost arithmetic is exact integers).
Defaults are the Gemini Developer API's paid-tier launch prices for the current generally
available models, as found on 2026-11-30 (ai.google.dev/gemini-api/docs/pricing as transcribed
on 2026-10-07 in api-evangelist/deepmind plans/deepmind-plans-pricing.yml; the same figures on
vercel.com/ai-gateway/models/gemini-3.8-flash and .../gemini-3.8-flash-lite-tts, and in
BerriAI/litellm discussion 42776):
  gemini-3.8-flash            $0.75 in, $3.75 out (thinking billed as output) per 1M tokens,
                              "through December 31, 2026";
  gemini-3.8-flash-tts        $0.50 text in, $9.00 audio out per 1M tokens;
  gemini-3.8-flash-lite-tts   $0.50 text in, $6.00 audio out per 1M tokens.
The TTS launch prices double on 2027-01-01: a dimension overrides prices in its YAML
(gemini_prices) without a code change.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

MICROS_PER_USD = 1_000_000
TOKENS_PER_PRICE_UNIT = 1_000_000
DEFAULT_TEXT_MODEL = "gemini-3.8-flash"
DEFAULT_TTS_MODEL = "gemini-3.8-flash-tts"
# Gemini counts generated audio at 25 tokens per second.
AUDIO_TOKENS_PER_SECOND = 25
# Bounds on a Retry-After we honour: a server asking for an hour is treated as a failure.
MAX_RETRY_AFTER_S = 120.0


@dataclass(frozen=True)
class ModelPrice:
    input_micros_per_million: int
    output_micros_per_million: int

    def __post_init__(self) -> None:
        for name in ("input_micros_per_million", "output_micros_per_million"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")


DEFAULT_PRICES: dict[str, ModelPrice] = {
    "gemini-3.8-flash": ModelPrice(750_000, 3_750_000),
    "gemini-3.8-flash-tts": ModelPrice(500_000, 9_000_000),
    "gemini-3.8-flash-lite-tts": ModelPrice(500_000, 6_000_000),
}


class UnknownPrice(LookupError):
    """A paid call to a model with no configured price: refused, never guessed."""


def price_for(model: str, overrides: Mapping[str, ModelPrice] | None = None) -> ModelPrice:
    if overrides and model in overrides:
        return overrides[model]
    if model in DEFAULT_PRICES:
        return DEFAULT_PRICES[model]
    raise UnknownPrice(
        f"no price configured for model {model!r}: add it under gemini_prices in the "
        f"dimension's YAML (known: {', '.join(sorted(DEFAULT_PRICES))})"
    )


def estimate_prompt_tokens(text: str) -> int:
    """An upper-leaning estimate of a prompt's tokens: a token covers about four characters of
    English; counting one per three UTF-8 bytes (plus the turn overhead) keeps the reservation
    above the actual for English and most other scripts."""
    return math.ceil(len(text.encode("utf-8")) / 3) + 16


def cost_micros(price: ModelPrice, prompt_tokens: int, output_tokens: int, thoughts: int) -> int:
    """Exact cost in micro-dollars, rounded up; thinking tokens are billed as output."""
    total = (
        prompt_tokens * price.input_micros_per_million
        + (output_tokens + thoughts) * price.output_micros_per_million
    )
    return -(-total // TOKENS_PER_PRICE_UNIT)


def estimate_micros(price: ModelPrice, prompt_text: str, max_output_tokens: int) -> int:
    """What to reserve: the estimated prompt plus every output token the request allows (the
    request's max_output_tokens bounds output and thinking together)."""
    return cost_micros(price, estimate_prompt_tokens(prompt_text), max_output_tokens, 0)


def speech_output_tokens(text: str, words_per_second: float = 2.0, margin: float = 1.5) -> int:
    """A cap on the audio tokens of speaking `text`: slow speech plus a margin."""
    words = max(1, len(text.split()))
    return math.ceil(words / words_per_second * margin * AUDIO_TOKENS_PER_SECOND) + 50


def request_hash(model: str, request: Any) -> str:
    """SHA-256 of the model and the canonical JSON of the request."""
    canonical = json.dumps(
        {"model": model, "request": request}, sort_keys=True, separators=(",", ":"), default=str
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date); None when
    absent or unreadable; capped at MAX_RETRY_AFTER_S."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return min(float(text), MAX_RETRY_AFTER_S)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return min(max(0.0, seconds), MAX_RETRY_AFTER_S)


# HTTP statuses of a paid call that a later try may not get: rate limits, timeouts, the
# server's own trouble. Every other 4xx refuses the request itself and fails the same again.
TRANSIENT_STATUS = frozenset({408, 429, 499})
KEY_VARIABLE = "GEMINI_API_KEY"
BASE_URL_VARIABLE = "MDAME_GEMINI_BASE_URL"


def failure_class(status: int) -> str:
    """'transient' (408, 429, 499, 5xx: a later try may succeed) or 'permanent' (any other
    4xx: the same request is refused again)."""
    return "permanent" if 400 <= status < 500 and status not in TRANSIENT_STATUS else "transient"


def refusal_scope(status: int) -> str:
    """What a permanent refusal covers: 'key' (401/403: every call with the API key),
    'model' (404: every call of the model) or 'request' (that request only)."""
    if status in (401, 403):
        return "key"
    return "model" if status == 404 else "request"


def http_cause(status: int, name: str, model: str, message: str) -> str:
    """'HTTP 503 UNAVAILABLE from gemini-3.8-flash: The model is overloaded.'"""
    head = f"HTTP {status} {name}".strip()
    text = " ".join(str(message).split())[:300]
    return f"{head} from {model}: {text}" if text else f"{head} from {model}"


def refusal_fix(status: int, *, model: str, model_field: str, dimension: str) -> str:
    """What the operator changes after a permanent refusal, and how to re-arm the calls."""
    rearm = f"then run `mdame calls retry --dimension {dimension}`"
    if status in (401, 403):
        return (
            f"the API key was refused: set {KEY_VARIABLE} to a valid Gemini API key with access "
            f"to {model}, {rearm}"
        )
    if status == 404:
        return (
            f"the endpoint does not know the model {model!r}: set {model_field} in "
            f"dimensions/{dimension}.yaml to a model it serves (a new model is called at once), "
            f"or correct {BASE_URL_VARIABLE} if the endpoint is wrong and {rearm}"
        )
    return (
        f"the request was refused as invalid: fix what builds it ({model_field} and the other "
        f"fields of dimensions/{dimension}.yaml, or the code), {rearm}"
    )


def backoff_s(attempt: int, base_s: float = 1.0, cap_s: float = 30.0) -> float:
    """Exponential backoff for retry number `attempt` (0-based)."""
    return min(cap_s, base_s * (2 ** max(0, attempt)))


def audio_mime(mime: str) -> tuple[str, int | None]:
    """("pcm", rate) for raw 16-bit PCM (audio/L16 or audio/pcm, rate from the parameters,
    24 kHz when absent), ("wav", None) for WAV; ValueError for anything else."""
    parts = [p.strip() for p in mime.split(";")]
    kind = parts[0].lower()
    params = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
    if kind in ("audio/l16", "audio/pcm"):
        rate = params.get("rate", "24000")
        if not rate.isdigit() or int(rate) <= 0:
            raise ValueError(f"unreadable sample rate in {mime!r}")
        return "pcm", int(rate)
    if kind in ("audio/wav", "audio/x-wav", "audio/wave"):
        return "wav", None
    raise ValueError(f"unsupported audio mime type {mime!r} (expected audio/L16 PCM or WAV)")
