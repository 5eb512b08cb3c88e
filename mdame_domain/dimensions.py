"""The dimension registry: one YAML file per content niche, validated into DimensionConfig.

A malformed file raises DimensionConfigError naming the file and the field, so the registry
sync can report it and carry on with the other dimensions.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mdame_domain.adaptive import (
    DEFAULT_TREND_VOLUME_GATE,
    AdaptiveConfigError,
    AdaptiveLimits,
    TunedParams,
    parse_adaptive,
    tuned_params,
)
from mdame_domain.audio_mix import DEFAULT_MUSIC_VOLUME_DB, MUSIC_VOLUME_RANGE_DB
from mdame_domain.captions import CAPTION_FONTS, CaptionStyle
from mdame_domain.diffusion import DEFAULT_ENGINE, ENGINES
from mdame_domain.feed_sources import (
    FeedSource,
    SourceConfigError,
    parse_sources,
    source_from_feed_entry,
    source_from_json,
)
from mdame_domain.paid_calls import DEFAULT_TEXT_MODEL, DEFAULT_TTS_MODEL
from mdame_domain.retention import MAX_DAYS, RetentionSettings, check_days

SLUG_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{1,39}$")
COLOUR_PATTERN = re.compile(r"^#[0-9a-fA-F]{6}$")
PLATFORMS = ("outbox", "youtube")
SAFETY_PROFILES = ("general", "family", "strict")
MAX_SHORT_S = 180.0  # YouTube Shorts' longest
CHECK_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_.-]{0,62}$")  # as mdame.reviews.check_name
# YouTube's daily quota resets at midnight Pacific time.
DEFAULT_QUOTA_TIMEZONE = "America/Los_Angeles"
# Paid model calls: $1.00 a day unless the YAML says otherwise.
DEFAULT_DAILY_BUDGET_MICROS = 1_000_000
MAX_DAILY_BUDGET_USD = 10_000
MODEL_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")

# --- production voice settings ------------
# The `tts:` mapping of a dimension file. The top-level `voice:` stays the espeak-ng voice.
EDGE_VOICE_PATTERN = re.compile(r"^[a-z]{2,3}-[A-Z]{2,}(-[A-Za-z]+)?-[A-Za-z]+Neural$")
EDGE_RATE_PATTERN = re.compile(r"^[+-]\d{1,3}%$")
EDGE_PITCH_PATTERN = re.compile(r"^[+-]\d{1,3}Hz$")
# Gemini TTS's prebuilt voices (speech_config.voice_config.prebuilt_voice_config.voice_name).
GEMINI_VOICES = frozenset(
    [
        "Zephyr",
        "Puck",
        "Charon",
        "Kore",
        "Fenrir",
        "Leda",
        "Orus",
        "Aoede",
        "Callirrhoe",
        "Autonoe",
        "Enceladus",
        "Iapetus",
        "Umbriel",
        "Algieba",
        "Despina",
        "Erinome",
        "Algenib",
        "Rasalgethi",
        "Laomedeia",
        "Achernar",
        "Alnilam",
        "Schedar",
        "Gacrux",
        "Pulcherrima",
        "Achird",
        "Zubenelgenubi",
        "Vindemiatrix",
        "Sadachbia",
        "Sadaltager",
        "Sulafat",
    ]
)


@dataclass(frozen=True)
class VoiceSettings:
    """Edge-TTS voice, Gemini TTS prebuilt voice, and the speaking rate and pitch (Edge's
    forms: '+10%', '-5Hz'; Gemini gets the same voice for both dimensions' fallbacks)."""

    edge_voice: str = "en-US-AriaNeural"
    gemini_voice: str = "Kore"
    rate: str = "+0%"
    pitch: str = "+0Hz"


def _voice_settings(r: _Reader) -> VoiceSettings:
    tts = r.get("tts", Mapping, {})
    unknown = set(tts) - {"edge_voice", "gemini_voice", "rate", "pitch"}
    if unknown:
        raise r.fail("tts", f"unknown keys {sorted(unknown)}")
    values = {**VoiceSettings().__dict__, **tts}
    for name, value in values.items():
        if not isinstance(value, str):
            raise r.fail(f"tts.{name}", f"expected str, got {type(value).__name__}")
    if not EDGE_VOICE_PATTERN.match(values["edge_voice"]):
        raise r.fail("tts.edge_voice", "expected an Edge voice like 'en-US-AriaNeural'")
    if values["gemini_voice"] not in GEMINI_VOICES:
        raise r.fail("tts.gemini_voice", "expected a Gemini prebuilt voice like 'Kore'")
    if not EDGE_RATE_PATTERN.match(values["rate"]) or not -50 <= int(values["rate"][:-1]) <= 100:
        raise r.fail("tts.rate", "expected a percentage from '-50%' to '+100%'")
    if not EDGE_PITCH_PATTERN.match(values["pitch"]) or not -50 <= int(values["pitch"][:-2]) <= 50:
        raise r.fail("tts.pitch", "expected hertz from '-50Hz' to '+50Hz'")
    return VoiceSettings(**values)


# --- generated visuals: the `visuals:` mapping of a dimension
# file picks the diffusers path its clips take (the procedural provider ignores it).


@dataclass(frozen=True)
class VisualsSettings:
    """engine: 'svd' (text-to-image, then Stable Video Diffusion) or 'animatediff'."""

    engine: str = DEFAULT_ENGINE


def _visuals_settings(r: _Reader) -> VisualsSettings:
    raw = r.get("visuals", Mapping, {})
    unknown = set(raw) - {"engine"}
    if unknown:
        raise r.fail(f"visuals.{sorted(unknown)[0]}", "is not a visuals setting")
    engine = raw.get("engine", DEFAULT_ENGINE)
    if engine not in ENGINES:
        raise r.fail("visuals.engine", f"must be one of {', '.join(ENGINES)}")
    return VisualsSettings(engine=engine)


# --- caption style: the `captions:` mapping of a dimension file --
_CAPTION_INT_RANGES = {
    "size": (24, 160),
    "max_chars_per_line": (8, 60),
    "max_lines": (1, 2),
    "max_words": (1, 12),
    "outline": (0, 12),
    "shadow": (0, 12),
}


def _caption_style(r: _Reader) -> CaptionStyle:
    raw = r.get("captions", Mapping, {})
    unknown = set(raw) - set(CaptionStyle.__dataclass_fields__)
    if unknown:
        raise r.fail(f"captions.{sorted(unknown)[0]}", "is not a caption setting")
    values = {**CaptionStyle().__dict__, **raw}
    if values["font"] not in CAPTION_FONTS:
        raise r.fail("captions.font", f"must be one of {', '.join(sorted(CAPTION_FONTS))}")
    for name, (low, high) in _CAPTION_INT_RANGES.items():
        value = values[name]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise r.fail(f"captions.{name}", f"expected an integer from {low} to {high}")
    for name in ("primary", "highlight"):
        if not isinstance(values[name], str) or not COLOUR_PATTERN.match(values[name]):
            raise r.fail(f"captions.{name}", "expected a colour like '#FFD400'")
    if values["primary"].lower() == values["highlight"].lower():
        raise r.fail("captions.highlight", "must differ from captions.primary")
    return CaptionStyle(**values)


# --- music bed -------------------------------------------------------
# The `music:` mapping: a library folder of licensed tracks (each with <track>.license.json;
# empty: a procedural bed generated per render) and the bed's level under the voice in dB.


@dataclass(frozen=True)
class MusicSettings:
    library: str = ""
    volume_db: float = DEFAULT_MUSIC_VOLUME_DB


def _music_settings(r: _Reader) -> MusicSettings:
    music = r.get("music", Mapping, {})
    unknown = set(music) - {"library", "volume_db"}
    if unknown:
        raise r.fail("music", f"unknown keys {sorted(unknown)}")
    library = music.get("library", "")
    if library is None:
        library = ""
    if not isinstance(library, str):
        raise r.fail("music.library", f"expected a folder path, got {type(library).__name__}")
    volume = music.get("volume_db", MusicSettings.volume_db)
    if isinstance(volume, bool) or not isinstance(volume, int | float):
        raise r.fail("music.volume_db", f"expected a number, got {type(volume).__name__}")
    low, high = MUSIC_VOLUME_RANGE_DB
    if not low <= float(volume) <= high:
        raise r.fail("music.volume_db", f"must be between {low:g} and {high:g} dB")
    return MusicSettings(library=library.strip(), volume_db=float(volume))


class DimensionConfigError(ValueError):
    def __init__(self, source: str, field_name: str, reason: str) -> None:
        super().__init__(f"dimension file {source!r}: field {field_name!r}: {reason}")
        self.source = source
        self.field_name = field_name


@dataclass(frozen=True)
class PublishingAccount:
    platform: str
    handle: str
    daily_quota_units: int
    quota_timezone: str = DEFAULT_QUOTA_TIMEZONE


# YouTube publishing: the `youtube:` mapping of a dimension file.
@dataclass(frozen=True)
class YouTubeSettings:
    """Video metadata every video of the dimension gets (validated again before upload).
    tags: None means the dimension's keywords."""

    category_id: str = "28"  # Science & Technology
    privacy_status: str = "public"
    notify_subscribers: bool = False
    hashtags: tuple[str, ...] = ()
    tags: tuple[str, ...] | None = None


def _youtube(r: _Reader) -> YouTubeSettings:
    from mdame_domain.published_text import contact_detail_problem
    from mdame_domain.video_metadata import CATEGORIES, PRIVACY

    raw = r.get("youtube", Mapping, {})
    sub = _Reader(raw, f"{r.source} (youtube)")
    unknown = set(raw) - {"category_id", "privacy_status", "notify_subscribers", "hashtags", "tags"}
    if unknown:
        raise r.fail(f"youtube.{sorted(unknown)[0]}", "is not a youtube setting")
    category = str(sub.get("category_id", (str, int), "28"))
    if category not in CATEGORIES:
        raise r.fail("youtube.category_id", f"must be one of {', '.join(sorted(CATEGORIES))}")
    privacy = sub.get("privacy_status", str, "public")
    if privacy not in PRIVACY:
        raise r.fail("youtube.privacy_status", f"must be one of {', '.join(PRIVACY)}")
    notify = raw.get("notify_subscribers", False)
    if not isinstance(notify, bool):
        raise r.fail("youtube.notify_subscribers", "expected true or false")
    lists: dict[str, tuple[str, ...]] = {}
    for name in ("hashtags", "tags"):
        values = raw.get(name, [])
        if not isinstance(values, list) or not all(
            isinstance(v, str) and v.strip() for v in values
        ):
            raise r.fail(f"youtube.{name}", "expected a list of non-empty strings")
        lists[name] = tuple(values)
    hashtags = lists["hashtags"]
    tags = lists["tags"] if "tags" in raw else None
    if any(" " in h or "#" in h.lstrip("#") for h in hashtags):
        raise r.fail("youtube.hashtags", "a hashtag is one word, like 'science'")
    # Published as written on every video: a link or handle here is refused, not stripped.
    # Without youtube.tags the keywords are the tags.
    published = {"youtube.hashtags": hashtags}
    published["youtube.tags" if tags is not None else "keywords"] = (
        tags if tags is not None else r.strings("keywords", [])
    )
    for name, values in published.items():
        for value in values:
            problem = contact_detail_problem(value)
            if problem:
                raise r.fail(name, f"{value!r} {problem}")
    return YouTubeSettings(category, privacy, notify, hashtags, tags)


# --- alerts: the `alerts:` mapping of a dimension file ----------
# telegram_chat: the Telegram chat this dimension's alerts and reports go to (a numeric chat id,
# negative for groups and channels, or "@channelusername"); empty: MDAME_TELEGRAM_CHAT_ID.
TELEGRAM_CHAT_PATTERN = re.compile(r"^(-?\d{1,20}|@[A-Za-z][A-Za-z0-9_]{4,31})$")


@dataclass(frozen=True)
class AlertSettings:
    telegram_chat: str = ""


def _alert_settings(r: _Reader) -> AlertSettings:
    raw = r.get("alerts", Mapping, {})
    unknown = set(raw) - {"telegram_chat"}
    if unknown:
        raise r.fail(f"alerts.{sorted(unknown)[0]}", "is not an alerts setting")
    chat = raw.get("telegram_chat", "")
    if isinstance(chat, int) and not isinstance(chat, bool):
        chat = str(chat)
    if not isinstance(chat, str) or (chat and not TELEGRAM_CHAT_PATTERN.match(chat)):
        raise r.fail(
            "alerts.telegram_chat",
            "expected a Telegram chat id like -1001234567890 or a channel like '@mdame_alerts'",
        )
    return AlertSettings(chat)


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


class _Reader:
    """Typed field access that turns every mistake into a DimensionConfigError."""

    def __init__(self, data: Mapping[str, Any], source: str) -> None:
        self.data, self.source = data, source

    def fail(self, name: str, reason: str) -> DimensionConfigError:
        return DimensionConfigError(self.source, name, reason)

    def get(self, name: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        if name not in self.data:
            if default is ...:
                raise self.fail(name, "is required")
            return default
        value = self.data[name]
        # bool is an int subclass: reject it where a number is meant.
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
            raise self.fail(name, f"expected {_kind_name(kind)}, got {type(value).__name__}")
        return value

    def strings(self, name: str, default: Any = ...) -> tuple[str, ...]:
        values = self.get(name, list, default)
        if not all(isinstance(v, str) and v.strip() for v in values):
            raise self.fail(name, "expected a list of non-empty strings")
        return tuple(values)


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in _as_tuple(kind))


def parse_dimension(data: Any, source: str) -> DimensionConfig:
    if not isinstance(data, Mapping):
        raise DimensionConfigError(source, "<root>", "expected a mapping of fields")
    r = _Reader(data, source)
    slug = r.get("slug", str)
    if not SLUG_PATTERN.match(slug):
        raise r.fail("slug", "must be 2-40 chars of a-z, 0-9, '-' or '_', starting with a letter")
    palette = r.strings("palette")
    if len(palette) < 2 or not all(COLOUR_PATTERN.match(c) for c in palette):
        raise r.fail("palette", "expected at least two colours like '#1e88e5'")
    profile = r.get("safety_profile", str, "general")
    if profile not in SAFETY_PROFILES:
        raise r.fail("safety_profile", f"must be one of {', '.join(SAFETY_PROFILES)}")
    videos = r.get("videos_per_day", int, 1)
    if not 1 <= videos <= 10:
        raise r.fail("videos_per_day", "must be between 1 and 10")
    threshold = float(r.get("hook_threshold", (int, float), 0.72))
    if not 0.0 < threshold <= 1.0:
        raise r.fail("hook_threshold", "must be in (0, 1]")
    feeds = r.strings("feeds", [])
    sources = _sources(r)
    if not feeds and not sources:
        raise r.fail("feeds", "needs at least one feed (or an entry in sources)")
    flags = r.get("flags", Mapping, {})
    required_reviews = r.strings("required_reviews", ["technical"])
    if not required_reviews or not all(CHECK_NAME_PATTERN.match(c) for c in required_reviews):
        raise r.fail(
            "required_reviews", "expected a non-empty list of check names like 'technical'"
        )
    lookback = r.get("topic_lookback_days", int, 14)
    if not 0 <= lookback <= 365:
        raise r.fail("topic_lookback_days", "must be between 0 and 365")
    return DimensionConfig(
        slug=slug,
        title=r.get("title", str),
        language=r.get("language", str, "en"),
        voice=r.get("voice", str, "en-us"),
        visual_style=r.get("visual_style", str),
        palette=palette,
        safety_profile=profile,
        feeds=feeds,
        keywords=r.strings("keywords", []),
        accounts=_accounts(r),
        videos_per_day=videos,
        hook_threshold=threshold,
        blocked_terms=r.strings("blocked_terms", []),
        made_for_kids=_flag(r, flags, "made_for_kids", False),
        synthetic_media=_flag(r, flags, "synthetic_media", True),
        active=r.get("active", bool, True),
        required_reviews=tuple(dict.fromkeys(required_reviews)),
        topic_lookback_days=lookback,
        youtube=_youtube(r),
        tts=_voice_settings(r),
        music=_music_settings(r),
        **_gemini_fields(r),
        sources=sources,
        visuals=_visuals_settings(r),
        captions=_caption_style(r),
        duration_range_s=_duration_range(r),
        **_adaptive_fields(r, videos),
        retention=_retention(r),
        alerts=_alert_settings(r),
        source=source,
    )


def _adaptive_fields(r: _Reader, videos_per_day: int) -> dict[str, Any]:
    """trend_volume_gate and the adaptive: block, validated."""
    gate = r.get("trend_volume_gate", int, DEFAULT_TREND_VOLUME_GATE)
    if not 0 <= gate <= 50:
        raise r.fail("trend_volume_gate", "must be between 0 and 50")
    try:
        limits = parse_adaptive(r.get("adaptive", Mapping, {}), videos_per_day, gate)
    except AdaptiveConfigError as exc:
        raise r.fail(exc.field, exc.reason) from exc
    return {"trend_volume_gate": gate, "adaptive": limits}


# --- media retention --------------------------------------------
def _retention(r: _Reader) -> RetentionSettings:
    raw = r.get("retention", Mapping, {})
    unknown = set(raw) - {"render_days", "voice_days"}
    if unknown:
        raise r.fail(f"retention.{sorted(unknown)[0]}", "is not a retention setting")
    values: dict[str, int] = {}
    for name in ("render_days", "voice_days"):
        if name in raw:
            try:
                values[name] = check_days(name, raw[name])
            except ValueError:
                raise r.fail(
                    f"retention.{name}", f"expected a whole number of days from 0 to {MAX_DAYS}"
                ) from None
    return RetentionSettings(**values)


def _duration_range(r: _Reader) -> tuple[float, float]:
    """duration_range_s: [min, max] seconds, 1 <= min < max <= 180."""
    value = r.get("duration_range_s", list, [15.0, 180.0])
    if len(value) != 2 or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
    ):
        raise r.fail("duration_range_s", "expected [min, max] in seconds, like [15, 180]")
    low, high = float(value[0]), float(value[1])
    if not 1.0 <= low < high <= MAX_SHORT_S:
        raise r.fail("duration_range_s", f"needs 1 <= min < max <= {MAX_SHORT_S:g}")
    return low, high


