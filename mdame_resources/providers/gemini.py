"""Gemini through the official google-genai SDK: one client factory and one paid-call path.

Every Gemini request goes through `PaidCaller.call`:
  1. begin_paid_call: an earlier call of the same work key whose outcome is unknown is settled
     at its estimate (an LLM call cannot be looked up); the same request that already succeeded
     returns its stored answer (never paid twice); else the estimate (prompt tokens estimated +
     max output tokens, times the model's price) is reserved under the dimension's daily cap
     and the attempt recorded 'submitted' with the request's hash. No room: BudgetExhausted.
  2. the SDK call (its own retries are off; the timeout is explicit).
  3. settle_paid_call with the usage metadata (thinking tokens at the output rate), or
     release_paid_call on a definite refusal, or mark_paid_call_unknown when the request was
     sent and no answer came (timeout, dropped connection): the reservation stays held.
Billing decisions for answers that are not usable:
  - 4xx/5xx (429 included): Google does not bill a refused request: released.
  - a 200 with a safety block (promptFeedback.blockReason, finishReason SAFETY) or empty
    candidates: settled at the usage the answer reports (the prompt was processed and counted;
    0 when it reports none). A block is a definite decision: no retry (ModelBlocked).
  - a 200 whose body is not JSON: settled at the estimate (it was served; its usage is lost).
  - a 200 whose JSON breaks the schema, the length or the language: settled at its usage.
Retries (429 after Retry-After, 5xx, unreadable or invalid answers) are new attempts in the
ledger, with backoff, bounded by `max_attempts` failed attempts per work key across runs.

The API key comes from dg.EnvVar("GEMINI_API_KEY") and is never logged, stored or put in an
error message; the endpoint from MDAME_GEMINI_BASE_URL when set (a gateway, or fakes).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import time
import wave
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
from google import genai
from google.genai import errors, types

from mdame_domain.idempotency import idempotency_key
from mdame_domain.model_output import InvalidModelOutput
from mdame_domain.paid_calls import (
    DEFAULT_TTS_MODEL,
    audio_mime,
    backoff_s,
    cost_micros,
    estimate_micros,
    estimate_prompt_tokens,
    parse_retry_after,
    price_for,
    request_hash,
    speech_output_tokens,
)
from mdame_resources.alerts import raise_environment_alert
from mdame_resources.providers.budget import BudgetExhausted, CallContext

BASE_URL_ENV = "MDAME_GEMINI_BASE_URL"
API_VERSION = "v1beta"  # the SDK's default is v1, which lacks some generation fields
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_ATTEMPTS = 4
# A paid call's lease outlives its lock by the longest single request.
GRACE_S = 180
_BLOCK_FINISH = {"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY"}
_RETRYABLE_STATUS = {429, 500, 502, 503, 504}


def _http_modules() -> list[ModuleType]:
    """google-genai talks through httpx, or its fork httpx2 in recent releases: both raise
    their own transport exceptions."""
    modules: list[ModuleType] = [httpx]
    with contextlib.suppress(ImportError):
        modules.append(importlib.import_module("httpx2"))
    return modules


def _errors(*names: str) -> tuple[type[BaseException], ...]:
    return tuple(getattr(m, n) for m in _http_modules() for n in names if hasattr(m, n))


# Nothing reached the server: a definite failure, nothing billed.
_NOT_SENT = _errors("ConnectError", "ConnectTimeout", "PoolTimeout")
# Sent, and no answer: the outcome is unknown.
_NO_ANSWER = _errors("TimeoutException", "TransportError")


class PaidCallFailed(RuntimeError):
    """A paid call that gave no usable answer (after its bounded retries)."""


class ModelBlocked(PaidCallFailed):
    """Gemini itself refused the content (blockReason, or finishReason SAFETY)."""


class PaidCallUnknown(PaidCallFailed):
    """The request was sent and no answer came: its reservation stays held, and the next run
    settles it at the estimate before retrying."""


class PaidCallInFlight(PaidCallFailed):
    """Another holder's call of this work key may still be running: retried later."""


def make_client(
    api_key: str, base_url: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S
) -> genai.Client:
    """The one Gemini client: key from the caller (dg.EnvVar), base URL from the argument or
    MDAME_GEMINI_BASE_URL, api_version pinned, SDK retries off, an explicit timeout (the SDK
    has none by default, so a hung server would block forever)."""
    if not api_key:
        raise ValueError("GEMINI_API_KEY is empty: set it (the key is required even locally)")
    options = types.HttpOptions(
        base_url=base_url or os.environ.get(BASE_URL_ENV) or None,
        api_version=API_VERSION,
        timeout=int(timeout_s * 1000),
        retry_options=None,
    )
    return genai.Client(api_key=api_key, http_options=options)


