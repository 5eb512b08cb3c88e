"""Every provider bound in every provider set (offline, production, fakes) has a health check of
its own, which `mdame doctor` runs, or says why it needs none (`no_health_check`), which only
an offline provider may. A provider added later without one fails here."""

from __future__ import annotations

from typing import Any

import pytest

from mdame_resources.providers import selection
from mdame_resources.providers.base import ProviderResource

# Production providers that have no health check yet, each named with what it would check.
# The list may only shrink: one that gains a check fails below until it is taken off.
KNOWN_GAPS: dict[str, str] = {}


def bound_providers() -> list[tuple[str, str, Any]]:
    """(set, resource key, resource) of every provider each set binds."""
    sets = {
        "offline": selection.offline_providers(),
        "production": selection.production_providers(),
    }
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ENV", "dev")
        env.setenv(selection.PROVIDERS_VAR, "fakes")
        sets["fakes"] = selection.providers_for_environment()
    assert set(sets) == set(selection.PROVIDER_SETS)
    return [(name, key, r) for name, bound in sets.items() for key, r in bound.items()]


def own_check(resource: Any) -> bool:
    return type(resource).health_check is not ProviderResource.health_check


def test_every_bound_provider_has_a_health_check_or_is_offline_and_says_why() -> None:
    missing, unexplained, gained = [], [], []
    for chosen, key, resource in bound_providers():
        name = type(resource).__name__
        where = f"{chosen}:{key} ({name})"
        assert isinstance(resource, ProviderResource), f"{where} is not a ProviderResource"
        if own_check(resource):
            if name in KNOWN_GAPS:
                gained.append(name)
            continue
        if name in KNOWN_GAPS:
            continue
        if not resource.no_health_check:
            missing.append(where)
        elif not resource.offline:
            unexplained.append(f"{where}: only an offline provider may need no health check")
    assert not missing, f"providers without a health_check: {missing}"
    assert not unexplained, unexplained
    assert not gained, f"these have a health check now: take them off KNOWN_GAPS: {gained}"


def test_a_provider_added_without_a_health_check_is_caught() -> None:
    class NewProvider(ProviderResource):
        pass

    class OfflineSaysWhy(ProviderResource):
        no_health_check = "offline: it calls no service"

        @property
        def offline(self) -> bool:
            return True

    assert not own_check(NewProvider()) and not NewProvider().no_health_check
    assert OfflineSaysWhy().no_health_check and OfflineSaysWhy().offline
    with pytest.raises(NotImplementedError, match="NewProvider has no health check"):
        NewProvider().health_check(1.0)