def _gemini_fields(r: _Reader) -> dict[str, Any]:
    """The Gemini writer, safety and budget fields, validated."""
    budget = r.get("daily_budget_usd", (int, float), DEFAULT_DAILY_BUDGET_MICROS / 1_000_000)
    if not 0 <= budget <= MAX_DAILY_BUDGET_USD:
        raise r.fail("daily_budget_usd", f"must be between 0 and {MAX_DAILY_BUDGET_USD}")
    models = {}
    for name, default in (
        ("gemini_text_model", DEFAULT_TEXT_MODEL),
        ("gemini_tts_model", DEFAULT_TTS_MODEL),
    ):
        models[name] = r.get(name, str, default)
        if not MODEL_NAME_PATTERN.match(models[name]):
            raise r.fail(name, "expected a model name like 'gemini-3.8-flash'")
    prices = []
    for model, price in r.get("gemini_prices", Mapping, {}).items():
        name = f"gemini_prices.{model}"
        if not isinstance(model, str) or not MODEL_NAME_PATTERN.match(model):
            raise r.fail(name, "expected a model name like 'gemini-3.8-flash'")
        if not isinstance(price, Mapping) or set(price) != {"input_usd", "output_usd"}:
            raise r.fail(name, "expected {input_usd: N, output_usd: N} per million tokens")
        micros = []
        for key in ("input_usd", "output_usd"):
            value = price[key]
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise r.fail(f"{name}.{key}", "expected a non-negative number of dollars")
            micros.append(round(value * 1_000_000))
        prices.append((model, micros[0], micros[1]))
    target = r.get("target_seconds", int, 45)
    if not 30 <= target <= 60:
        raise r.fail("target_seconds", "must be between 30 and 60 (80-150 spoken words)")
    tone = r.get("tone", str, "curious, clear and friendly")
    cta = r.get("call_to_action", str, "")
    for name, text in (("tone", tone), ("call_to_action", cta)):
        if len(text) > 200:
            raise r.fail(name, "must be at most 200 characters")
    from mdame_domain.published_text import contact_detail_problem

    cta_problem = contact_detail_problem(cta)
    if cta_problem:  # every script would lose it: say so when the file is read
        raise r.fail("call_to_action", cta_problem)
    if not tone.strip():
        raise r.fail("tone", "must not be empty")
    return {
        "daily_budget_micros": round(budget * 1_000_000),
        **models,
        "gemini_prices": tuple(prices),
        "tone": tone,
        "call_to_action": cta,
        "target_seconds": target,
    }


