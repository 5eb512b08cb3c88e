"""Script writers: the deterministic local writer offline, Gemini in production."""

from __future__ import annotations

from mdame_domain.writer import Script, TopicBrief, write_script
from mdame_resources.providers.base import ProviderResource, not_built


class ScriptWriterResource(ProviderResource):
    # Integer micro-units reserved against the budget before each attempt.
    cost_per_attempt_micros: int = 0

    def write(self, brief: TopicBrief, attempt: int, threshold: float) -> Script | None:
        """A script whose best hook scores >= threshold, or None (the caller retries)."""
        raise NotImplementedError


class LocalScriptWriter(ScriptWriterResource):
    @property
    def offline(self) -> bool:
        return True

    def write(self, brief: TopicBrief, attempt: int, threshold: float) -> Script | None:
        return write_script(brief, attempt, threshold)


class GeminiScriptWriter(ScriptWriterResource):
    api_key: str
    model: str = "gemini-2.5-flash"
    cost_per_attempt_micros: int = 2_000

    def write(self, brief: TopicBrief, attempt: int, threshold: float) -> Script | None:
        raise not_built(self.provider_name, "the Gemini script writer")
