"""The Gemini health check: the key, and models.get for each model the active dimensions
configure (gemini_text_model, gemini_tts_model). A missing model FAILs naming the YAML field; a
429, a 5xx or a timeout WARNs; a refused key, or nothing listening, is one finding for the whole
service."""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, MutableMapping, Sequence
from typing import Any

from mdame_core import settings
from mdame_domain.dimensions import DimensionConfig
from mdame_domain.doctor import Redactor, Status, display_url, first_line
from mdame_domain.paid_calls import DEFAULT_TEXT_MODEL, DEFAULT_TTS_MODEL
from mdame_resources.health import Health
from mdame_resources.providers.gemini.client import BASE_URL_ENV, http_errors, make_client

GOOGLE_BASE_URL = "https://generativelanguage.googleapis.com"


TEXT_MODEL, TTS_MODEL = "gemini_text_model", "gemini_tts_model"
_DEFAULTS = {TEXT_MODEL: DEFAULT_TEXT_MODEL, TTS_MODEL: DEFAULT_TTS_MODEL}


def configured_models(
    dimensions: Sequence[DimensionConfig], fields: Sequence[str] = (TEXT_MODEL, TTS_MODEL)
) -> dict[str, list[tuple[str, str]]]:
    """Each model the active dimensions configure in `fields` (their YAML fields) ->
    (dimension, field) pairs; with no dimension, the defaults (mdame_domain/paid_calls.py)
    under the dimension '' ."""
    configured = [
        (dim.slug, {name: getattr(dim, name) for name in fields}) for dim in dimensions
    ] or [("", {name: _DEFAULTS[name] for name in fields})]
    needed: dict[str, list[tuple[str, str]]] = {}
    for slug, models in configured:
        for name, model in models.items():
            needed.setdefault(model, []).append((slug, name))
    return needed


Answers = MutableMapping[Hashable, Any]


def gemini_health(
    api_key: str,
    key_name: str,
    base_url: str | None,
    dimensions: Sequence[DimensionConfig],
    timeout: float,
    answers: Answers | None = None,
) -> list[Health]:
    """models.get per configured model: one finding each (its subject the model); a problem of
    the whole service (no key, a refused key, nothing listening) is one finding with no
    subject, and ends the check. `key_name` names the key in messages (its variable)."""
    needed = configured_models(dimensions)
    return models_health(api_key, key_name, base_url, needed, timeout, answers)


def models_health(
    api_key: str,
    key_name: str,
    base_url: str | None,
    needed: dict[str, list[tuple[str, str]]],
    timeout: float,
    answers: Answers | None = None,
) -> list[Health]:
    """models.get for each model of `needed` (model -> (dimension, YAML field) pairs, the
    dimension '' for a default), as gemini_health: one finding per model, or one for the
    whole service that ends the check. `answers` (HealthScope.answers): a model already asked
    with this key at this endpoint in this doctor run is not asked again; its answer (or
    error) is judged for this caller's users."""
    redact = Redactor([api_key])
    found: list[Health] = []

    def add(status: Status, message: str, subject: str = "") -> None:
        found.append(Health(status, redact(message), subject))

    if not api_key:
        add(Status.FAIL, f"{key_name} is not set")
        return found
    base = base_url or settings.raw(BASE_URL_ENV) or GOOGLE_BASE_URL
    where = display_url(base)
    client = make_client(api_key, base_url, timeout_s=timeout)
    from google.genai import errors

    # The key only as a digest: the answers outlive this call.
    asker = (base, hashlib.sha256(api_key.encode()).hexdigest())
    for model, users in sorted(needed.items()):
        try:
            _ask(client, model, answers, (*asker, model))
        except errors.APIError as exc:
            said = f"HTTP {exc.code} {exc.status}: {first_line(exc.message or '')}"
            if _key_refused(exc):
                add(
                    Status.FAIL,
                    f"{where} refused {key_name} ({said}): set it to a valid key of "
                    "a project with the Gemini API enabled",
                )
                return found
            if exc.code == 429 or (exc.code or 0) >= 500:
                add(Status.WARN, f"{where} answered {said} (transient: try again)", model)
            else:
                add(Status.FAIL, f"{where} answered {said}; {_model_fix(users)}", model)
            continue
        except http_errors("TimeoutException") as exc:
            add(
                Status.WARN,
                f"{where}: no answer within {timeout}s "
                f"({type(exc).__name__}, transient: try again)",
                model,
            )
            continue
        except http_errors("TransportError") as exc:
            add(Status.FAIL, f"{where} not reachable ({type(exc).__name__})")
            return found
        add(Status.OK, f"offered at {where}; {_model_users(users)}", model)
    return found


def _ask(client: Any, model: str, answers: Answers | None, question: tuple[str, ...]) -> None:
    """models.get of `model`, raising what it raised; from `answers` when asked before."""
    if answers is not None and question in answers:
        if answers[question] is not None:
            raise answers[question]
        return
    try:
        client.models.get(model=model)
    except Exception as exc:
        if answers is not None:
            answers[question] = exc
        raise
    if answers is not None:
        answers[question] = None


def _key_refused(exc: Any) -> bool:
    """401/403, or Google's 400 for a malformed key (INVALID_ARGUMENT, "API key not valid")."""
    return exc.code in (401, 403) or (exc.code == 400 and "api key" in (exc.message or "").lower())


def _model_users(users: list[tuple[str, str]]) -> str:
    """Who configures a model: `tech (gemini_text_model), science (gemini_tts_model)`."""
    if all(slug == "" for slug, _ in users):
        fields = sorted({f for _, f in users})
        return f"the default {' and '.join(fields)} (no active dimension)"
    return "used by " + ", ".join(f"{slug} ({f})" for slug, f in users if slug)


def _model_fix(users: list[tuple[str, str]]) -> str:
    """The YAML field to change, and where: a model name is a dimension's setting."""
    if all(slug == "" for slug, _ in users):
        fields = sorted({f for _, f in users})
        return (
            f"it is the default {' and '.join(fields)}: set {' / '.join(fields)} in the "
            "dimensions' YAML files to a model the API offers"
        )
    where = ", ".join(f"{f} in dimensions/{slug}.yaml" for slug, f in users if slug)
    return f"set {where} to a model the API offers"
