"""The health checks of the visuals chain's network engines and of its relevance gate: what
`mdame doctor` prints for the generated engine (the key and each image model), the stock
engine (one small search per source with a key) and the relevance judge (each judge model).

Which models and sources matter comes from the active dimensions' `visuals:` settings (their
chain, generated.model, relevance.model); with no active dimension, the defaults. A dimension
whose chain leaves an engine out needs nothing of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mdame_core.settings import SettingsError, raw
from mdame_domain.doctor import Redactor, Status
from mdame_domain.generated_stills import GeneratedSettings
from mdame_domain.paid_calls import UnknownPrice
from mdame_domain.redaction import display_url
from mdame_domain.relevance import RelevanceSettings
from mdame_domain.stock import PEXELS, PIXABAY, SOURCE_NAMES
from mdame_domain.waits import NotYet
from mdame_resources.health import Health, HealthScope, setting

if TYPE_CHECKING:
    from mdame_resources.providers.generated_visuals import GeneratedVisuals
    from mdame_resources.providers.relevance import GeminiRelevanceJudge
    from mdame_resources.providers.stock import StockFootage

GENERATED, STOCK, PROCEDURAL = "generated", "stock", "procedural"
# Where each model is set in a dimension's YAML, named in a finding's fix.
GENERATED_FIELD = "visuals.generated.model"
RELEVANCE_FIELD = "visuals.relevance.model"
# The doctor's search: a common word, three results (Pixabay's least), never cached.
PROBE_QUERY = "city"
PROBE_PER_PAGE = 3

Needed = dict[str, list[tuple[str, str]]]


def _chain(dimension: Any) -> tuple[str, ...] | None:
    """The dimension's visuals chain; None for a config without one (every engine may run)."""
    chain = getattr(getattr(dimension, "visuals", None), "chain", None)
    return tuple(chain) if chain is not None else None


def _uses(dimension: Any, engines: Sequence[str]) -> bool:
    chain = _chain(dimension)
    return chain is None or any(e in chain for e in engines)


def _dimensions(scope: HealthScope | None) -> Sequence[Any]:
    return scope.dimensions if scope else ()


def _answers(scope: HealthScope | None) -> Any:
    return scope.answers if scope else None


def generated_models(scope: HealthScope | None, default: GeneratedSettings) -> Needed:
    """Each image model the active dimensions whose chain has `generated` use -> (dimension,
    YAML field) pairs; with no active dimension, `default`'s under the dimension ''."""
    dimensions = _dimensions(scope)
    if not dimensions:
        return {default.model: [("", GENERATED_FIELD)]}
    needed: Needed = {}
    for dim in dimensions:
        if _uses(dim, [GENERATED]):
            model = _generated(dim, default).model
            needed.setdefault(model, []).append((dim.slug, GENERATED_FIELD))
    return needed


def _generated(dimension: Any, default: GeneratedSettings) -> GeneratedSettings:
    found = getattr(getattr(dimension, "visuals", None), "generated", None)
    return found if isinstance(found, GeneratedSettings) else default


def relevance_models(scope: HealthScope | None) -> Needed:
    """Each judge model of the active dimensions whose chain has a judged engine (any but
    procedural) -> (dimension, YAML field) pairs; with none active, the default's."""
    dimensions = _dimensions(scope)
    if not dimensions:
        return {RelevanceSettings().model: [("", RELEVANCE_FIELD)]}
    needed: Needed = {}
    for dim in dimensions:
        chain = _chain(dim)
        if chain is not None and not any(e != PROCEDURAL for e in chain):
            continue
        found = getattr(getattr(dim, "visuals", None), "relevance", None)
        model = (found if isinstance(found, RelevanceSettings) else RelevanceSettings()).model
        needed.setdefault(model, []).append((dim.slug, RELEVANCE_FIELD))
    return needed


def _unused(engine: str) -> Health:
    return Health(
        Status.SKIP, f"no active dimension's visuals.chain has {engine}: nothing to check"
    )


