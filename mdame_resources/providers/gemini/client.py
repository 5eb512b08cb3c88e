"""The one Gemini client, through the official google-genai SDK, and the transport errors it
raises.

The API key comes from dg.EnvVar("GEMINI_API_KEY") and is never logged, stored or put in an
error message; the endpoint from MDAME_GEMINI_BASE_URL when set (a gateway, or fakes).
"""

from __future__ import annotations

import contextlib
import importlib
from types import ModuleType
from typing import TYPE_CHECKING

import httpx

from mdame_core import settings

if TYPE_CHECKING:  # the SDK costs most of a second to import: loaded when a client is made
    from google import genai

BASE_URL_ENV = "MDAME_GEMINI_BASE_URL"
API_VERSION = "v1beta"  # the SDK's default is v1, which lacks some generation fields
DEFAULT_TIMEOUT_S = 60.0


def _http_modules() -> list[ModuleType]:
    """google-genai talks through httpx, or its fork httpx2 in recent releases: both raise
    their own transport exceptions."""
    modules: list[ModuleType] = [httpx]
    with contextlib.suppress(ImportError):
        modules.append(importlib.import_module("httpx2"))
    return modules


def http_errors(*names: str) -> tuple[type[BaseException], ...]:
    return tuple(getattr(m, n) for m in _http_modules() for n in names if hasattr(m, n))


# Nothing reached the server: a definite failure, nothing billed.
NOT_SENT = http_errors("ConnectError", "ConnectTimeout", "PoolTimeout")
# Sent, and no answer: the outcome is unknown.
NO_ANSWER = http_errors("TimeoutException", "TransportError")


def make_client(
    api_key: str, base_url: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S
) -> genai.Client:
    """The one Gemini client: key from the caller (dg.EnvVar), base URL from the argument or
    MDAME_GEMINI_BASE_URL, api_version pinned, SDK retries off, an explicit timeout (the SDK
    has none by default, so a hung server would block forever)."""
    if not api_key:
        raise ValueError("GEMINI_API_KEY is empty: set it (the key is required even locally)")
    from google import genai
    from google.genai import types

    options = types.HttpOptions(
        base_url=base_url or settings.raw(BASE_URL_ENV) or None,
        api_version=API_VERSION,
        timeout=int(timeout_s * 1000),
        retry_options=None,
    )
    return genai.Client(api_key=api_key, http_options=options)
