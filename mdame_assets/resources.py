"""The resources both code locations bind: state store, media store and the providers."""

from __future__ import annotations

from typing import Any

from mdame_resources.media import MediaStoreResource
from mdame_resources.providers.selection import providers_for_environment
from mdame_resources.state import StateStoreResource


def shared_resources() -> dict[str, Any]:
    return {
        "state": StateStoreResource(),
        "media": MediaStoreResource(),
        **providers_for_environment(),
    }
