"""DimensionConfig: one dimension's validated settings, as the pipeline reads them and as the
registry stores them (to_json; dimension_from_json in loading reads that form back)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from mdame_domain.adaptive import (
    DEFAULT_TREND_VOLUME_GATE,
    AdaptiveLimits,
    TunedParams,
    tuned_params,
)
from mdame_domain.captions import CaptionStyle
from mdame_domain.dimensions.constants import DEFAULT_DAILY_BUDGET_MICROS
from mdame_domain.dimensions.media import MusicSettings, VisualsSettings, VoiceSettings
from mdame_domain.dimensions.publishing import (
    AlertSettings,
    InstagramSettings,
    PublishingAccount,
    TikTokSettings,
    YouTubeSettings,
)
from mdame_domain.feed_sources import FeedSource, source_from_feed_entry
from mdame_domain.paid_calls import DEFAULT_TEXT_MODEL, DEFAULT_TTS_MODEL
from mdame_domain.retention import RetentionSettings


@dataclass(frozen=True)
class DimensionConfig:
    slug: str
    title: str
    language: str
    voice: str
    visual_style: str
    palette: tuple[str, ...]
    safety_profile: str
    feeds: tuple[str, ...]
    keywords: tuple[str, ...]
    accounts: tuple[PublishingAccount, ...]
    # The platforms the dimension publishes to, each with its account in `accounts` (YAML:
    # publish_to; absent: every account's). Empty: every account's.
    publish_to: tuple[str, ...] = ()
    videos_per_day: int = 1
    hook_threshold: float = 0.72
    blocked_terms: tuple[str, ...] = ()
    made_for_kids: bool = False
    synthetic_media: bool = True
    active: bool = True
    # Every review a render needs on its exact bytes before it may be published.
    required_reviews: tuple[str, ...] = ("technical",)
    # Days either side of a partition in which a covered topic is not picked again.
    topic_lookback_days: int = 14
    # YouTube publishing: the video metadata the dimension sets; see YouTubeSettings.
    youtube: YouTubeSettings = field(default_factory=lambda: YouTubeSettings())
    # TikTok and Instagram publishing: what their posts get; see TikTokSettings and
    # InstagramSettings.
    tiktok: TikTokSettings = field(default_factory=lambda: TikTokSettings())
    instagram: InstagramSettings = field(default_factory=lambda: InstagramSettings())
    # Edge-TTS and Gemini TTS voice settings.
    tts: VoiceSettings = field(default_factory=VoiceSettings)
    music: MusicSettings = field(default_factory=MusicSettings)
    # -- Gemini writer, safety and budget --------------------------
    # The daily budget of paid model calls (YAML: daily_budget_usd), in integer micro-dollars.
    daily_budget_micros: int = DEFAULT_DAILY_BUDGET_MICROS
    gemini_text_model: str = DEFAULT_TEXT_MODEL
    gemini_tts_model: str = DEFAULT_TTS_MODEL
    # Price overrides: (model, input micros per 1M tokens, output micros per 1M tokens).
    gemini_prices: tuple[tuple[str, int, int], ...] = ()
    tone: str = "curious, clear and friendly"
    call_to_action: str = ""  # empty: the writer asks for one that fits the dimension
    target_seconds: int = 45
    # --- live trend feeds: typed sources besides `feeds:` (files or
    # feed URLs); see mdame_domain/feed_sources.py for the kinds and their fields.
    sources: tuple[FeedSource, ...] = ()
    # Generated visuals: see VisualsSettings.
    visuals: VisualsSettings = field(default_factory=VisualsSettings)
    # Caption font, size, line limits and colours.
    captions: CaptionStyle = field(default_factory=CaptionStyle)
    # --- render quality gates: the render's accepted duration in
    # seconds, inclusive (YAML: duration_range_s: [15, 180]; YouTube Shorts allow up to 180).
    duration_range_s: tuple[float, float] = (15.0, 180.0)
    # --- Adaptive Engine: the trends stage's minimum number of
    # trends a day (YAML: trend_volume_gate), and the hard limits and weekly steps within which
    # the engine tunes the dimension (YAML: adaptive: {...}; see mdame_domain/adaptive.py).
    trend_volume_gate: int = DEFAULT_TREND_VOLUME_GATE
    adaptive: AdaptiveLimits = field(default_factory=AdaptiveLimits)
    # --- media retention: YAML `retention: {render_days: 30,
    # voice_days: 7}`; an absent value takes the global default (mdame_domain/retention.py).
    retention: RetentionSettings = field(default_factory=RetentionSettings)
    alerts: AlertSettings = field(default_factory=AlertSettings)
    source: str = field(default="", compare=False)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def publishing_accounts(self) -> tuple[PublishingAccount, ...]:
        """The accounts it publishes to: those of the platforms in publish_to."""
        return tuple(
            a for a in self.accounts if not self.publish_to or a.platform in self.publish_to
        )

    def tuned(self, stored: Mapping[str, Any] | None, version: int = 0) -> TunedParams:
        """The parameters a day's run reads: a stored set over these values."""
        return tuned_params(
            self.hook_threshold,
            self.videos_per_day,
            self.trend_volume_gate,
            self.adaptive,
            stored,
            version,
        )

    def trend_sources(self) -> tuple[FeedSource, ...]:
        """Every trend source: the `feeds:` entries first (files or URLs), then `sources:`."""
        return tuple(source_from_feed_entry(f) for f in self.feeds) + self.sources
