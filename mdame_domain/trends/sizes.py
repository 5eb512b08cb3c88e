"""Caps on a feed item's text, in the bytes PostgreSQL keeps it in, so a day's items always fit
one record_trends call."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

from mdame_domain.trends.items import TrendItem

# Caps on an item's text, in bytes as PostgreSQL keeps it in JSON (UTF-8, a control character
# escaped to six bytes), since that is what record_trends' 256 KiB limit counts. The stage
# records up to 20 items in one call; at these caps they take under half of it, whatever the
# feed wrote. A Reddit title (300 characters at most) fits whole in any Latin or Cyrillic text.
TITLE_MAX_BYTES = 600
SUMMARY_MAX_BYTES = 2_000
URL_MAX_BYTES = 2_048  # the longest URL browsers and sitemaps reliably accept
GUID_MAX_BYTES = 512
_CUT_MARK = "…"


def stored_size(text: str) -> int:
    """Bytes of `text` as a JSON string in PostgreSQL (without its quotes)."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")) - 2


def _fits(text: str, max_bytes: int) -> bool:
    # Every character takes at least one byte: a longer text cannot fit, and is not measured.
    return len(text) <= max_bytes and stored_size(text) <= max_bytes


def _prefix_within(text: str, max_bytes: int) -> str:
    """The longest prefix of `text` within max_bytes. A str slice cuts between code points,
    never inside a character's UTF-8 bytes, so what is kept is still valid text."""
    text = text[:max_bytes]
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if stored_size(text[:middle]) <= max_bytes:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def cap_text(text: str, max_bytes: int) -> str:
    """`text` itself when it fits, else its longest prefix that fits with a mark of the cut."""
    if _fits(text, max_bytes):
        return text
    return _prefix_within(text, max_bytes - stored_size(_CUT_MARK)).rstrip() + _CUT_MARK


def _cap_guid(guid: str) -> str:
    # A guid is the item's identity: one over the cap keeps a prefix plus a hash of the whole,
    # so two long guids that share a prefix stay two items.
    if _fits(guid, GUID_MAX_BYTES):
        return guid
    digest = hashlib.sha256(guid.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return _prefix_within(guid, GUID_MAX_BYTES - len(digest) - 1) + "#" + digest


def cap_item(item: TrendItem) -> TrendItem:
    """The item with every text field within its cap. A URL over its cap is dropped, not cut:
    a cut URL points somewhere else."""
    return replace(
        item,
        title=cap_text(item.title, TITLE_MAX_BYTES),
        summary=cap_text(item.summary, SUMMARY_MAX_BYTES),
        url=item.url if _fits(item.url, URL_MAX_BYTES) else "",
        guid=_cap_guid(item.guid),
    )
