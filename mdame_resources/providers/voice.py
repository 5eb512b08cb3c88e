"""Voice: espeak-ng offline; Edge-TTS, then Gemini TTS, then HALT in production."""

from __future__ import annotations

from pathlib import Path

from mdame_domain.voice import VoiceSynthesisError, VoiceTrack, synthesize_espeak
from mdame_resources.providers.base import ProviderResource, not_built


class VoiceResource(ProviderResource):
    def synthesize(self, text: str, voice: str, out_wav: Path) -> VoiceTrack:
        """A voice track, or VoiceSynthesisError when every provider failed (the caller HALTs)."""
        raise NotImplementedError


class EspeakVoice(VoiceResource):
    words_per_minute: int = 165

    @property
    def offline(self) -> bool:
        return True

    def synthesize(self, text: str, voice: str, out_wav: Path) -> VoiceTrack:
        return synthesize_espeak(text, voice, str(out_wav), self.words_per_minute)


class EdgeGeminiVoiceChain(VoiceResource):
    gemini_api_key: str = ""

    def synthesize(self, text: str, voice: str, out_wav: Path) -> VoiceTrack:
        raise not_built(self.provider_name, "the Edge-TTS -> Gemini TTS chain")


__all__ = ["EdgeGeminiVoiceChain", "EspeakVoice", "VoiceResource", "VoiceSynthesisError"]
