"""Script writers: the deterministic local writer offline, Gemini in production."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mdame_domain.idempotency import idempotency_key
from mdame_domain.model_output import (
    HookVerdict,
    InvalidModelOutput,
    ScriptDraft,
    check_language,
    check_script_length,
    critic_verdicts,
    hook_text,
    script_draft,
    target_words,
)
from mdame_domain.prompt_data import DATA_RULE, data_block
from mdame_domain.writer import MAX_ATTEMPTS, Script, TopicBrief, snippet_sentences, write_script
from mdame_resources.health import Health, HealthScope, setting
from mdame_resources.providers.base import ProviderResource
from mdame_resources.providers.budget import CallContext

# Why a topic got no script: its best hook stayed below the threshold, or the model's answers
# kept failing their checks (so the topic's video slot goes to the next topic).
REJECTED_BY_HOOK = "hook"
REJECTED_BY_MODEL_OUTPUT = "model_output"


@dataclass(frozen=True)
class WriteOutcome:
    """A topic's writing: the script, or None with the reasons it was rejected."""

    script: Script | None
    attempts: int
    rejected_reasons: tuple[str, ...] = ()
    spend_micros: int = 0
    rejected_by: str = REJECTED_BY_HOOK


class _OutputRejected(Exception):
    """Every version of one request got an answer that failed its checks."""

    def __init__(self, work: str, errors: list[str]) -> None:
        super().__init__(f"{work}: {len(errors)} answers failed their checks")
        self.work = work
        self.errors = errors


class ScriptWriterResource(ProviderResource):
    # Integer micro-units reserved against the budget before each attempt.
    cost_per_attempt_micros: int = 0

    def write(self, brief: TopicBrief, attempt: int, threshold: float) -> Script | None:
        """A script whose best hook scores >= threshold, or None (the caller retries)."""
        raise NotImplementedError

    def write_topic(
        self, brief: TopicBrief, threshold: float, ctx: CallContext | None = None
    ) -> WriteOutcome:
        """The first try and up to two retries; rejected with reasons after the last."""
        for attempt in range(MAX_ATTEMPTS):
            script = self.write(brief, attempt, threshold)
            if script is not None:
                return WriteOutcome(script, attempt)
        reason = f"best hook below the threshold {threshold} after {MAX_ATTEMPTS} attempts"
        return WriteOutcome(None, MAX_ATTEMPTS, (reason,))


class LocalScriptWriter(ScriptWriterResource):
    no_health_check: ClassVar[str] = "offline: it calls no service"

    @property
    def offline(self) -> bool:
        return True

    def write(self, brief: TopicBrief, attempt: int, threshold: float) -> Script | None:
        return write_script(brief, attempt, threshold)


# Three hook candidates from three temperatures, per round.
HOOK_TEMPERATURES = (0.4, 0.9, 1.4)
SCRIPT_TEMPERATURE = 0.7
CRITIC_TEMPERATURE = 0.0
HOOK_WORDS = 12  # about what a hook takes of the script's words

_WRITER_SYSTEM = (
    "You write the spoken script of a vertical short video for the channel {channel!r}. "
    "Write in the language {language!r} only. Tone: {tone}. Use only facts from the topic "
    "material; invent no numbers, names or quotes. "
    + DATA_RULE
    + " The body follows an opening hook that is written separately, "
    "so do not open with a greeting or a hook. End with the call to action: {cta}"
)
_HOOK_SYSTEM = (
    "You write one opening line (a hook) for a short video in the language {language!r}. "
    "It must open a curiosity gap, be specific to the topic, and promise nothing the script "
    "does not deliver. No clickbait words, no shouting. " + DATA_RULE
)
_CRITIC_SYSTEM = (
    "You are an adversarial critic of short-video hooks. Score each numbered hook from 0 to 1 "
    "on: curiosity_gap (does it make a viewer need the next sentence), specificity (concrete "
    "to this topic, not generic), honesty (the script keeps every promise the hook makes; "
    "clickbait or a promise the script does not keep scores low). Be strict: 0.7 is good. "
    "Give a one-sentence reason per hook. " + DATA_RULE
)


def _with_feedback(contents: str, errors: list[str]) -> str:
    """The request again with every earlier answer's failed check, so the model can fix it
    (and each version is a request of its own, even when the same check failed twice)."""
    if not errors:
        return contents
    # A failed check may quote the answer, which was written from feed text: fenced as data.
    failed = data_block([(f"Answer {i + 1}", error) for i, error in enumerate(errors)])
    return (
        f"{contents}\nYour previous answers were rejected, for the reasons in this block:\n"
        f"{failed}\nAnswer again, following the schema and every length and language rule."
    )


def _last_cause(message: str) -> str:
    """The check an unusable answer failed, from the paid call's error: '... (last: X)'.
    The same words whether this run got the answer or the ledger recalls it, so a later run
    builds the same next request."""
    head, sep, cause = message.rpartition("(last: ")
    return cause.rstrip(")").strip() if sep else message