def _sources(r: _Reader) -> tuple[FeedSource, ...]:
    if "sources" not in r.data:
        return ()
    try:
        return parse_sources(r.data["sources"])
    except SourceConfigError as exc:
        raise r.fail(exc.field, exc.reason) from None


def _flag(r: _Reader, flags: Mapping[str, Any], name: str, default: bool) -> bool:
    value = flags.get(name, default)
    if not isinstance(value, bool):
        raise r.fail(f"flags.{name}", "expected true or false")
    return value


def _accounts(r: _Reader) -> tuple[PublishingAccount, ...]:
    accounts = []
    for i, item in enumerate(r.get("accounts", list)):
        name = f"accounts[{i}]"
        if not isinstance(item, Mapping):
            raise r.fail(name, "expected a mapping with platform, handle, daily_quota_units")
        platform = item.get("platform")
        if platform not in PLATFORMS:
            raise r.fail(f"{name}.platform", f"must be one of {', '.join(PLATFORMS)}")
        handle = item.get("handle")
        if not isinstance(handle, str) or not handle:
            raise r.fail(f"{name}.handle", "is required")
        quota = item.get("daily_quota_units", 10_000)
        if not isinstance(quota, int) or isinstance(quota, bool) or quota < 0:
            raise r.fail(f"{name}.daily_quota_units", "expected a non-negative integer")
        timezone = item.get("quota_timezone", DEFAULT_QUOTA_TIMEZONE)
        if not _is_time_zone(timezone):
            raise r.fail(f"{name}.quota_timezone", "expected an IANA time zone like 'UTC'")
        accounts.append(PublishingAccount(platform, handle, quota, timezone))
    if not accounts:
        raise r.fail("accounts", "needs at least one publishing account")
    return tuple(accounts)


