"""Telegram's message limits as plain functions: a long text becomes several messages, split on
line boundaries, and a photo caption is cut to fit (the Bot API refuses either when too long).

Lengths are counted in UTF-16 code units, as the Bot API counts them: an emoji outside the BMP
is two of them, so a text that fits by Python's len() may still be refused.
"""

from __future__ import annotations

MAX_MESSAGE = 4096  # sendMessage: text, 1-4096 characters after entity parsing
MAX_CAPTION = 1024  # sendPhoto: caption, 0-1024 characters
ELLIPSIS = "…"


def telegram_length(text: str) -> int:
    """Length as the Bot API counts it (UTF-16 code units)."""
    return len(text.encode("utf-16-le")) // 2


def _cut(text: str, limit: int) -> tuple[str, str]:
    """The longest prefix of `text` within `limit` UTF-16 units, and the rest."""
    if telegram_length(text) <= limit:
        return text, ""
    used = 0
    for index, char in enumerate(text):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > limit:
            return text[:index], text[index:]
    return text, ""


def split_message(text: str, limit: int = MAX_MESSAGE) -> list[str]:
    """`text` as consecutive messages of at most `limit` units, split after a newline where one
    falls within the limit (else after a space, else mid-word). Blank-only pieces are dropped:
    the Bot API refuses an empty message. Joining the pieces gives back the text, less the
    whitespace at the cut points."""
    if limit < 2:
        raise ValueError("limit must be at least 2")
    pieces: list[str] = []
    rest = text
    while rest:
        head, tail = _cut(rest, limit)
        if tail:
            cut = head.rfind("\n")
            if cut <= 0:
                cut = head.rfind(" ")
            if cut > 0:
                head, tail = head[: cut + 1], head[cut + 1 :] + tail
        if head.strip():
            pieces.append(head.rstrip("\n") if tail else head)
        rest = tail
    return pieces


def cut_caption(caption: str, limit: int = MAX_CAPTION) -> str:
    """`caption` within `limit` units, ending in an ellipsis when it had to be cut."""
    if telegram_length(caption) <= limit:
        return caption
    head, _ = _cut(caption, limit - 1)
    return head.rstrip() + ELLIPSIS
