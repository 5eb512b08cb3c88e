"""Typed field access over a dimension file's mapping (_Reader), and DimensionConfigError, which
every mistake in a dimension file becomes, naming the file and the field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class DimensionConfigError(ValueError):
    def __init__(self, source: str, field_name: str, reason: str) -> None:
        super().__init__(f"dimension file {source!r}: field {field_name!r}: {reason}")
        self.source = source
        self.field_name = field_name


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
