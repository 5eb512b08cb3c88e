"""Which feed items PostgreSQL can store: one item it cannot (a NUL, a lone surrogate) is
skipped, with the reason, and never fails the stage."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields

from mdame_domain.trends.items import TrendItem


@dataclass(frozen=True)
class SkippedItem:
    """A feed item left out of the stage, and why (for the log and the run's metadata)."""

    source: str
    guid: str
    reason: str

    def __str__(self) -> str:
        return f"feed {self.source!r} item {self.guid[:80]!r}: {self.reason}"


def unstorable_reason(item: TrendItem) -> str | None:
    """Why PostgreSQL could not store the item's text (NUL, a lone surrogate), or None."""
    for f in fields(item):
        value = getattr(item, f.name)
        if not isinstance(value, str):
            continue
        if "\x00" in value:
            return f"{f.name} contains a NUL character (U+0000)"
        bad = next((c for c in value if "\ud800" <= c <= "\udfff"), None)
        if bad is not None:
            return f"{f.name} contains a lone surrogate (U+{ord(bad):04X})"
    return None


def split_storable(items: Iterable[TrendItem]) -> tuple[list[TrendItem], list[SkippedItem]]:
    """The items that can be stored, and the ones skipped: one bad item never fails the stage."""
    kept: list[TrendItem] = []
    skipped: list[SkippedItem] = []
    for item in items:
        reason = unstorable_reason(item)
        if reason is None:
            kept.append(item)
        else:
            guid = item.guid.encode("utf-8", "backslashreplace").decode("utf-8")
            skipped.append(SkippedItem(item.source, guid.replace("\x00", "\\x00"), reason))
    return kept, skipped