@dataclass(frozen=True)
class PaidResult:
    value: Any  # what `parse` returned (JSON data for text calls, (bytes, mime) for audio)
    spent_micros: int
    attempt_id: int
    cached: bool = False  # the stored answer of an earlier identical call: nothing was paid


@dataclass(frozen=True)
class _Outcome:
    status: str  # "settle_ok", "settle_failed", "release", "unknown"
    detail: dict[str, Any]
    actual_micros: int = 0


def _short(text: Any, limit: int = 300) -> str:
    return " ".join(str(text).split())[:limit]


class PaidCaller:
    """Makes paid Gemini calls for one dimension under the step's fence (see module doc)."""

    def __init__(
        self,
        client: genai.Client,
        ctx: CallContext,
        *,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff_base_s: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client, self.ctx = client, ctx
        self.max_attempts, self.backoff_base_s, self.sleep = max_attempts, backoff_base_s, sleep

    def call(
        self,
        *,
        work_key: str,
        model: str,
        contents: str,
        config: types.GenerateContentConfig,
        parse: Callable[[types.GenerateContentResponse], Any],
        store_result: bool = True,
    ) -> PaidResult:
        """One paid request, retried through the ledger; `parse` turns the answer into the
        value (raising InvalidModelOutput for an answer that is not usable)."""
        price = price_for(model, self.ctx.prices)
        max_output = config.max_output_tokens
        if not max_output:
            raise ValueError("a paid call needs max_output_tokens: it bounds the reservation")
        system = str(config.system_instruction or "")
        estimate = estimate_micros(price, f"{system}\n{contents}", max_output)
        wire = config.model_dump(mode="json", exclude_none=True)
        digest = request_hash(model, {"contents": contents, "config": wire})
        last_error = "no attempt made"
        for retry in range(self.max_attempts):
            self.ctx.checkpoint()
            start = self.ctx.state.begin_paid_call(
                self.ctx.dimension.slug,
                work_key,
                f"gemini:{model}",
                digest,
                estimate,
                self.ctx.dimension.daily_budget_micros,
                self.max_attempts,
                GRACE_S,
                {"model": model},
            )
            if start.action == "done":
                return PaidResult(start.result, 0, int(start.attempt_id or 0), cached=True)
            if start.action == "budget_exhausted":
                refused = BudgetExhausted(self.ctx.dimension.slug, start.period, estimate)
                raise_environment_alert(
                    self.ctx.state, self.ctx.dimension.slug, "budget_cap", str(refused)
                )
                raise refused
            if start.action == "in_flight":
                raise PaidCallInFlight(
                    f"Gemini call {work_key} of {self.ctx.dimension.slug!r} may still be in "
                    "flight under another run: retried after its lease"
                )
            if start.action == "attempts_exhausted":
                raise PaidCallFailed(
                    f"Gemini call {work_key} of {self.ctx.dimension.slug!r} failed "
                    f"{self.max_attempts} times; not retried again ({last_error})"
                )
            assert start.attempt_id is not None
            value, outcome, delay = self._attempt(model, contents, config, price, estimate, parse)
            spent = self._record(start.attempt_id, outcome, value if store_result else None)
            if outcome.status == "settle_ok":
                return PaidResult(value, spent, start.attempt_id)
            last_error = str(outcome.detail.get("error", "failed"))
            if outcome.status == "unknown":
                raise PaidCallUnknown(
                    f"Gemini call {work_key} ({model}) got no answer after it was sent "
                    f"({last_error}): its reservation is held, and the next run settles it at "
                    "the estimate before retrying"
                )
            if outcome.detail.get("blocked"):
                raise ModelBlocked(f"Gemini blocked the request ({model}): {last_error}")
            if delay is None:
                raise PaidCallFailed(f"Gemini call {work_key} ({model}) failed: {last_error}")
            if retry + 1 < self.max_attempts:
                self.sleep(delay if delay >= 0 else backoff_s(retry, self.backoff_base_s))
        raise PaidCallFailed(
            f"Gemini call {work_key} ({model}) failed {self.max_attempts} times: {last_error}"
        )

    def _record(self, attempt_id: int, outcome: _Outcome, value: Any) -> int:
        state = self.ctx.state
        if outcome.status == "settle_ok":
            detail = dict(outcome.detail)
            if value is not None:
                detail["result"] = value
            return state.settle_paid_call(attempt_id, "succeeded", outcome.actual_micros, detail)
        if outcome.status == "settle_failed":
            state.settle_paid_call(attempt_id, "failed", outcome.actual_micros, outcome.detail)
            return outcome.actual_micros
        if outcome.status == "release":
            state.release_paid_call(attempt_id, outcome.detail)
            return 0
        state.mark_paid_call_unknown(attempt_id, outcome.detail)
        return 0

    def _attempt(
        self,
        model: str,
        contents: str,
        config: types.GenerateContentConfig,
        price: Any,
        estimate: int,
        parse: Callable[[types.GenerateContentResponse], Any],
    ) -> tuple[Any, _Outcome, float | None]:
        """(value, outcome, retry delay): delay None means do not retry, -1 the backoff."""
        try:
            response = self.client.models.generate_content(
                model=model, contents=contents, config=config
            )
        except errors.APIError as exc:
            error = f"HTTP {exc.code} {exc.status or ''}".strip()
            if exc.code not in _RETRYABLE_STATUS:
                error += f": {_short(exc.message)}"
            detail: dict[str, Any] = {"error": error, "code": exc.code}
            if exc.code not in _RETRYABLE_STATUS:
                return None, _Outcome("release", detail), None
            headers = getattr(getattr(exc, "response", None), "headers", None) or {}
            wait = parse_retry_after(headers.get("retry-after")) if exc.code == 429 else None
            return None, _Outcome("release", detail), wait if wait is not None else -1
        except _NOT_SENT as exc:
            detail = {"error": f"not sent: {type(exc).__name__}"}
            return None, _Outcome("release", detail), -1
        except _NO_ANSWER as exc:
            return None, _Outcome("unknown", {"error": f"no answer: {type(exc).__name__}"}), None
        except json.JSONDecodeError:
            detail = {"error": "the answer was not JSON", "settled_at": "estimate"}
            return None, _Outcome("settle_failed", detail, estimate), -1
        usage = response.usage_metadata
        if usage is None:
            actual = estimate
            usage_detail: dict[str, Any] = {"usage": "missing: settled at the estimate"}
        else:
            prompt = usage.prompt_token_count or 0
            output = usage.candidates_token_count or 0
            thoughts = usage.thoughts_token_count or 0
            actual = cost_micros(price, prompt, output, thoughts)
            usage_detail = {"usage": {"prompt": prompt, "output": output, "thoughts": thoughts}}
        blocked = _block_reason(response)
        if blocked is not None:
            detail = {**usage_detail, "error": blocked, "blocked": True}
            return None, _Outcome("settle_failed", detail, actual), None
        if not response.candidates:
            detail = {**usage_detail, "error": "the answer has no candidates"}
            return None, _Outcome("settle_failed", detail, actual), -1
        try:
            value = parse(response)
        except InvalidModelOutput as exc:
            detail = {**usage_detail, "error": f"invalid answer: {_short(exc)}"}
            return None, _Outcome("settle_failed", detail, actual), -1
        return value, _Outcome("settle_ok", usage_detail, actual), None


def _block_reason(response: types.GenerateContentResponse) -> str | None:
    feedback = response.prompt_feedback
    if feedback is not None and feedback.block_reason is not None:
        return f"prompt blocked: {_enum_name(feedback.block_reason)}"
    for candidate in response.candidates or []:
        reason = _enum_name(candidate.finish_reason) if candidate.finish_reason else ""
        if reason in _BLOCK_FINISH:
            return f"answer blocked: finishReason {reason}"
    return None


def _enum_name(value: Any) -> str:
    return str(getattr(value, "value", value) or "")


def response_json(response: types.GenerateContentResponse) -> Any:
    """The first candidate's JSON text, parsed; InvalidModelOutput when it is not JSON or the
    answer was cut short."""
    candidate = response.candidates[0] if response.candidates else None
    if candidate is None or candidate.content is None or not candidate.content.parts:
        raise InvalidModelOutput("the answer has no content")
    if _enum_name(candidate.finish_reason) == "MAX_TOKENS":
        raise InvalidModelOutput("the answer was cut off at max_output_tokens")
    text = "".join(p.text or "" for p in candidate.content.parts)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidModelOutput(f"the answer is not JSON: {exc.msg}") from None


def json_config(
    system: str, schema: dict[str, Any], max_output_tokens: int, temperature: float
) -> types.GenerateContentConfig:
    """A structured-output request: the JSON schema travels in the request."""
    return types.GenerateContentConfig(
        system_instruction=system,
        response_mime_type="application/json",
        response_json_schema=schema,
        max_output_tokens=max_output_tokens,
        temperature=temperature,
    )


# --- speech -----------------------------------------------------------------------------------


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
            raise InvalidModelOutput(f"unreadable audio: {_short(exc)}") from None
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
    PaidCallUnknown or PaidCallFailed (missing, unreadable or too-short audio included)."""
    if not text.strip():
        raise ValueError("synthesize_speech needs text")
    model = model or ctx.dimension.gemini_tts_model or DEFAULT_TTS_MODEL
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


__all__ = [
    "BudgetExhausted",
    "CallContext",
    "ModelBlocked",
    "PaidCallFailed",
    "PaidCallInFlight",
    "PaidCallUnknown",
    "PaidCaller",
    "PaidResult",
    "as_wav",
    "audio_seconds",
    "estimate_prompt_tokens",
    "json_config",
    "make_client",
    "pcm_to_wav",
    "response_json",
    "synthesize_speech",
    "write_wav",
]
