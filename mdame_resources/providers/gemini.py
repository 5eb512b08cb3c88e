"""Gemini through the official google-genai SDK: one client factory and one paid-call path.

Every Gemini request goes through `PaidCaller.call`:
  1. begin_paid_call: an earlier call of the same work key whose outcome is unknown is settled
     at its estimate (an LLM call cannot be looked up); the same request that already succeeded
     returns its stored answer (never paid twice); a standing refusal answers 'refused' (no
     request is sent); else the estimate (prompt tokens estimated + max output tokens, times
     the model's price) is reserved under the dimension's daily cap and the attempt recorded
     'submitted' with the request's hash. No room: BudgetExhausted.
  2. the SDK call (its own retries are off; the timeout is explicit).
  3. settle_paid_call with the usage metadata (thinking tokens at the output rate), or
     release_paid_call / refuse_paid_call on a refusal (Google does not bill one), or
     mark_paid_call_unknown when the request was sent and no answer came (timeout, dropped
     connection): the reservation stays held and the next try settles it at the estimate.
Failure classes (the ledger records each failed attempt's class):
  - transient: 429 (after its Retry-After), 408, 5xx, nothing sent, no answer. Never counted
    against the call: up to `transient_tries` tries in this run with backoff, then
    PaidCallTransient (PaidCallUnknown when the last try got no answer), naming the last cause;
    the step's RetryPolicy and later runs try again, so an outage heals once Gemini answers.
  - permanent: any other 4xx (400 invalid argument, 401/403 key, 404 unknown model). Sent
    once: refuse_paid_call records the refusal (for the request, the model or the key, by
    status), one provider_refused alert carries Gemini's message and the fix, and
    PaidCallRefused (a dg.Failure that skips the RetryPolicy) is raised. Later runs are refused
    without a request until `mdame calls retry --dimension D` re-arms them.
  - billed but unusable: a 200 whose body is not JSON (settled at the estimate: its usage is
    lost), or whose JSON breaks the schema, the length or the language (settled at its usage),
    or with no candidates. Retried with backoff, bounded by `max_attempts` such answers per
    work key across runs.
  - blocked: a 200 with a safety block (promptFeedback.blockReason, finishReason SAFETY),
    settled at the usage it reports (0 when none): a definite decision, ModelBlocked.

The API key comes from dg.EnvVar("GEMINI_API_KEY") and is never logged, stored or put in an
error message; the endpoint from MDAME_GEMINI_BASE_URL when set (a gateway, or fakes).
"""

from __future__ import annotations

import contextlib
import dataclasses
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

import dagster as dg
import httpx
from google import genai
from google.genai import errors, types

from mdame_core.settings import seconds_setting
from mdame_domain.idempotency import idempotency_key
from mdame_domain.model_output import InvalidModelOutput
from mdame_domain.paid_calls import (
    DEFAULT_TTS_MODEL,
    audio_mime,
    backoff_s,
    cost_micros,
    estimate_micros,
    estimate_prompt_tokens,
    failure_class,
    http_cause,
    parse_retry_after,
    price_for,
    refusal_fix,
    refusal_scope,
    request_hash,
    speech_output_tokens,
)
from mdame_resources.alerts import raise_environment_alert
from mdame_resources.providers.budget import BudgetExhausted, CallContext

BASE_URL_ENV = "MDAME_GEMINI_BASE_URL"
API_VERSION = "v1beta"  # the SDK's default is v1, which lacks some generation fields
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_ATTEMPTS = 4
# A paid call's lease outlives its lock by the longest single request (a setting, so a crash
# test need not wait out a killed run's call).
GRACE_S = 180
GRACE_ENV = "MDAME_GEMINI_GRACE_S"
_BLOCK_FINISH = {"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY"}
TRANSIENT_TRIES_ENV = "MDAME_GEMINI_TRANSIENT_TRIES"
BACKOFF_ENV = "MDAME_GEMINI_BACKOFF_S"
BACKOFF_MAX_ENV = "MDAME_GEMINI_BACKOFF_MAX_S"


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
    """A paid call that gave no usable answer."""


class ModelBlocked(PaidCallFailed):
    """Gemini itself refused the content (blockReason, or finishReason SAFETY)."""


class PaidCallTransient(PaidCallFailed):
    """Transient failures (429, 5xx, connection errors, timeouts) used up this run's tries:
    nothing counts against the call, and a later run (the step's retry policy, or the next
    schedule) makes it again."""


class PaidCallUnknown(PaidCallTransient):
    """The last try was sent and no answer came: its reservation stays held, and the next run
    settles it at the estimate before trying again."""


class PaidCallInFlight(PaidCallTransient):
    """Another holder's call of this work key may still be running: retried later."""


