"""What every provider shares: a name for the ledgers, and the prod guard for offline ones."""

from __future__ import annotations

from typing import ClassVar

import dagster as dg

from mdame_core.settings import mdame_env
from mdame_resources.health import Health, HealthScope


class ProviderResource(dg.ConfigurableResource):
    """Base of every provider. `offline` providers refuse to run in ENV=prod. Every provider
    has its own health_check (what `mdame doctor` prints for it), unless it says why it needs
    none in `no_health_check`, which only an offline provider may
    (tests/cli/test_provider_health_coverage.py holds every bound provider to this)."""

    no_health_check: ClassVar[str] = ""

    @property
    def provider_name(self) -> str:
        return type(self).__name__

    @property
    def offline(self) -> bool:
        return False

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        if self.offline and mdame_env() == "prod":
            raise RuntimeError(
                f"{self.provider_name} is an offline provider and ENV=prod refuses it; "
                "configure the production provider"
            )

    def health_check(self, timeout: float, scope: HealthScope | None = None) -> list[Health]:
        """One cheap call through the client the provider's work uses, against the endpoint it
        would use, each call bounded by `timeout` seconds: what it found, the cause and the fix
        named, never a secret (`mdame doctor` prints it). `scope`: what the check covers beyond
        the provider's own settings (the active dimensions, a state store)."""
        raise NotImplementedError(f"{self.provider_name} has no health check")


def not_built(provider: str, what: str) -> NotImplementedError:
    """Production providers not built yet say so loudly instead of pretending."""
    return NotImplementedError(
        f"{provider}: {what} is not built yet; run with ENV=dev and the offline providers"
    )
