"""parse_dimension: a dimension file's mapping validated into a DimensionConfig, with the readers
of its top-level fields (adaptive limits, retention, duration range, the Gemini writer and
budget, sources, flags); the nested settings' readers live in media and publishing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mdame_domain.adaptive import DEFAULT_TREND_VOLUME_GATE, AdaptiveConfigError, parse_adaptive
from mdame_domain.dimensions.config import DimensionConfig
from mdame_domain.dimensions.constants import (
    CHECK_NAME_PATTERN,
    COLOUR_PATTERN,
    DEFAULT_DAILY_BUDGET_MICROS,
    MAX_DAILY_BUDGET_USD,
    MAX_SHORT_S,
    MODEL_NAME_PATTERN,
    SAFETY_PROFILES,
    SLUG_PATTERN,
)
from mdame_domain.dimensions.media import (
    _caption_style,
    _music_settings,
    _visuals_settings,
    _voice_settings,
)
from mdame_domain.dimensions.publishing import (
    _accounts,
    _alert_settings,
    _instagram,
    _publish_to,
    _tiktok,
    _youtube,
)
from mdame_domain.dimensions.reader import DimensionConfigError, _Reader
from mdame_domain.feed_sources import FeedSource, SourceConfigError, parse_sources
from mdame_domain.paid_calls import DEFAULT_TEXT_MODEL, DEFAULT_TTS_MODEL
from mdame_domain.retention import MAX_DAYS, RetentionSettings, check_days


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
        accounts=(accounts := _accounts(r)),
        publish_to=_publish_to(r, accounts),
        videos_per_day=videos,
        hook_threshold=threshold,
        blocked_terms=r.strings("blocked_terms", []),
        made_for_kids=_flag(r, flags, "made_for_kids", False),
        synthetic_media=_flag(r, flags, "synthetic_media", True),
        active=r.get("active", bool, True),
        required_reviews=tuple(dict.fromkeys(required_reviews)),
        topic_lookback_days=lookback,
        youtube=_youtube(r),
        tiktok=_tiktok(r),
        instagram=_instagram(r),
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
