"""The `tts:` block of a dimension file (issue 8, slice "edge"): defaults and validation."""

from __future__ import annotations

from typing import Any

import pytest

from mdame_domain.dimensions import (
    DimensionConfigError,
    VoiceSettings,
    dimension_from_json,
    parse_dimension,
)

BASE: dict[str, Any] = {
    "slug": "tech",
    "title": "Tech",
    "visual_style": "neon",
    "palette": ["#000000", "#ffffff"],
    "feeds": ["feeds/tech.xml"],
    "accounts": [{"platform": "youtube", "handle": "t", "daily_quota_units": 10}],
}


def test_defaults_when_absent_and_round_trip() -> None:
    config = parse_dimension(BASE, "tech.yaml")
    assert config.tts == VoiceSettings()
    custom = parse_dimension(
        {**BASE, "tts": {"edge_voice": "en-GB-SoniaNeural", "gemini_voice": "Puck",
                         "rate": "+10%", "pitch": "-5Hz"}},
        "tech.yaml",
    )  # fmt: skip
    assert custom.tts == VoiceSettings("en-GB-SoniaNeural", "Puck", "+10%", "-5Hz")
    assert dimension_from_json(custom.to_json()) == custom
    old = custom.to_json()
    del old["tts"]  # stored before the field existed
    assert dimension_from_json(old).tts == VoiceSettings()


@pytest.mark.parametrize(
    ("tts", "field"),
    [
        ({"edge_voice": "Aria"}, "tts.edge_voice"),
        ({"gemini_voice": "Nobody"}, "tts.gemini_voice"),
        ({"rate": "fast"}, "tts.rate"),
        ({"rate": "+500%"}, "tts.rate"),
        ({"pitch": "+5%"}, "tts.pitch"),
        ({"pitch": "+90Hz"}, "tts.pitch"),
        ({"rate": 10}, "tts.rate"),
        ({"volume": "+0%"}, "tts"),
        ("loud", "tts"),
    ],
)
def test_bad_settings_name_the_field(tts: Any, field: str) -> None:
    with pytest.raises(DimensionConfigError) as err:
        parse_dimension({**BASE, "tts": tts}, "tech.yaml")
    assert err.value.field_name == field