def _is_time_zone(name: Any) -> bool:
    if not isinstance(name, str) or not name:
        return False
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True


def load_dimension_file(path: Path) -> DimensionConfig:
    source = str(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise DimensionConfigError(source, "<yaml>", f"not valid YAML: {exc}") from exc
    config = parse_dimension(data, source)
    if config.slug != path.stem:
        raise DimensionConfigError(source, "slug", f"must match the file name ({path.stem!r})")
    return config


@dataclass(frozen=True)
class Registry:
    dimensions: tuple[DimensionConfig, ...]
    errors: tuple[DimensionConfigError, ...]

    def by_slug(self) -> dict[str, DimensionConfig]:
        return {d.slug: d for d in self.dimensions}


def load_registry(folder: Path) -> Registry:
    """Every *.yaml in `folder`; a bad file is reported in `errors` and does not stop the rest."""
    dimensions, errors = [], []
    for path in sorted(folder.glob("*.yaml")):
        try:
            dimensions.append(load_dimension_file(path))
        except DimensionConfigError as exc:
            errors.append(exc)
    return Registry(tuple(dimensions), tuple(errors))


def dimension_from_json(data: Mapping[str, Any]) -> DimensionConfig:
    """The inverse of DimensionConfig.to_json (the registry stores that form in PostgreSQL)."""
    fields = dict(data)
    fields["accounts"] = tuple(PublishingAccount(**a) for a in fields.get("accounts", ()))
    for name in ("palette", "feeds", "keywords", "blocked_terms"):
        fields[name] = tuple(fields.get(name, ()))
    fields["sources"] = tuple(source_from_json(s) for s in fields.get("sources", ()))
    if "required_reviews" in fields:  # configs stored before it existed keep the default
        fields["required_reviews"] = tuple(fields["required_reviews"])
    if "youtube" in fields:  # configs stored before the field existed keep its default
        yt = dict(fields["youtube"])
        yt["hashtags"] = tuple(yt.get("hashtags", ()))
        yt["tags"] = None if yt.get("tags") is None else tuple(yt["tags"])
        fields["youtube"] = YouTubeSettings(**yt)
    if "tts" in fields:  # configs stored before it existed keep the default
        fields["tts"] = VoiceSettings(**fields["tts"])
    if "visuals" in fields:  # configs stored before the field existed keep its default
        fields["visuals"] = VisualsSettings(**fields["visuals"])
    if "music" in fields:  # configs stored before the field existed keep its default
        fields["music"] = MusicSettings(**fields["music"])
    if "duration_range_s" in fields:  # configs stored before the field existed keep its default
        fields["duration_range_s"] = tuple(fields["duration_range_s"])
    if "gemini_prices" in fields:
        fields["gemini_prices"] = tuple(tuple(p) for p in fields["gemini_prices"])
    if "captions" in fields:  # configs stored before the field existed keep its default
        fields["captions"] = CaptionStyle(**fields["captions"])
    if "adaptive" in fields:  # configs stored before the field existed keep its default
        limits: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in fields["adaptive"].items()
        }
        fields["adaptive"] = AdaptiveLimits(**limits)
    if "retention" in fields:  # configs stored before the field existed keep its default
        fields["retention"] = RetentionSettings(**fields["retention"])
    if "alerts" in fields:  # configs stored before the field existed keep its default
        fields["alerts"] = AlertSettings(**fields["alerts"])
    return DimensionConfig(**fields)
