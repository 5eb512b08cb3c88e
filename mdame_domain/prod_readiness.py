"""What stops a run with ENV=prod before it starts: prod publishes for real, so it reads live
trend sources with the production providers, never the repository's sample feed files (their
stories are invented) nor the offline or fake providers; and every endpoint setting it is
given is https (wss for Edge-TTS's socket), never plain http, to a loopback address included:
keys, tokens and the videos themselves go there."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from mdame_domain.dimensions import DimensionConfig
from mdame_domain.redaction import redact

# The settings that name where a provider's requests go, with the one scheme ENV=prod accepts.
# In dev, http on a loopback address is accepted too (the local protocol servers in fakes/).
ENDPOINT_VARS: dict[str, str] = {
    "MDAME_YOUTUBE_ROOT_URL": "https",
    "MDAME_GOOGLE_TOKEN_URI": "https",
    "MDAME_TIKTOK_BASE_URL": "https",
    "MDAME_TIKTOK_AUTH_URL": "https",
    "MDAME_INSTAGRAM_GRAPH_URL": "https",
    "MDAME_INSTAGRAM_AUTH_URL": "https",
    "MDAME_INSTAGRAM_TOKEN_URL": "https",
    "MDAME_GEMINI_BASE_URL": "https",
    "MDAME_EDGE_TTS_URL": "wss",
    "MDAME_TELEGRAM_API_URL": "https",
    "MDAME_GOOGLE_TRENDS_ROOT_URL": "https",
    "MDAME_REDDIT_ROOT_URL": "https",
    "MDAME_PEXELS_URL": "https",
    "MDAME_PIXABAY_URL": "https",
}


def endpoint_problems(environ: Mapping[str, str], env: str) -> list[str]:
    """With ENV=prod, one line per endpoint setting (ENDPOINT_VARS) that is set and is not an
    absolute URL of its scheme, naming the variable and its value (credentials in it masked);
    empty otherwise."""
    if env != "prod":
        return []
    problems = []
    for name, scheme in ENDPOINT_VARS.items():
        value = environ.get(name, "").strip()
        if not value:
            continue  # unset: the provider's own https endpoint
        parts = urlsplit(value)
        if parts.scheme.lower() != scheme or not parts.hostname:
            problems.append(
                f"{name}={redact(value)[:200]!r}: ENV=prod sends only to {scheme}:// URLs "
                "(plain http, to a loopback address too, is for ENV=dev's local servers)"
            )
    return problems


def prod_problems(
    dimensions: Sequence[DimensionConfig],
    provider_set: str,
    environ: Mapping[str, str] | None = None,
) -> list[str]:
    """One line per problem; empty when a prod run may start. `environ`: the endpoint settings
    to check too (see endpoint_problems)."""
    problems = []
    if provider_set != "production":
        problems.append(
            f"MDAME_PROVIDERS={provider_set}: ENV=prod runs the production providers only "
            "(unset MDAME_PROVIDERS)"
        )
    problems += endpoint_problems(environ or {}, "prod")
    for dim in dimensions:
        if dim.active and all(source.is_file for source in dim.trend_sources()):
            files = ", ".join(s.url for s in dim.trend_sources())
            problems.append(
                f"dimension {dim.slug!r} reads only sample feed files ({files}): give it live "
                "`sources:` or http(s) `feeds:` in its YAML, or deactivate it"
            )
    return problems


def prod_problems_message(problems: Sequence[str]) -> str:
    return (
        "ENV=prod needs live trend sources and the production providers (credentials set; "
        "see README Providers), with https endpoints; use ENV=dev for the offline demo. "
        + "; ".join(problems)
    )


def endpoints_message(problems: Sequence[str]) -> str:
    return "ENV=prod sends keys and tokens over https only: " + "; ".join(problems)