class PaidCallRefused(PaidCallFailed, dg.Failure):
    """A permanent refusal (400, 401/403, 404), recorded in the ledger: no run sends the
    request again until `mdame calls retry` re-arms it. A dg.Failure that bypasses the step's
    RetryPolicy, since a retry would be refused the same way."""

    def __init__(self, message: str) -> None:
        dg.Failure.__init__(self, description=message, allow_retries=False)

    def __str__(self) -> str:
        return self.description or ""


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
    status: str  # "settle_ok", "settle_failed", "release", "refuse", "unknown"
    detail: dict[str, Any]
    actual_micros: int = 0
    wait_s: float | None = None  # the server's Retry-After, when it sent one

    @property
    def failure_class(self) -> str:
        """'transient', 'permanent', 'blocked' or 'unusable' (billed, not usable)."""
        if self.status in ("release", "unknown"):
            return "transient"
        if self.status == "refuse":
            return "permanent"
        return "blocked" if self.detail.get("blocked") else "unusable"


def _short(text: Any, limit: int = 300) -> str:
    return " ".join(str(text).split())[:limit]


def _int_setting(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{name} must be a positive whole number, got {raw!r}")
    return int(raw)


class PaidCaller:
    """Makes paid Gemini calls for one dimension under the step's fence (see module doc).

    `transient_tries` bounds the tries of one call in this run that end transiently;
    `backoff_base_s` and `backoff_max_s` space them (a Retry-After longer than backoff_max_s
    ends the run's tries at once). Defaults come from MDAME_GEMINI_TRANSIENT_TRIES (4),
    MDAME_GEMINI_BACKOFF_S (1) and MDAME_GEMINI_BACKOFF_MAX_S (30)."""

    def __init__(
        self,
        client: genai.Client,
        ctx: CallContext,
        *,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        transient_tries: int | None = None,
        backoff_base_s: float | None = None,
        backoff_max_s: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client, self.ctx, self.max_attempts, self.sleep = client, ctx, max_attempts, sleep
        self.transient_tries = transient_tries or _int_setting(TRANSIENT_TRIES_ENV, 4)
        self.backoff_base_s = (
            backoff_base_s if backoff_base_s is not None else seconds_setting(BACKOFF_ENV, 1.0)
        )
        self.backoff_max_s = (
            backoff_max_s if backoff_max_s is not None else seconds_setting(BACKOFF_MAX_ENV, 30.0)
        )

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
        slug = self.ctx.dimension.slug
        transient = tries = 0
        # Transient tries are bounded here, billed failures by the ledger's cap.
        while True:
            self.ctx.checkpoint()
            start = self.ctx.state.begin_paid_call(
                slug,
                work_key,
                f"gemini:{model}",
                digest,
                estimate,
                self.ctx.dimension.daily_budget_micros,
                self.max_attempts,
                round(seconds_setting(GRACE_ENV, GRACE_S)),
                {"model": model},
            )
            if start.action == "done":
                return PaidResult(start.result, 0, int(start.attempt_id or 0), cached=True)
            if start.action == "budget_exhausted":
                refused = BudgetExhausted(slug, start.period, estimate)
                raise_environment_alert(self.ctx.state, slug, "budget_cap", str(refused))
                raise refused
            if start.action == "in_flight":
                raise PaidCallInFlight(
                    f"Gemini call {work_key} of {slug!r} may still be in flight under another "
                    "run: retried after its lease"
                )
            if start.action == "refused":
                cause = start.result or {}
                raise PaidCallRefused(
                    f"Gemini call {work_key} ({model}) not sent: refused for good on "
                    f"{cause.get('day')}: {cause.get('error', 'refused')}; fix: "
                    f"{cause.get('fix', f'mdame calls retry --dimension {slug}')}"
                )
            if start.action == "attempts_exhausted":
                result = start.result or {}
                raise PaidCallFailed(
                    f"Gemini call {work_key} ({model}) got {result.get('failures')} billed "
                    f"answers it could not use; not retried again (last: "
                    f"{result.get('error', 'failed')})"
                )
            assert start.attempt_id is not None
            tries += 1
            value, outcome = self._attempt(model, contents, config, price, estimate, parse)
            outcome = self._classified(outcome, model, config)
            spent = self._record(start.attempt_id, outcome, value if store_result else None)
            if outcome.status == "settle_ok":
                return PaidResult(value, spent, start.attempt_id)
            error = str(outcome.detail.get("error", "failed"))
            kind = outcome.failure_class
            if kind == "permanent":
                raise self._refused(start.attempt_id, work_key, model, outcome)
            if kind == "blocked":
                raise ModelBlocked(f"Gemini blocked the request ({model}): {error}")
            wait = backoff_s(tries - 1, self.backoff_base_s, self.backoff_max_s)
            if kind == "unusable":
                billed = int((start.result or {}).get("billed_failures", 0)) + 1
                if billed >= self.max_attempts:
                    raise PaidCallFailed(
                        f"Gemini call {work_key} ({model}) got {billed} billed answers it could "
                        f"not use; not retried again (last: {error})"
                    )
            if kind == "transient":
                transient += 1
                too_long = outcome.wait_s is not None and outcome.wait_s > self.backoff_max_s
                if transient >= self.transient_tries or too_long:
                    raise self._transient(work_key, model, outcome, transient)
                wait = outcome.wait_s if outcome.wait_s is not None else wait
            self.sleep(wait)

    def _transient(
        self, work_key: str, model: str, outcome: _Outcome, tries: int
    ) -> PaidCallTransient:
        error = str(outcome.detail.get("error", "failed"))
        if outcome.status == "unknown":
            return PaidCallUnknown(
                f"Gemini call {work_key} ({model}) got no answer after it was sent "
                f"({error}): its reservation is held, and the next run settles it at the "
                "estimate before trying again"
            )
        tried = f"{tries} tries in this run" if tries > 1 else "this run's try"
        return PaidCallTransient(
            f"Gemini call {work_key} ({model}) failed transiently ({tried}): {error}; "
            "nothing counts against the call, and a later run tries again"
        )

    def _classified(
        self, outcome: _Outcome, model: str, config: types.GenerateContentConfig
    ) -> _Outcome:
        """A permanent refusal's detail gains its scope and the fix; every error loses the
        API key should the provider's message ever echo it."""
        detail = dict(outcome.detail)
        secret = getattr(getattr(self.client, "_api_client", None), "api_key", None)
        if secret and secret in str(detail.get("error", "")):
            detail["error"] = str(detail["error"]).replace(secret, "[GEMINI_API_KEY]")
        if outcome.status == "refuse":
            code = int(detail["code"])
            audio = "AUDIO" in [str(m).upper() for m in config.response_modalities or []]
            field = "gemini_tts_model" if audio else "gemini_text_model"
            detail["scope"] = refusal_scope(code)
            detail["fix"] = refusal_fix(
                code, model=model, model_field=field, dimension=self.ctx.dimension.slug
            )
        return dataclasses.replace(outcome, detail=detail)

    def _refused(
        self, attempt_id: int, work_key: str, model: str, outcome: _Outcome
    ) -> PaidCallRefused:
        """Records the refusal (released; begin_paid_call answers 'refused' from now on),
        raises the operator's alert the first time, and returns the error to raise."""
        slug, detail = self.ctx.dimension.slug, outcome.detail
        _, fresh = self.ctx.state.refuse_paid_call(attempt_id, detail["scope"], detail)
        message = (
            f"Gemini call {work_key} ({model}) refused: {detail['error']}; fix: {detail['fix']}"
        )
        if fresh:
            raise_environment_alert(self.ctx.state, slug, "provider_refused", message)
        return PaidCallRefused(message)

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
        if outcome.status == "refuse":
            return 0  # recorded by _refused, with the refusal itself
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
    ) -> tuple[Any, _Outcome]:
        """The request and how its outcome is recorded (status, detail, billed micros)."""
        try:
            response = self.client.models.generate_content(
                model=model, contents=contents, config=config
            )
        except errors.APIError as exc:
            code = int(exc.code or 0)
            detail: dict[str, Any] = {
                "error": http_cause(code, exc.status or "", model, exc.message or ""),
                "code": code,
            }
            if failure_class(code) == "permanent":
                return None, _Outcome("refuse", detail)
            headers = getattr(getattr(exc, "response", None), "headers", None) or {}
            wait = parse_retry_after(headers.get("retry-after")) if code == 429 else None
            return None, _Outcome("release", detail, wait_s=wait)
        except _NOT_SENT as exc:
            detail = {"error": f"not sent: {type(exc).__name__} ({model}): {_short(exc)}"}
            return None, _Outcome("release", detail)
        except _NO_ANSWER as exc:
            error = f"no answer: {type(exc).__name__} ({model}): {_short(exc)}"
            return None, _Outcome("unknown", {"error": error})
        except json.JSONDecodeError:
            detail = {"error": "the answer was not JSON", "settled_at": "estimate"}
            return None, _Outcome("settle_failed", detail, estimate)
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
            return None, _Outcome("settle_failed", detail, actual)
        if not response.candidates:
            detail = {**usage_detail, "error": "the answer has no candidates"}
            return None, _Outcome("settle_failed", detail, actual)
        try:
            value = parse(response)
        except InvalidModelOutput as exc:
            detail = {**usage_detail, "error": f"invalid answer: {_short(exc)}"}
            return None, _Outcome("settle_failed", detail, actual)
        return value, _Outcome("settle_ok", usage_detail, actual)


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
    PaidCallTransient, PaidCallRefused or PaidCallFailed (missing, unreadable or too-short
    audio included)."""
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
    "PaidCallRefused",
    "PaidCallTransient",
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
