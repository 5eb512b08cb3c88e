"""Reading a generateContent request (fields by either name, its text, its schema) and the
parts every answer shares: token counts, usageMetadata, a 400 of the request's own."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any


def field_of(mapping: Mapping[str, Any] | None, *names: str) -> Any:
    """A field under its camelCase or snake_case name (the SDK sends both, by nesting level)."""
    if not isinstance(mapping, Mapping):
        return None
    for name in names:
        if name in mapping:
            return mapping[name]
    return None


def text_of(contents: Any) -> str:
    parts: list[str] = []
    for content in contents if isinstance(contents, list) else [contents]:
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, Mapping):
            for part in content.get("parts") or []:
                if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                    parts.append(part["text"])
    return "\n".join(parts)


def count_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4)) if text else 0


def digest(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest()[:8], "big")


def schema_of(config: Mapping[str, Any]) -> Mapping[str, Any] | None:
    schema = field_of(config, "responseJsonSchema", "response_json_schema")
    if schema is None:
        schema = field_of(config, "responseSchema", "response_schema")
    return schema if isinstance(schema, Mapping) else None


def broken_for(schema: Mapping[str, Any] | None) -> Any:
    """JSON that breaks the schema: the wrong type at the root, no required field."""
    kind = str((schema or {}).get("type", "object")).lower()
    return {"unexpected": "field"} if kind == "array" else ["not", "an", "object"]


def usage_metadata(prompt: str, output_tokens: int, thoughts: int) -> dict[str, int]:
    prompt_tokens = count_tokens(prompt)
    return {
        "promptTokenCount": prompt_tokens,
        "candidatesTokenCount": output_tokens,
        "thoughtsTokenCount": thoughts,
        "totalTokenCount": prompt_tokens + output_tokens + thoughts,
    }


def thought_tokens(config: Mapping[str, Any]) -> int:
    thinking = field_of(config, "thinkingConfig", "thinking_config") or {}
    budget = field_of(thinking, "thinkingBudget", "thinking_budget")
    return min(int(budget), 32) if isinstance(budget, int) and budget > 0 else 0


class BadRequest(Exception):
    """A request the fake answers 400 INVALID_ARGUMENT, with this message."""