def _cta(ctx: CallContext) -> str:
    given = ctx.dimension.call_to_action.strip()
    return repr(given) if given else "one short sentence inviting viewers to follow the channel"


def _material(brief: TopicBrief, *drafts: tuple[str, str]) -> str:
    """The topic's feed text, and any draft written from it, inside one data block."""
    snippets = " ".join(snippet_sentences(brief.snippets))
    keywords = ", ".join(brief.keywords)
    return data_block(
        (("Topic", brief.title), ("Details", snippets), ("Keywords", keywords), *drafts)
    )


def _script_schema(body_words: int, language: str) -> dict[str, object]:
    low, high = max(40, body_words - 8), body_words + 8
    return {
        "type": "object",
        "properties": {
            "body": {
                "type": "string",
                "description": f"the spoken body of the script, {low}-{high} words",
            },
            "call_to_action": {
                "type": "string",
                "description": "the closing call to action, 8-14 words",
            },
            "language": {
                "type": "string",
                "enum": [language],
                "description": "the ISO 639-1 code of the language written in",
            },
        },
        "required": ["body", "call_to_action", "language"],
    }


_HOOK_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {"hook": {"type": "string", "description": "one spoken hook of 8-14 words"}},
    "required": ["hook"],
}
_UNIT = {"type": "number", "minimum": 0, "maximum": 1}
_CRITIC_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "scores": {
            "type": "array",
            "minItems": 3,
            "maxItems": 3,
            "items": {
                "type": "object",
                "properties": {
                    "hook_index": {"type": "integer", "minimum": 0, "maximum": 2},
                    "curiosity_gap": _UNIT,
                    "specificity": _UNIT,
                    "honesty": _UNIT,
                    "reason": {"type": "string", "description": "why, in 10-20 words"},
                },
                "required": ["hook_index", "curiosity_gap", "specificity", "honesty", "reason"],
            },
        }
    },
    "required": ["scores"],
}


class GeminiScriptWriter(ScriptWriterResource):
    """Gemini writes the script (structured output), three hooks at three temperatures, and
    an adversarial critic scores them; every answer is validated in mdame_domain first."""

    api_key: str
    base_url: str | None = None  # None: MDAME_GEMINI_BASE_URL, else Google's endpoint
    timeout_s: float = 60.0
    script_max_output_tokens: int = 1024
    hook_max_output_tokens: int = 128
    critic_max_output_tokens: int = 768
    # Versions of one request, each after an answer that failed its checks (the check's error
    # goes back in the prompt, so the request differs and is paid for once); then the topic
    # is rejected and its video slot goes to the next topic.
    output_tries: int = 3

    def write(self, brief: TopicBrief, attempt: int, threshold: float) -> Script | None:
        raise NotImplementedError(
            "GeminiScriptWriter pays for its calls: use write_topic(brief, threshold, ctx)"
        )

    def write_topic(
        self, brief: TopicBrief, threshold: float, ctx: CallContext | None = None
    ) -> WriteOutcome:
        from mdame_resources.providers.gemini import PaidCaller, make_client

        if ctx is None:
            raise ValueError("GeminiScriptWriter needs the step's CallContext (budget, fence)")
        # One billed unusable answer per request version: a version is never sent twice, the
        # next one carries the check's error instead.
        caller = PaidCaller(
            make_client(self.api_key, self.base_url, self.timeout_s), ctx, max_attempts=1
        )
        writer = _TopicWriter(self, caller, ctx, brief)
        try:
            return writer.run(threshold)
        except InvalidModelOutput as exc:  # the parts passed, the whole script did not
            reason = f"the written script: {exc}"
            return WriteOutcome(None, 1, (reason,), writer.spent, REJECTED_BY_MODEL_OUTPUT)
        except _OutputRejected as rejected:
            reasons = tuple(
                f"{rejected.work}, answer {i + 1}: {error}"
                for i, error in enumerate(rejected.errors)
            )
            return WriteOutcome(
                None, len(rejected.errors), reasons, writer.spent, REJECTED_BY_MODEL_OUTPUT
            )

    def health_check(self, timeout: float, scope: HealthScope | None = None) -> list[Health]:
        """The Gemini API as this deployment calls it: the key (the safety classifier and the
        voice's Gemini TTS fallback are given the same one) and models.get for each model the
        active dimensions configure, text and TTS, one finding each (gemini/health.py)."""
        from mdame_resources.providers.gemini.health import gemini_health

        key, key_name = setting(self, "api_key")
        base_url = setting(self, "base_url")[0] or None
        dimensions = scope.dimensions if scope else ()
        answers = scope.answers if scope else None
        return gemini_health(key, key_name, base_url, dimensions, timeout, answers)


