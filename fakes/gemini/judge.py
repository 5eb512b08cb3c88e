"""Image understanding: the relevance judge's score and reason for the pictures a request
carries (fakes/imagery.judge), each billed by its tiles."""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from fakes import imagery
from fakes.gemini.protocol import (
    BadRequest,
    broken_for,
    count_tokens,
    field_of,
    schema_of,
    thought_tokens,
    usage_metadata,
)
from fakes.gemini.state import FakeGemini

# Gemini counts an image as 258 tokens per 768x768 tile, one tile when both sides are <= 384 px.
IMAGE_TILE_TOKENS = 258
_NARRATION_LINE = re.compile(r"^Narration:[ \t]*(.+)$", re.MULTILINE)


def inline_images(contents: Any) -> list[bytes]:
    """The image parts' bytes (inlineData, base64 or base64url) in the request's contents."""
    images: list[bytes] = []
    for content in contents if isinstance(contents, list) else [contents]:
        parts = content.get("parts") if isinstance(content, Mapping) else None
        for part in parts or []:
            blob = field_of(part, "inlineData", "inline_data")
            mime = str(field_of(blob, "mimeType", "mime_type") or "")
            data = field_of(blob, "data")
            if mime.startswith("image/") and isinstance(data, str):
                text = data.replace("-", "+").replace("_", "/")
                try:
                    images.append(base64.b64decode(text + "=" * (-len(text) % 4), validate=True))
                except ValueError:
                    raise BadRequest("inlineData.data is not base64") from None
    return images


def _image_tokens(image: bytes) -> int:
    size = _image_size(image)
    if size is None:
        raise BadRequest("Unable to process input image.")
    width, height = size
    if width <= 384 and height <= 384:
        return IMAGE_TILE_TOKENS
    return IMAGE_TILE_TOKENS * math.ceil(width / 768) * math.ceil(height / 768)


def _image_size(image: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG's IHDR or a JPEG's start-of-frame marker."""
    if image.startswith(b"\x89PNG\r\n\x1a\n") and len(image) >= 24:
        return int.from_bytes(image[16:20], "big"), int.from_bytes(image[20:24], "big")
    at = 2 if image.startswith(b"\xff\xd8") else len(image)
    while at + 9 < len(image) and image[at] == 0xFF:
        marker, length = image[at + 1], int.from_bytes(image[at + 2 : at + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height = int.from_bytes(image[at + 5 : at + 7], "big")
            return int.from_bytes(image[at + 7 : at + 9], "big"), height
        at += 2 + length
    return None


def judgement(
    state: FakeGemini,
    config: Mapping[str, Any],
    prompt: str,
    billed: str,
    images: list[bytes],
    kind: str | None,
) -> dict[str, Any]:
    """The image judge's answer (see the module docstring), billed per image."""
    image_tokens = sum(_image_tokens(image) for image in images)
    found = _NARRATION_LINE.search(prompt)
    narration = found.group(1) if found else prompt
    try:
        score, reason = imagery.judge(images, narration)
    except (RuntimeError, ValueError):
        raise BadRequest("Unable to process input image.") from None
    verdict: dict[str, Any] = {
        "score": state.score if state.score is not None else score,
        "reason": reason,
    }
    verdict.update({k: v for k, v in state.fields.items() if k in verdict})
    mime = field_of(config, "responseMimeType", "response_mime_type")
    if kind == "schema":
        text = json.dumps(broken_for(schema_of(config)))
    elif mime == "application/json":
        text = json.dumps(verdict, ensure_ascii=False)
    else:
        text = reason
    finish = "STOP"
    if kind == "max_tokens":
        text, finish = text[: max(1, len(text) // 2)], "MAX_TOKENS"
    usage = usage_metadata(billed, count_tokens(text), thought_tokens(config))
    usage["promptTokenCount"] += image_tokens
    usage["totalTokenCount"] += image_tokens
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": text}]},
                "finishReason": finish,
                "index": 0,
            }
        ],
        "usageMetadata": usage,
        "modelVersion": "fake-gemini",
    }


def carries_images(contents: Any) -> bool:
    """Whether the request's contents hold an image part (an image to understand)."""
    for content in contents if isinstance(contents, list) else [contents]:
        parts = content.get("parts") if isinstance(content, Mapping) else None
        for part in parts or []:
            blob = field_of(part, "inlineData", "inline_data")
            if str(field_of(blob, "mimeType", "mime_type") or "").startswith("image/"):
                return True
    return False
