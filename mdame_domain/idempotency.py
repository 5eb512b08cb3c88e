"""Deterministic keys and content hashes shared by every stage."""

from __future__ import annotations

import hashlib


def idempotency_key(*parts: object) -> str:
    """Return sha256 hex of the parts joined by ':' (the design's sha256(dimension:topic:stage)).

    The same parts always give the same key, so creating a work unit twice finds the first one.
    """
    joined = ":".join(str(part) for part in parts)
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()


def content_hash(data: bytes | str) -> str:
    """Return sha256 hex of bytes, or of a string encoded as UTF-8 (media is addressed by it)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()