class _TopicWriter:
    def __init__(self, writer: GeminiScriptWriter, caller, ctx: CallContext, brief: TopicBrief):
        self.writer, self.caller, self.ctx, self.brief = writer, caller, ctx, brief
        self.model = ctx.dimension.gemini_text_model
        self.language = ctx.dimension.language
        self.key = idempotency_key("gemini-writer", ctx.dimension.slug, brief.title)
        self.spent = 0

    def _json(
        self,
        work: str,
        system: str,
        contents: str,
        schema: dict[str, object],
        max_tokens: int,
        temperature: float,
        parse,
    ):
        from mdame_resources.providers.gemini import (
            ModelBlocked,
            PaidCallFailed,
            PaidCallRefused,
            PaidCallTransient,
            json_config,
            response_json,
        )

        def parse_response(response):
            data = response_json(response)
            parse(data)  # raises InvalidModelOutput: billed, recorded as unusable
            return data

        errors: list[str] = []
        for version in range(max(1, self.writer.output_tries)):
            key = idempotency_key(self.key, work)
            if version:
                key = idempotency_key(self.key, work, f"version{version}")
            try:
                result = self.caller.call(
                    work_key=key,
                    model=self.model,
                    contents=_with_feedback(contents, errors),
                    config=json_config(system, schema, max_tokens, temperature),
                    parse=parse_response,
                )
            except (PaidCallTransient, PaidCallRefused, ModelBlocked):
                raise  # no answer, or one no version of the request changes
            except PaidCallFailed as exc:  # a billed answer that failed its checks
                errors.append(_last_cause(str(exc)))
                continue
            self.spent += result.spent_micros
            return parse(result.value)
        raise _OutputRejected(work, errors)

    def _draft_parser(self, target: int):
        def parse(data):
            draft = script_draft(data, self.language)
            # The hook is not written yet: count a typical one, so a body of the wrong length
            # is retried now instead of failing the finished script.
            check_script_length(f"{draft.body} {draft.call_to_action} " + "w " * HOOK_WORDS, target)
            return draft

        return parse

    def run(self, threshold: float) -> WriteOutcome:
        dimension = self.ctx.dimension
        target = target_words(dimension.target_seconds)
        draft: ScriptDraft = self._json(
            "script",
            _WRITER_SYSTEM.format(
                channel=dimension.title,
                language=self.language,
                tone=dimension.tone,
                cta=_cta(self.ctx),
            ),
            f"{_material(self.brief)}\nWrite about {target - HOOK_WORDS} words of body.",
            _script_schema(target - HOOK_WORDS - 10, self.language),
            self.writer.script_max_output_tokens,
            SCRIPT_TEMPERATURE,
            self._draft_parser(target),
        )
        reasons: list[str] = []
        for attempt in range(MAX_ATTEMPTS):
            hooks = [
                self._json(
                    f"hook:{attempt}:{i}",
                    _HOOK_SYSTEM.format(language=self.language),
                    _material(self.brief, ("The script the hook opens", draft.body)),
                    _HOOK_SCHEMA,
                    self.writer.hook_max_output_tokens,
                    temperature,
                    hook_text,
                )
                for i, temperature in enumerate(HOOK_TEMPERATURES)
            ]
            numbered = [(f"Hook {i}", hook) for i, hook in enumerate(hooks)]
            verdicts: list[HookVerdict] = self._json(
                f"critic:{attempt}",
                _CRITIC_SYSTEM,
                data_block([("Script", f"{draft.body} {draft.call_to_action}"), *numbered]),
                _CRITIC_SCHEMA,
                self.writer.critic_max_output_tokens,
                CRITIC_TEMPERATURE,
                lambda data, hooks=hooks: critic_verdicts(data, hooks),
            )
            best = max(verdicts, key=lambda v: v.score)
            if best.score >= threshold:
                return WriteOutcome(
                    self._script(hooks, verdicts, best, draft, target),
                    attempt,
                    spend_micros=self.spent,
                )
            reasons.append(
                f"attempt {attempt + 1}: best hook {best.score:.2f} < {threshold}: "
                + "; ".join(f"hook {v.index} {v.score:.2f}: {v.reason}" for v in verdicts)
            )
        return WriteOutcome(None, MAX_ATTEMPTS, tuple(reasons), self.spent)

    def _script(
        self,
        hooks: list[str],
        verdicts: list[HookVerdict],
        best: HookVerdict,
        draft: ScriptDraft,
        target: int,
    ) -> Script:
        hook = hooks[best.index]
        text = " ".join([hook, draft.body, draft.call_to_action])
        count = check_script_length(text, target)
        check_language(text, self.language)
        body = tuple(s for s in snippet_sentences([draft.body])) or (draft.body,)
        return Script(
            hook=hook,
            hook_score=best.score,
            hook_candidates=tuple((h, v.score) for h, v in zip(hooks, verdicts, strict=True)),
            body_sentences=body,
            call_to_action=draft.call_to_action,
            text=text,
            word_count=count,
        )


__all__ = [
    "REJECTED_BY_HOOK",
    "REJECTED_BY_MODEL_OUTPUT",
    "GeminiScriptWriter",
    "InvalidModelOutput",
    "LocalScriptWriter",
    "ScriptWriterResource",
    "WriteOutcome",
]
