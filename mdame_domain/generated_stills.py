"""The `generated` visuals engine's plain rules: a still from a Gemini image model, then moved.

What a dimension sets (the image model, its price per image, the aspect ratio asked), the price
list the defaults come from, the paid call's work key (one per scene and candidate, so a rerun
after a crash finds the still already paid for), and what makes an answer's image usable. The
call itself is mdame_resources/providers/generated_visuals.py; the motion is still_motion.py.

Image models are billed per output token, a fixed count per image of a given size (about 1,290
for a 1K image on gemini-2.5-flash-image), so the price is configured per image: what Google's
pricing page lists, and what the budget reserves and settles for each image answered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mdame_domain.idempotency import idempotency_key
from mdame_domain.model_output import InvalidModelOutput
from mdame_domain.paid_calls import MICROS_PER_USD, UnknownPrice

DEFAULT_IMAGE_MODEL = "gemini-2.5-flash-image"
# Micro-dollars per generated image: gemini-2.5-flash-image lists $0.039 an image (1,290
# output tokens at $30 per million, rounded as Google rounds it). Another model's price is set
# in the dimension (generated.usd_per_image).
IMAGE_PRICES_MICROS: dict[str, int] = {"gemini-2.5-flash-image": 39_000}
DEFAULT_ASPECT_RATIO = "9:16"
# What imageConfig.aspectRatio accepts.
ASPECT_RATIOS = ("1:1", "2:3", "3:2", "3:4", "4:3", "9:16", "16:9", "21:9")
# Where the model is set, named in a refused model's fix.
MODEL_FIELD = "generated.model"
# An image smaller than this on a side is no picture to move across a clip.
MIN_STILL_SIDE = 64
MAX_USD_PER_IMAGE = 5.0


@dataclass(frozen=True)
class GeneratedSettings:
    """What a dimension sets for its generated stills (see generated_settings): the model, its
    price per image (None: the price list's) and the aspect ratio asked."""

    model: str = DEFAULT_IMAGE_MODEL
    usd_per_image: float | None = None
    aspect_ratio: str = DEFAULT_ASPECT_RATIO

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("generated.model must name a Gemini image model")
        price = self.usd_per_image
        if price is not None and (
            isinstance(price, bool)
            or not isinstance(price, int | float)
            or not 0 <= price <= MAX_USD_PER_IMAGE
        ):
            raise ValueError(
                f"generated.usd_per_image must be 0-{MAX_USD_PER_IMAGE} dollars, got {price!r}"
            )
        if self.aspect_ratio not in ASPECT_RATIOS:
            raise ValueError(
                f"generated.aspect_ratio must be one of {', '.join(ASPECT_RATIOS)}, "
                f"got {self.aspect_ratio!r}"
            )

    @property
    def price_micros(self) -> int:
        """What one image costs: the configured price, else the price list's; a model with
        neither is refused, never guessed."""
        if self.usd_per_image is not None:
            return round(self.usd_per_image * MICROS_PER_USD)
        if self.model in IMAGE_PRICES_MICROS:
            return IMAGE_PRICES_MICROS[self.model]
        raise UnknownPrice(
            f"no price per image configured for the image model {self.model!r}: set "
            f"generated.usd_per_image in the dimension's YAML (priced by default: "
            f"{', '.join(sorted(IMAGE_PRICES_MICROS))})"
        )

    def key(self) -> str:
        """What of these settings changes the picture (for the scene cache key)."""
        return f"{self.model}:{self.aspect_ratio}"


def generated_settings(data: Mapping[str, Any] | None) -> GeneratedSettings:
    """The settings from a dimension's `generated:` mapping (every key optional: model,
    usd_per_image, aspect_ratio); ValueError naming an unknown key or a bad value."""
    if data is None:
        return GeneratedSettings()
    if not isinstance(data, Mapping):
        raise ValueError("generated must be a mapping")
    known = set(GeneratedSettings.__dataclass_fields__)
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"generated has unknown keys {unknown} (known: {sorted(known)})")
    return GeneratedSettings(**dict(data))


def still_prompt(visual_prompt: str) -> str:
    """The image model's request: the scene's visual prompt, asked as one vertical picture
    without text (burned-in words would fight the captions)."""
    if not visual_prompt.strip():
        raise ValueError("a generated still needs the scene's visual prompt")
    return (
        f"{visual_prompt.strip()}\n"
        "One photorealistic picture, no text, letters, captions, logos or watermarks."
    )


def still_work_key(
    dimension: str, scene_key: str, settings: GeneratedSettings, candidate: int = 0
) -> str:
    """The paid call's work key: one per scene, model and candidate (a still the relevance
    gate rejected asks for the next candidate), so a rerun after a crash finds the still paid
    for, or the call in flight, instead of paying for another."""
    if candidate < 0:
        raise ValueError(f"candidate must be >= 0, got {candidate}")
    return idempotency_key("gemini-still", dimension, scene_key, settings.key(), str(candidate))


def still_size(data: bytes) -> tuple[str, int, int]:
    """(mime type, width, height) of a PNG or JPEG still, read from its header;
    InvalidModelOutput for anything else (the paid call bills it and records it unusable)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24 and data[12:16] == b"IHDR":
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        return _checked("image/png", width, height)
    if data.startswith(b"\xff\xd8"):
        at = 2
        while at + 9 < len(data) and data[at] == 0xFF:
            marker, length = data[at + 1], int.from_bytes(data[at + 2 : at + 4], "big")
            # Start-of-frame markers carry the size (not DHT, JPG or DAC, which share the range).
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                height = int.from_bytes(data[at + 5 : at + 7], "big")
                width = int.from_bytes(data[at + 7 : at + 9], "big")
                return _checked("image/jpeg", width, height)
            at += 2 + length
    raise InvalidModelOutput("the answer's image is neither a PNG nor a JPEG")


def _checked(mime: str, width: int, height: int) -> tuple[str, int, int]:
    if min(width, height) < MIN_STILL_SIDE:
        raise InvalidModelOutput(f"the answer's image is {width}x{height}, too small to move")
    return mime, width, height
