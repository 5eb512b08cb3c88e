"""The resources both code locations bind: state store, media store and the providers."""

from __future__ import annotations

from typing import Any

import dagster as dg

from mdame_core import settings
from mdame_resources.media import MediaStoreResource
from mdame_resources.providers.selection import providers_for_environment
from mdame_resources.state import StateStoreResource

# The state store's URL holds a password outside the local cluster: it reaches the resource as
# a dg.EnvVar, read when a run builds the resource, so neither the definitions nor the UI ever
# hold its value (the UI shows the variable's name). The first one set wins.
DATABASE_URL_VARS = ("MDAME_APP_DATABASE_URL", "MDAME_DATABASE_URL")


def state_store_resource() -> StateStoreResource:
    for name in DATABASE_URL_VARS:
        if settings.is_set(name):
            return StateStoreResource(database_url=dg.EnvVar(name))
    return StateStoreResource()  # the project-local cluster: a derived URL, no secret


def shared_resources() -> dict[str, Any]:
    return {
        "state": state_store_resource(),
        "media": MediaStoreResource(),
        **providers_for_environment(),
    }
