"""Image generation: a PNG of the prompt's subject (fakes/imagery) at the asked aspect
ratio, or another subject when a picture is to be off topic."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from fakes import imagery
from fakes.gemini.protocol import BadRequest, count_tokens, digest, field_of, usage_metadata
from fakes.gemini.state import FakeGemini

# Gemini bills a generated 1K image as this many output tokens.
IMAGE_OUTPUT_TOKENS = 1290
# The aspect ratios imageConfig accepts, as (width, height); the fake draws the longer side
# PICTURE_LONG_SIDE pixels (a real 1K image is 1024; tests want them small).
ASPECT_RATIOS = {
    "1:1": (1, 1), "2:3": (2, 3), "3:2": (3, 2), "3:4": (3, 4), "4:3": (4, 3),
    "9:16": (9, 16), "16:9": (16, 9), "21:9": (21, 9),
}  # fmt: skip
PICTURE_LONG_SIDE = 512
# Subjects an off-topic picture shows instead of the prompt's.
_OTHER_SUBJECTS = ("umbrella", "giraffe", "bicycle", "teapot", "lighthouse", "cactus", "violin")


def picture_size(aspect_ratio: str) -> tuple[int, int]:
    """The fake's picture size for an aspect ratio (9:16: 288x512), even on both sides."""
    w, h = ASPECT_RATIOS[aspect_ratio]
    scale = PICTURE_LONG_SIDE / max(w, h)
    return 2 * round(w * scale / 2), 2 * round(h * scale / 2)


def off_topic_word(prompt: str) -> str:
    """Another subject than the prompt's: of _OTHER_SUBJECTS, the one whose colours are
    farthest from every subject word the prompt has, so no judge takes it for one of them."""
    words = imagery.subject_words(prompt) or [imagery.depicted_word(prompt)]

    def nearest(other: str) -> float:
        mine = imagery.colours_of(other)
        return min(
            sum((a - b) ** 2 for a, b in zip(mine, imagery.colours_of(w), strict=True)) ** 0.5
            for w in words
        )

    return max((o for o in _OTHER_SUBJECTS if o not in words), key=nearest)


def _off_topic(state: FakeGemini, prompt: str, kind: str | None) -> bool:
    if kind == "off_topic":
        return True
    every = state.off_topic_every
    with state.lock:
        first = prompt not in state.drawn_prompts
        state.drawn_prompts.add(prompt)
    return bool(every) and first and digest(prompt, "off-topic") % every == 0


def picture_answer(
    state: FakeGemini, config: Mapping[str, Any], prompt: str, billed: str, kind: str | None
) -> dict[str, Any]:
    """An image model's answer: a PNG of the prompt's subject (fakes/imagery) at the asked
    aspect ratio as inlineData, billed IMAGE_OUTPUT_TOKENS. Faults: "max_tokens" cuts the
    image off (no image, finishReason MAX_TOKENS), "schema" answers text instead of an image,
    "off_topic" draws another subject."""
    image_config = field_of(config, "imageConfig", "image_config") or {}
    aspect = field_of(image_config, "aspectRatio", "aspect_ratio") or "1:1"
    if aspect not in ASPECT_RATIOS:
        raise BadRequest(
            f"Invalid aspect ratio {aspect!r}: supported values are {', '.join(ASPECT_RATIOS)}."
        )
    if kind == "max_tokens":
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": []}}
        return {
            "candidates": [{**candidate, "finishReason": "MAX_TOKENS", "index": 0}],
            "usageMetadata": usage_metadata(billed, 0, 0),
        }
    if kind == "schema":
        text = "I can describe that picture, but here are some words instead."
        part: dict[str, Any] = {"text": text}
        output = count_tokens(text)
    else:
        word = imagery.depicted_word(prompt)
        if _off_topic(state, prompt, kind):
            word = off_topic_word(prompt)
        png = imagery.picture_png(word, *picture_size(aspect))
        part = {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(png).decode()}}
        output = IMAGE_OUTPUT_TOKENS
    usage: dict[str, Any] = usage_metadata(billed, output, 0)
    if "inlineData" in part:
        usage["candidatesTokensDetails"] = [{"modality": "IMAGE", "tokenCount": output}]
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": usage,
        "modelVersion": "fake-gemini",
    }


def pictures_in(reply: Mapping[str, Any]) -> int:
    """The image parts of an answer (what an image model bills per picture)."""
    return sum(
        1
        for candidate in reply.get("candidates") or []
        for part in (candidate.get("content") or {}).get("parts") or []
        if str((part.get("inlineData") or {}).get("mimeType", "")).startswith("image/")
    )