def generated_health(
    resource: GeneratedVisuals, timeout: float, scope: HealthScope | None
) -> list[Health]:
    """models.get for each image model (gemini/health.py's findings), then a FAIL for each one
    without a price per image: the engine refuses to call an unpriced model."""
    from mdame_resources.providers.gemini.health import models_health

    default = resource.settings()
    needed = generated_models(scope, default)
    if not needed:
        return [_unused(GENERATED)]
    key, key_name = setting(resource, "api_key")
    base_url = setting(resource, "base_url")[0] or None
    found = models_health(key, key_name, base_url, needed, timeout, _answers(scope))
    dimensions = _dimensions(scope) or [None]
    priced: set[str] = set()
    for dim in dimensions:
        if dim is not None and not _uses(dim, [GENERATED]):
            continue
        chosen = _generated(dim, default)
        if chosen.model in priced:
            continue
        try:
            chosen.price_micros  # noqa: B018 - raises UnknownPrice
            priced.add(chosen.model)
        except UnknownPrice as exc:
            priced.add(chosen.model)
            found.append(Health(Status.FAIL, str(exc), chosen.model))
    return found


def relevance_health(
    resource: GeminiRelevanceJudge, timeout: float, scope: HealthScope | None
) -> list[Health]:
    """models.get for each judge model (gemini/health.py's findings)."""
    from mdame_resources.providers.gemini.health import models_health

    needed = relevance_models(scope)
    if not needed:
        return [_unused("a judged engine")]
    key, key_name = setting(resource, "api_key")
    base_url = setting(resource, "base_url")[0] or None
    return models_health(key, key_name, base_url, needed, timeout, _answers(scope))


def stock_health(resource: StockFootage, timeout: float, scope: HealthScope | None) -> list[Health]:
    """Per source (its subject the source): with a key, one search of PROBE_PER_PAGE results
    through the engine's own client (StockClient: its request, its https rule, its answer
    classes), uncached and tried once; without one, not configured: WARN when an active
    dimension's chain has stock, SKIP otherwise."""
    from mdame_resources.providers.stock import (
        KEY_VARS,
        SEARCH_PATHS,
        URL_VARS,
        StockClient,
        StockRefused,
        StockSettings,
        StockUnavailable,
    )

    users = [dim.slug for dim in _dimensions(scope) if STOCK in (_chain(dim) or ())]
    fields = {PEXELS: "pexels", PIXABAY: "pixabay"}
    found: list[Health] = []
    for source in (PEXELS, PIXABAY):
        name, variable = SOURCE_NAMES[source], KEY_VARS[source]
        key = getattr(resource, f"{fields[source]}_api_key") or raw(variable)
        url = getattr(resource, f"{fields[source]}_url") or raw(URL_VARS[source])
        if not key.strip():
            if users:
                status, why = Status.WARN, f"{', '.join(users)} use stock: {name} is not searched"
            else:
                status, why = Status.SKIP, "no active dimension's visuals.chain has stock"
            found.append(Health(status, f"not configured: {variable} is not set ({why})", source))
            continue
        redact = Redactor([key])
        settings = StockSettings(timeout_s=timeout, transient_tries=1, cache_dir=None)
        try:
            with StockClient(
                {source: key},
                {source: url},
                settings,
                pexels_orientation=resource.pexels_orientation,
                per_page=PROBE_PER_PAGE,
            ) as client:
                where = display_url(client.urls[source] + SEARCH_PATHS[source])
                videos = client.search(source, PROBE_QUERY)
        except StockRefused as exc:
            found.append(Health(Status.FAIL, redact(str(exc)), source))
            continue
        except NotYet as wait:
            until = wait.until.isoformat() if wait.until else "its reset"
            message = f"{name} is rate-limited until {until} (transient: try again then)"
            found.append(Health(Status.WARN, message, source))
            continue
        except StockUnavailable as exc:
            message = f"{redact(str(exc))} (try again; check {URL_VARS[source]} if it persists)"
            found.append(Health(Status.WARN, message, source))
            continue
        except SettingsError as exc:  # an endpoint the client refuses (not https in prod)
            found.append(Health(Status.FAIL, redact(str(exc)), source))
            continue
        message = f"a search at {where} answered {len(videos)} videos"
        found.append(Health(Status.OK, redact(message), source))
    return found
