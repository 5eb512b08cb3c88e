"""The dimension registry: one YAML file per content niche, validated into DimensionConfig.

A malformed file raises DimensionConfigError naming the file and the field, so the registry
sync can report it and carry on with the other dimensions.

The package: `constants` (the shared patterns, choices and defaults), `reader` (typed field
access and DimensionConfigError), `media` (the tts, visuals, captions and music settings),
`publishing` (accounts, the youtube metadata and the alerts chat), `config` (DimensionConfig),
`parsing` (parse_dimension and the top-level fields) and `loading` (files, the Registry and the
stored JSON form). Import the names from here.
"""

from __future__ import annotations

# Every name the module defined before it became this package is importable from here: the
# public ones are listed in __all__, the private helpers carry noqa: F401.
from mdame_domain.dimensions.config import (
    DimensionConfig,
)
from mdame_domain.dimensions.constants import (
    CHECK_NAME_PATTERN,
    COLOUR_PATTERN,
    DEFAULT_DAILY_BUDGET_MICROS,
    DEFAULT_QUOTA_TIMEZONE,
    MAX_DAILY_BUDGET_USD,
    MAX_SHORT_S,
    MODEL_NAME_PATTERN,
    PLATFORMS,
    SAFETY_PROFILES,
    SLUG_PATTERN,
)
from mdame_domain.dimensions.loading import (
    Registry,
    RegistryReader,
    dimension_from_json,
    load_dimension_file,
    load_registry,
)
from mdame_domain.dimensions.media import (  # noqa: F401
    _CAPTION_INT_RANGES,
    EDGE_PITCH_PATTERN,
    EDGE_RATE_PATTERN,
    EDGE_VOICE_PATTERN,
    GEMINI_VOICES,
    MusicSettings,
    VisualsSettings,
    VoiceSettings,
    _caption_style,
    _music_settings,
    _visuals_settings,
    _voice_settings,
)
from mdame_domain.dimensions.parsing import (  # noqa: F401
    _adaptive_fields,
    _duration_range,
    _flag,
    _gemini_fields,
    _retention,
    _sources,
    parse_dimension,
)
from mdame_domain.dimensions.publishing import (  # noqa: F401
    TELEGRAM_CHAT_PATTERN,
    AlertSettings,
    InstagramSettings,
    PublishingAccount,
    TikTokSettings,
    YouTubeSettings,
    _accounts,
    _alert_settings,
    _is_time_zone,
    _youtube,
    post_settings,
)
from mdame_domain.dimensions.reader import (  # noqa: F401
    DimensionConfigError,
    _as_tuple,
    _kind_name,
    _Reader,
)

__all__ = [
    "AlertSettings",
    "CHECK_NAME_PATTERN",
    "COLOUR_PATTERN",
    "DEFAULT_DAILY_BUDGET_MICROS",
    "DEFAULT_QUOTA_TIMEZONE",
    "DimensionConfig",
    "DimensionConfigError",
    "EDGE_PITCH_PATTERN",
    "EDGE_RATE_PATTERN",
    "EDGE_VOICE_PATTERN",
    "GEMINI_VOICES",
    "MAX_DAILY_BUDGET_USD",
    "MAX_SHORT_S",
    "MODEL_NAME_PATTERN",
    "MusicSettings",
    "PLATFORMS",
    "PublishingAccount",
    "Registry",
    "SAFETY_PROFILES",
    "SLUG_PATTERN",
    "TELEGRAM_CHAT_PATTERN",
    "VisualsSettings",
    "VoiceSettings",
    "YouTubeSettings",
    "TikTokSettings",
    "InstagramSettings",
    "post_settings",
    "dimension_from_json",
    "load_dimension_file",
    "load_registry",
    "RegistryReader",
    "parse_dimension",
]
