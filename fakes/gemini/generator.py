"""Text answers: deterministic JSON that follows the requested schema, or sentences, made
from the prompt's own words."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fakes.gemini.protocol import digest, field_of
from fakes.gemini.state import FakeGemini

_WORD = re.compile(r"[^\W\d_][\w'\-]*", re.UNICODE)
_WORD_RANGE = re.compile(r"(\d+)\s*(?:-|–|to|and)\s*(\d+)\s+words", re.I)
_WORD_COUNT = re.compile(r"(\d+)\s+words", re.I)


class SchemaGenerator:
    """Deterministic JSON that follows a schema, made from the prompt's words."""

    def __init__(self, prompt: str, state: FakeGemini) -> None:
        # The prompt's data fences are markup, not words a model would write back.
        words = [w for w in _WORD.findall(prompt) if "UNTRUSTED_DATA" not in w.upper()]
        self.words = [w for w in words if len(w) > 2] or words or ["story"]
        self.prompt, self.state = prompt, state

    def value(self, schema: Mapping[str, Any], path: str, name: str = "", index: int = 0) -> Any:
        if name in self.state.fields:
            return self.state.fields[name]
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            return enum[digest(self.prompt, path) % len(enum)]
        kind = str(schema.get("type") or ("object" if "properties" in schema else "string"))
        if isinstance(schema.get("type"), list):
            kind = next(t for t in schema["type"] if t != "null")
        kind = kind.lower()
        if kind == "object":
            props = schema.get("properties") or {}
            return {key: self.value(sub, f"{path}.{key}", key, index) for key, sub in props.items()}
        if kind == "array":
            items = schema.get("items") or {"type": "string"}
            low = int(field_of(schema, "minItems", "min_items") or 1)
            high = int(field_of(schema, "maxItems", "max_items") or max(low, 3))
            count = max(low, min(high, 3))
            return [self.value(items, f"{path}[{i}]", name, i) for i in range(count)]
        if kind == "boolean":
            return True
        if kind in ("number", "integer"):
            return self._number(schema, path, kind, index)
        return self._string(schema, path)

    def _number(self, schema: Mapping[str, Any], path: str, kind: str, index: int) -> Any:
        low = field_of(schema, "minimum")
        high = field_of(schema, "maximum")
        low = float(low) if low is not None else 0.0
        high = float(high) if high is not None else low + 100.0
        if kind == "integer":
            return int(min(high, low + index))
        if low == 0.0 and high == 1.0:
            if self.state.score is not None:
                return self.state.score
            return round(0.75 + (digest(self.prompt, path) % 2300) / 10_000, 4)
        return round(low + (digest(self.prompt, path) % 1000) / 1000 * (high - low), 4)

    def _string(self, schema: Mapping[str, Any], path: str) -> str:
        description = str(schema.get("description") or "")
        wanted = _WORD_RANGE.search(description)
        if wanted:
            count = (int(wanted.group(1)) + int(wanted.group(2))) // 2
        else:
            single = _WORD_COUNT.search(description)
            count = int(single.group(1)) if single else 6
        max_length = field_of(schema, "maxLength", "max_length")
        text = self.sentences(count, path)
        if max_length is not None:
            text = text[: int(max_length)]
        return text

    def sentences(self, count: int, path: str) -> str:
        start = digest(self.prompt, path) % len(self.words)
        picked = [self.words[(start + i) % len(self.words)] for i in range(count)]
        sentences: list[str] = []
        out: list[str] = []
        for i, word in enumerate(picked):
            out.append(word.lower() if out else word.capitalize())
            if len(out) >= 10 or i == len(picked) - 1:
                sentences.append(" ".join(out) + ".")
                out = []
        return " ".join(sentences)
