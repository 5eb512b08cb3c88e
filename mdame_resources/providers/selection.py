"""Which provider implementation each environment gets (project_fully_featured style)."""

from __future__ import annotations

from typing import Any

import dagster as dg

from mdame_core import settings
from mdame_core.settings import SettingsError, mdame_env
from mdame_domain.prod_readiness import endpoint_problems, endpoints_message
from mdame_domain.visuals_chain import GENERATED, PROCEDURAL, STOCK
from mdame_resources.notify import OutboxNotifier, TelegramNotifier
from mdame_resources.providers.generated_visuals import GeneratedVisuals
from mdame_resources.providers.publisher import (
    InstagramPublisher,
    OutboxPublisher,
    TikTokPublisher,
    YouTubePublisher,
)
from mdame_resources.providers.relevance import GeminiRelevanceJudge
from mdame_resources.providers.safety import GeminiSafetyClassifier, RuleSafetyClassifier
from mdame_resources.providers.stock import StockFootage
from mdame_resources.providers.trends import FeedFileTrendSource, HttpFeedTrendSource
from mdame_resources.providers.visuals import DiffusersVisuals, ProceduralVisuals
from mdame_resources.providers.voice import EdgeGeminiVoiceChain, EspeakVoice
from mdame_resources.providers.writer import GeminiScriptWriter, LocalScriptWriter


def upload_grace_s() -> int:
    """How long a killed holder's upload request may still be in flight before another run
    takes its session over (MDAME_UPLOAD_GRACE_S, default 120): a setting, so a crash test
    need not wait it out. Every publisher, the outbox's included, speaks the same protocol."""
    return round(settings.get("MDAME_UPLOAD_GRACE_S"))


def offline_providers() -> dict[str, Any]:
    # Offline, every platform's videos go out to the outbox.
    outbox = OutboxPublisher(upload_grace_s=upload_grace_s())
    return {
        "trend_source": FeedFileTrendSource(),
        "safety": RuleSafetyClassifier(),
        "writer": LocalScriptWriter(),
        "visuals": ProceduralVisuals(),
        # Bound for the scene step's signature; the offline chain is procedural only.
        **picture_engines(""),
        "voice": EspeakVoice(),
        # The outbox stands in for every platform: bound under each one's key.
        "youtube_publisher": outbox,
        "tiktok_publisher": outbox,
        "instagram_publisher": outbox,
        "notifier": OutboxNotifier(),  # alerts to the outbox
    }


def picture_engines(gemini_key: Any) -> dict[str, Any]:
    """The network engines of a visuals chain and the relevance gate's judge. Gemini's key as
    a dg.EnvVar; the stock sources' keys are read when a client opens (MDAME_PEXELS_API_KEY,
    MDAME_PIXABAY_API_KEY), so a deployment without stock needs neither."""
    return {
        "generated_visuals": GeneratedVisuals(api_key=gemini_key),
        "stock_footage": StockFootage(),
        "relevance_judge": GeminiRelevanceJudge(api_key=gemini_key),
    }


def diffusers_visuals() -> DiffusersVisuals:
    """The production visuals; `mdame models` reads the models it
    needs from the same object. Its model folder: MDAME_MODEL_DIR, else $MDAME_HOME/models,
    resolved when a clip is generated (not a secret, so not a dg.EnvVar)."""
    return DiffusersVisuals()


def production_providers() -> dict[str, Any]:
    # Secrets and endpoints as dg.EnvVar: read when a run builds the resource (a missing one
    # fails that run, naming the variable), never stored in the definitions or shown in the UI.
    gemini_key = dg.EnvVar("GEMINI_API_KEY")
    return {
        # Only youtube_most_popular sources use the key; the MDAME_*_ROOT_URL endpoints are read
        # when a source is fetched (mdame_resources/providers/trends.py).
        "trend_source": HttpFeedTrendSource(youtube_api_key=dg.EnvVar("YOUTUBE_API_KEY")),
        "safety": GeminiSafetyClassifier(api_key=gemini_key),
        "writer": GeminiScriptWriter(api_key=gemini_key),
        "visuals": diffusers_visuals(),
        **picture_engines(gemini_key),
        "voice": EdgeGeminiVoiceChain(gemini_api_key=gemini_key),
        "youtube_publisher": YouTubePublisher(
            client_secrets_file=dg.EnvVar("MDAME_YOUTUBE_CLIENT_SECRETS"),
            upload_grace_s=upload_grace_s(),
        ),
        # The app's key and secret are read when a TikTok account is opened (see
        # TikTokPublisher); the API at MDAME_TIKTOK_BASE_URL, else open.tiktokapis.com.
        "tiktok_publisher": TikTokPublisher(
            upload_grace_s=upload_grace_s(),
            # Between status polls after the last chunk (TikTok allows 30 a minute).
            processing_poll_s=settings.get("MDAME_TIKTOK_STATUS_POLL_S"),
        ),
        # Each account's long-lived token is its sealed grant; the API at
        # MDAME_INSTAGRAM_GRAPH_URL, else graph.instagram.com.
        "instagram_publisher": InstagramPublisher(
            upload_grace_s=upload_grace_s(),
            processing_poll_s=settings.get("MDAME_INSTAGRAM_STATUS_POLL_S"),
        ),
        # The Bot API at MDAME_TELEGRAM_API_URL (default
        # api.telegram.org); chats from the dimension YAMLs, else MDAME_TELEGRAM_CHAT_ID.
        "notifier": TelegramNotifier(bot_token=dg.EnvVar("MDAME_TELEGRAM_BOT_TOKEN")),
    }


# Which set runs: "offline" (dev's default), "production" (prod's default, and the only set
# ENV=prod accepts: offline providers refuse to run there), or "fakes": the production providers
# against the local protocol servers of fakes (their endpoints come from the MDAME_*_URL
# variables), with procedural visuals (no GPU).
PROVIDERS_VAR = "MDAME_PROVIDERS"
PROVIDER_SETS = ("offline", "production", "fakes")


def provider_set() -> str:
    chosen: str | None = settings.get(PROVIDERS_VAR)  # a bad name is refused here
    return chosen or ("production" if mdame_env() == "prod" else "offline")


def providers_for_environment() -> dict[str, Any]:
    """The providers of the chosen set (see PROVIDERS_VAR). With ENV=prod, an endpoint setting
    that is not https fails here, as the definitions load (a code server's or a run worker's
    start), naming the variable and its value."""
    problems = endpoint_problems(settings.environment(), settings.raw("ENV"))
    if problems:
        raise SettingsError(endpoints_message(problems))
    chosen = provider_set()
    if chosen == "offline":
        return offline_providers()
    providers = production_providers()
    if chosen == "fakes":
        # No GPU: the network engines of a chain run against the local servers, and a chain
        # of diffusers alone falls back to procedural clips.
        providers["visuals"] = ProceduralVisuals(offers=[GENERATED, STOCK, PROCEDURAL])
        # The dimensions' sample feed files count too, beside any live source.
        providers["trend_source"] = HttpFeedTrendSource(
            youtube_api_key=dg.EnvVar("YOUTUBE_API_KEY"), read_files=True
        )
    return providers
