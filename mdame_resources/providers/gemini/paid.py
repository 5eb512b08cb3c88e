"""The one paid-call path of every Gemini request.

Every Gemini request goes through `PaidCaller.call`:
  1. begin_paid_call: an earlier call of the same work key whose outcome is unknown is settled
     at its estimate (an LLM call cannot be looked up); the same request that already succeeded
     returns its stored answer (never paid twice); a standing refusal answers 'refused' (no
     request is sent); else the estimate (prompt tokens estimated, images at the caller's
     count, + max output tokens, times the model's price; an image model priced per image:
     that price per image asked) is reserved under the dimension's daily cap and the attempt
     recorded 'submitted' with the request's hash (an image's by its SHA-256). No room:
     BudgetExhausted.
  2. the SDK call (its own retries are off; the timeout is explicit); images go before the
     text, as inline parts.
  3. settle_paid_call with the usage metadata (thinking tokens at the output rate; per image:
     the images answered), or release_paid_call / refuse_paid_call on a refusal (Google does
     not bill one), or
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
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import dagster as dg

from mdame_core import settings
from mdame_domain.model_output import InvalidModelOutput
from mdame_domain.paid_calls import (
    backoff_s,
    cost_micros,
    estimate_micros,
    failure_class,
    http_cause,
    parse_retry_after,
    price_for,
    refusal_fix,
    refusal_scope,
    request_hash,
)
from mdame_domain.waits import NotYet
from mdame_resources.alerts import raise_environment_alert
from mdame_resources.providers.budget import BudgetExhausted, CallContext
from mdame_resources.providers.gemini.client import NO_ANSWER, NOT_SENT
from mdame_resources.providers.gemini.output import block_reason, short

if TYPE_CHECKING:  # the SDK is imported with the first client (client.make_client)
    from google import genai
    from google.genai import types

DEFAULT_MAX_ATTEMPTS = 4
# A paid call's lease outlives its lock by the longest single request (a setting, so a crash
# test need not wait out a killed run's call).
GRACE_ENV = "MDAME_GEMINI_GRACE_S"
TRANSIENT_TRIES_ENV = "MDAME_GEMINI_TRANSIENT_TRIES"
BACKOFF_ENV = "MDAME_GEMINI_BACKOFF_S"
BACKOFF_MAX_ENV = "MDAME_GEMINI_BACKOFF_MAX_S"


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


class PaidCallInFlight(PaidCallTransient, NotYet):
    """Another holder's call of this work key (a killed run's) may still be answered until
    `until`, its lease's end: the work waits for it, then settles it and calls again."""

    def __init__(self, message: str, until: datetime | None) -> None:
        NotYet.__init__(self, message, until)


class PaidCallRefused(PaidCallFailed, dg.Failure):
    """A permanent refusal (400, 401/403, 404), recorded in the ledger: no run sends the
    request again until `mdame calls retry` re-arms it. A dg.Failure that bypasses the step's
    RetryPolicy, since a retry would be refused the same way."""

    def __init__(self, message: str) -> None:
        dg.Failure.__init__(self, description=message, allow_retries=False)

    def __str__(self) -> str:
        return self.description or ""


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


