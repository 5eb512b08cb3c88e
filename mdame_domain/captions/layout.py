"""Laying a text block out inside a region: greedy line breaking, shrinking the size, and as a
last resort splitting words, with the block's anchor and ink box measured from the font."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mdame_domain.captions.fonts import FontMetrics, font_metrics
from mdame_domain.captions.geometry import Box
from mdame_domain.captions.model import CaptionLayoutError, CaptionStyle

MIN_FONT_SIZE = 20
# Measured widths ignore kerning and shaping (which mostly narrow text); this covers the rest.
_WIDTH_SLACK = 1.04
# Ink beyond the font's ascent/descent (stacked diacritics, fallback fonts), per unit of size.
_VERTICAL_SLACK = 0.12


def break_lines(
    words: Sequence[str], max_chars: int | None, fits: Callable[[str], bool] = lambda _: True
) -> list[str]:
    """Greedy line breaking: a word joins the current line while the line stays within
    max_chars characters (None: no limit) and `fits`; otherwise it starts a new line. A word
    that alone breaks the limits still gets a line of its own (the caller shrinks or splits)."""
    lines: list[str] = []
    current = ""
    for word in words:
        candidate = f"{current} {word}" if current else word
        if current and (
            (max_chars is not None and len(candidate) > max_chars) or not fits(candidate)
        ):
            lines.append(current)
            current = word
        else:
            current = candidate
    if current:
        lines.append(current)
    return lines


def _split_word(word: str, fits: Callable[[str], bool]) -> list[str]:
    """A word wider than the line even at the smallest size, cut into pieces that fit."""
    pieces, current = [], ""
    for ch in word:
        if current and not fits(current + ch):
            pieces.append(current)
            current = ch
        else:
            current += ch
    return [*pieces, current] if current else pieces


@dataclass(frozen=True)
class _Placed:
    lines: tuple[str, ...]
    size: int
    an: int  # ASS numpad alignment of the anchor: 2 bottom, 5 middle, 8 top (all centred)
    pos: tuple[int, int]
    box: Box


def _place(
    lines: Sequence[str],
    size: int,
    style: CaptionStyle,
    metrics: FontMetrics,
    region: Box,
    anchor: str,
) -> _Placed | None:
    """The block's anchor and ink box in `region`, or None when it does not fit there."""
    text_w = max(metrics.width_px(line, size) for line in lines) * _WIDTH_SLACK
    # libass stacks lines at ascent + descent, which it makes equal to the size.
    text_h = len(lines) * size
    ink_above = style.outline + _VERTICAL_SLACK * size
    ink_below = style.outline + style.shadow + _VERTICAL_SLACK * size
    cx = (region.left + region.right) // 2
    top: float
    if anchor == "bottom":
        an, ay = 2, math.floor(region.bottom - ink_below)
        top = ay - text_h
    elif anchor == "top":
        an, ay = 8, math.ceil(region.top + ink_above)
        top = ay
    else:
        an, ay = 5, (region.top + region.bottom) // 2
        top = ay - text_h / 2
    bottom = top + text_h
    box = Box(
        left=math.floor(cx - text_w / 2 - style.outline),
        top=math.floor(top - ink_above),
        right=math.ceil(cx + text_w / 2 + style.outline + style.shadow),
        bottom=math.ceil(bottom + ink_below),
    )
    if not box.inside(region):
        return None
    return _Placed(tuple(lines), size, an, (cx, ay), box)


def _layout(
    text: str,
    style: CaptionStyle,
    size: int,
    region: Box,
    anchor: str,
    max_lines: int,
) -> _Placed:
    """Lines and size for `text` inside `region`: the style's size and line length if they
    fit, else a smaller size, else longer lines, else words split at the smallest size."""
    metrics = font_metrics(style.font)
    words = text.split()
    if not words:
        raise CaptionLayoutError("nothing to lay out")
    # The widest text line the region holds once outline and shadow are drawn around it.
    limit = region.right - region.left - 2 * style.outline - style.shadow

    def fitter(at: int) -> Callable[[str], bool]:
        return lambda line: metrics.width_px(line, at) * _WIDTH_SLACK <= limit

    for max_chars in (style.max_chars_per_line, None):
        for candidate in range(size, MIN_FONT_SIZE - 1, -2):
            lines = break_lines(words, max_chars, fitter(candidate))
            if len(lines) <= max_lines:
                placed = _place(lines, candidate, style, metrics, region, anchor)
                if placed is not None:
                    return placed
    # Last resort: words too wide even at the smallest size are cut, more lines if they fit.
    fits_min = fitter(MIN_FONT_SIZE)
    pieces = [piece for word in words for piece in _split_word(word, fits_min)]
    lines = break_lines(pieces, None, fits_min)
    placed = _place(lines, MIN_FONT_SIZE, style, metrics, region, anchor)
    if placed is None:
        raise CaptionLayoutError(f"{text[:60]!r} does not fit inside the safe area")
    return placed
