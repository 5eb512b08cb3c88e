"""Which provider implementation each environment gets (project_fully_featured style)."""

from __future__ import annotations

from typing import Any

import dagster as dg

from mdame_core.settings import mdame_env
from mdame_resources.providers.publisher import OutboxPublisher, YouTubePublisher
from mdame_resources.providers.safety import GeminiSafetyClassifier, RuleSafetyClassifier
from mdame_resources.providers.trends import FeedFileTrendSource, HttpFeedTrendSource
from mdame_resources.providers.visuals import DiffusersVisuals, ProceduralVisuals
from mdame_resources.providers.voice import EdgeGeminiVoiceChain, EspeakVoice
from mdame_resources.providers.writer import GeminiScriptWriter, LocalScriptWriter


def offline_providers() -> dict[str, Any]:
    return {
        "trend_source": FeedFileTrendSource(),
        "safety": RuleSafetyClassifier(),
        "writer": LocalScriptWriter(),
        "visuals": ProceduralVisuals(),
        "voice": EspeakVoice(),
        "publisher": OutboxPublisher(),
    }


def production_providers() -> dict[str, Any]:
    # Secrets and endpoints as dg.EnvVar: read when a run builds the resource (a missing one
    # fails that run, naming the variable), never stored in the definitions or shown in the UI.
    gemini_key = dg.EnvVar("GEMINI_API_KEY")
    return {
        "trend_source": HttpFeedTrendSource(),
        "safety": GeminiSafetyClassifier(api_key=gemini_key),
        "writer": GeminiScriptWriter(api_key=gemini_key),
        "visuals": DiffusersVisuals(model_dir=dg.EnvVar("MDAME_DIFFUSERS_MODEL_DIR")),
        "voice": EdgeGeminiVoiceChain(gemini_api_key=gemini_key),
        "publisher": YouTubePublisher(
            client_secrets_file=dg.EnvVar("MDAME_YOUTUBE_CLIENT_SECRETS")
        ),
    }


def providers_for_environment() -> dict[str, Any]:
    """dev runs the offline providers; prod the production ones (and refuses offline ones)."""
    return production_providers() if mdame_env() == "prod" else offline_providers()