def _images_in(response: types.GenerateContentResponse) -> int:
    """The images an answer carries (inline parts of an image/* type), over its candidates."""
    return sum(
        1
        for candidate in response.candidates or []
        for part in (candidate.content.parts or [] if candidate.content else [])
        if part.inline_data is not None
        and str(part.inline_data.mime_type or "").startswith("image/")
        and part.inline_data.data
    )


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
        self.transient_tries = transient_tries or int(settings.get(TRANSIENT_TRIES_ENV))
        self.backoff_base_s = (
            backoff_base_s if backoff_base_s is not None else float(settings.get(BACKOFF_ENV))
        )
        self.backoff_max_s = (
            backoff_max_s if backoff_max_s is not None else float(settings.get(BACKOFF_MAX_ENV))
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
        media: Sequence[tuple[bytes, str]] = (),
        media_tokens: int = 0,
        model_field: str | None = None,
        per_image_micros: int | None = None,
    ) -> PaidResult:
        """One paid request, retried through the ledger; `parse` turns the answer into the
        value (raising InvalidModelOutput for an answer that is not usable). `media`: (bytes,
        mime type) parts sent before the text (images to understand), reserved at
        `media_tokens` prompt tokens in all and hashed by their SHA-256. `model_field`: the
        setting that names the model, for a refusal's fix (else the dimension's text or TTS
        model field). `per_image_micros`: an image model's price per generated image, instead
        of the token price: one image per candidate is reserved, and a billed answer is
        settled on the images it carries, whatever its tokens."""
        if per_image_micros is not None:
            if per_image_micros < 0:
                raise ValueError(f"per_image_micros must be >= 0, got {per_image_micros}")
            price = None
            estimate = per_image_micros * (config.candidate_count or 1)
        else:
            price = price_for(model, self.ctx.prices)
            max_output = config.max_output_tokens
            if not max_output:
                raise ValueError("a paid call needs max_output_tokens: it bounds the reservation")
            system = str(config.system_instruction or "")
            estimate = estimate_micros(price, f"{system}\n{contents}", max_output)
            if media:
                estimate += cost_micros(price, media_tokens, 0, 0)
        wire = config.model_dump(mode="json", exclude_none=True)
        request: dict[str, Any] = {"contents": contents, "config": wire}
        if media:  # only then: the hashes of text-only calls stay what the ledger has
            request["media"] = [[mime, hashlib.sha256(data).hexdigest()] for data, mime in media]
        digest = request_hash(model, request)
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
                round(settings.get(GRACE_ENV)),
                {"model": model},
            )
            if start.action == "done":
                return PaidResult(start.result, 0, int(start.attempt_id or 0), cached=True)
            if start.action == "budget_exhausted":
                refused = BudgetExhausted(slug, start.period, estimate)
                raise_environment_alert(self.ctx.state, slug, "budget_cap", str(refused))
                raise refused
            if start.action == "in_flight":
                until = (start.result or {}).get("until")
                raise PaidCallInFlight(
                    f"Gemini call {work_key} of {slug!r} may still be answered under another run: "
                    "made again after its lease",
                    datetime.fromisoformat(until) if isinstance(until, str) else None,
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
            value, outcome = self._attempt(
                model, contents, config, price, estimate, parse, media, per_image_micros
            )
            outcome = self._classified(outcome, model, config, model_field)
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
        self,
        outcome: _Outcome,
        model: str,
        config: types.GenerateContentConfig,
        model_field: str | None = None,
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
            field = model_field or ("gemini_tts_model" if audio else "gemini_text_model")
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
        media: Sequence[tuple[bytes, str]] = (),
        per_image: int | None = None,
    ) -> tuple[Any, _Outcome]:
        """The request and how its outcome is recorded (status, detail, billed micros)."""
        from google.genai import errors, types

        parts: str | list[types.PartUnionDict] = contents
        if media:
            parts = [
                *(types.Part.from_bytes(data=data, mime_type=mime) for data, mime in media),
                types.Part.from_text(text=contents),
            ]
        try:
            response = self.client.models.generate_content(
                model=model, contents=parts, config=config
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
        except NOT_SENT as exc:
            detail = {"error": f"not sent: {type(exc).__name__} ({model}): {short(exc)}"}
            return None, _Outcome("release", detail)
        except NO_ANSWER as exc:
            error = f"no answer: {type(exc).__name__} ({model}): {short(exc)}"
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
            actual = cost_micros(price, prompt, output, thoughts) if price is not None else 0
            usage_detail = {"usage": {"prompt": prompt, "output": output, "thoughts": thoughts}}
        if per_image is not None:  # priced per image: the images answered, whatever the tokens
            images = _images_in(response)
            actual = per_image * images
            usage_detail.update(images=images, per_image_micros=per_image)
        blocked = block_reason(response)
        if blocked is not None:
            detail = {**usage_detail, "error": blocked, "blocked": True}
            return None, _Outcome("settle_failed", detail, actual)
        if not response.candidates:
            detail = {**usage_detail, "error": "the answer has no candidates"}
            return None, _Outcome("settle_failed", detail, actual)
        try:
            value = parse(response)
        except InvalidModelOutput as exc:
            detail = {**usage_detail, "error": f"invalid answer: {short(exc)}"}
            return None, _Outcome("settle_failed", detail, actual)
        return value, _Outcome("settle_ok", usage_detail, actual)
