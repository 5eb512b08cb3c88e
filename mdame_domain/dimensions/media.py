"""The media settings of a dimension file, each a frozen dataclass and its validating reader:
the `tts:` voice, the `visuals:` engine, the `captions:` style and the `music:` bed."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mdame_domain.audio_mix import DEFAULT_MUSIC_VOLUME_DB, MUSIC_VOLUME_RANGE_DB
from mdame_domain.captions import CAPTION_FONTS, CaptionStyle
from mdame_domain.diffusion import DEFAULT_ENGINE, ENGINES
from mdame_domain.dimensions.constants import COLOUR_PATTERN
from mdame_domain.dimensions.reader import _Reader
from mdame_domain.generated_stills import GeneratedSettings, generated_settings
from mdame_domain.relevance import RelevanceSettings, relevance_settings
from mdame_domain.visuals_chain import DEFAULT_CHAIN, parse_chain

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
    """chain: the engines that may make a scene's picture, in order (mdame_domain.visuals_chain);
    engine: the diffusers path, 'svd' (text-to-image, then Stable Video Diffusion) or
    'animatediff'; generated: the image model of the `generated` engine; relevance: the gate
    every candidate of a judged engine passes."""

    engine: str = DEFAULT_ENGINE
    chain: tuple[str, ...] = DEFAULT_CHAIN
    generated: GeneratedSettings = field(default_factory=GeneratedSettings)
    relevance: RelevanceSettings = field(default_factory=RelevanceSettings)


def visuals_from_json(data: Mapping[str, Any]) -> VisualsSettings:
    """The inverse of asdict(VisualsSettings); configs stored before a field existed keep its
    default."""
    fields = dict(data)
    if "chain" in fields:
        fields["chain"] = tuple(fields["chain"])
    if "generated" in fields:
        fields["generated"] = GeneratedSettings(**fields["generated"])
    if "relevance" in fields:
        fields["relevance"] = RelevanceSettings(**fields["relevance"])
    return VisualsSettings(**fields)


def _visuals_settings(r: _Reader) -> VisualsSettings:
    raw = r.get("visuals", Mapping, {})
    unknown = set(raw) - set(VisualsSettings.__dataclass_fields__)
    if unknown:
        raise r.fail(f"visuals.{sorted(unknown)[0]}", "is not a visuals setting")
    engine = raw.get("engine", DEFAULT_ENGINE)
    if engine not in ENGINES:
        raise r.fail("visuals.engine", f"must be one of {', '.join(ENGINES)}")
    try:
        chain = parse_chain(raw.get("chain", list(DEFAULT_CHAIN)))
    except ValueError as exc:
        raise r.fail("visuals.chain", str(exc)) from exc
    settings: dict[str, Any] = {}
    for name, reader in (("generated", generated_settings), ("relevance", relevance_settings)):
        try:
            settings[name] = reader(raw.get(name))
        except ValueError as exc:
            raise r.fail(f"visuals.{name}", str(exc)) from exc
    return VisualsSettings(engine=engine, chain=chain, **settings)


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
