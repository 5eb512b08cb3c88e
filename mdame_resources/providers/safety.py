"""Content safety: a rule classifier offline, Gemini in production."""

from __future__ import annotations

from collections.abc import Sequence

from mdame_domain.safety import SafetyDecision, classify, profile_for
from mdame_resources.providers.base import ProviderResource, not_built


class SafetyClassifierResource(ProviderResource):
    def decide(self, text: str, profile: str, extra_blocked: Sequence[str] = ()) -> SafetyDecision:
        raise NotImplementedError


class RuleSafetyClassifier(SafetyClassifierResource):
    """Offline: blocked terms per profile plus a prompt firewall, deterministic."""

    @property
    def offline(self) -> bool:
        return True

    def decide(self, text: str, profile: str, extra_blocked: Sequence[str] = ()) -> SafetyDecision:
        return classify(text, profile_for(profile, extra_blocked))


class GeminiSafetyClassifier(SafetyClassifierResource):
    api_key: str
    model: str = "gemini-2.5-flash"

    def decide(self, text: str, profile: str, extra_blocked: Sequence[str] = ()) -> SafetyDecision:
        raise not_built(self.provider_name, "the Gemini safety classifier")
