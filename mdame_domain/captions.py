"""Burned-in karaoke captions, the hook and scene titles, laid out as ASS inside the safe area.

YouTube Shorts (and the other vertical players) draw their own UI over the video: the title and
buttons at the bottom, the action rail on the right, the header at the top. Every event is laid
out here, not by libass: lines are broken in plain code, each text block is measured with the
TTF's real advance widths and placed with \\an\\pos, and libass only draws (WrapStyle 2: no
wrapping of its own). So each event's pixel box is known before rendering, is recorded with the
render, and is checked against the safe area by caption_layout_problems.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mdame_domain.voice import WordTiming

# Short gaps between cues are closed so captions do not flicker off between words.
_MAX_BRIDGED_GAP_S = 0.25
_SENTENCE_END = re.compile(r"[.!?]['\")\]]*$")
_WORD_JOINER = "\u2060"


@dataclass(frozen=True)
class Cue:
    start_s: float
    end_s: float
    text: str


@dataclass(frozen=True)
class SafeZone:
    """Fractions of the frame the platform UI covers, for 9:16 Shorts."""

    top: float = 0.15
    bottom: float = 0.25
    right: float = 0.12
    left: float = 0.0


SHORTS_SAFE_ZONE = SafeZone()
# Extra room between the text and the UI, in pixels of a 1920-high frame.
SAFE_PADDING_PX = 24


@dataclass(frozen=True)
class Box:
    left: int
    top: int
    right: int
    bottom: int

    def inside(self, other: Box) -> bool:
        return (
            self.left >= other.left
            and self.top >= other.top
            and self.right <= other.right
            and self.bottom <= other.bottom
        )


def safe_box(width: int = 1080, height: int = 1920, zone: SafeZone = SHORTS_SAFE_ZONE) -> Box:
    """The part of the frame no platform UI covers."""
    return Box(
        left=math.ceil(width * zone.left),
        top=math.ceil(height * zone.top),
        right=math.floor(width * (1 - zone.right)),
        bottom=math.floor(height * (1 - zone.bottom)),
    )


def _ends_sentence(word: str) -> bool:
    return bool(_SENTENCE_END.search(word))


def ass_escape(text: str) -> str:
    """Make text literal for libass: no override blocks, no \\N/\\h escapes, one line."""
    text = " ".join(text.split())
    # A word joiner after a backslash keeps libass from reading it as an escape.
    text = text.replace("\\", "\\" + _WORD_JOINER)
    return text.replace("{", "\\{").replace("}", "\\}")


def ass_colour(hex_colour: str, alpha: int = 0) -> str:
    """'#RRGGBB' -> ASS '&HAABBGGRR' (ASS stores blue first; alpha 0 is opaque)."""
    digits = hex_colour.strip().lstrip("#")
    if not re.fullmatch(r"[0-9a-fA-F]{6}", digits):
        raise ValueError(f"not a hex colour like '#FFFFFF': {hex_colour!r}")
    red, green, blue = digits[0:2], digits[2:4], digits[4:6]
    return f"&H{alpha:02X}{blue}{green}{red}".upper()


def ass_time(seconds: float) -> str:
    """ASS timestamps: H:MM:SS.cc (centiseconds)."""
    centis = max(0, round(seconds * 100))
    hours, rest = divmod(centis, 360000)
    minutes, rest = divmod(rest, 6000)
    secs, centis = divmod(rest, 100)
    return f"{hours}:{minutes:02d}:{secs:02d}.{centis:02d}"


TITLE_FONT_SIZE = 60
TITLE_MAX_LINES = 3  # on-screen text is at most 8 words
# The fonts the install script provides (fonts-dejavu-core); bold faces, as the styles are bold.
CAPTION_FONTS: dict[str, str] = {
    "DejaVu Sans": "DejaVuSans-Bold.ttf",
    "DejaVu Sans Mono": "DejaVuSansMono-Bold.ttf",
    "DejaVu Serif": "DejaVuSerif-Bold.ttf",
}
FONT_DIRS = ("/usr/share/fonts", "/usr/local/share/fonts")
HOOK_SECONDS = 2.0
HOOK_MAX_LINES = 3
MIN_FONT_SIZE = 20
# A glyph the font lacks is drawn from a fallback font: assume it wide (CJK is 1 em).
_MISSING_GLYPH_EM = 1.15
# Measured widths ignore kerning and shaping (which mostly narrow text); this covers the rest.
_WIDTH_SLACK = 1.04
# Ink beyond the font's ascent/descent (stacked diacritics, fallback fonts), per unit of size.
_VERTICAL_SLACK = 0.12
# Vertical split of the safe area: titles at the top, the hook in the middle, captions below.
_TITLE_REGION = (0.0, 0.3)
_HOOK_REGION = (0.3, 0.7)
_CAPTION_REGION = (0.7, 1.0)
_OUTLINE_COLOUR = "#000000"


class CaptionLayoutError(ValueError):
    """Text that cannot be placed inside the safe area at any allowed size."""


@dataclass(frozen=True)
class CaptionStyle:
    """A dimension's caption style (YAML `captions:`; validated in dimensions.py)."""

    font: str = "DejaVu Sans"
    size: int = 64
    max_chars_per_line: int = 24
    max_lines: int = 2
    max_words: int = 6
    outline: int = 4
    shadow: int = 2
    primary: str = "#FFFFFF"
    highlight: str = "#FFD400"


@dataclass(frozen=True)
class CaptionBox:
    """Where one caption, hook or title event is drawn, in output pixels, outline and shadow
    included: every pixel libass draws for it lies inside (x, y, x + w, y + h)."""

    kind: str  # "caption", "hook" or "title"
    start_s: float
    end_s: float
    x: int
    y: int
    w: int
    h: int
    text: str

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "x": self.x,
            "y": self.y,
            "w": self.w,
            "h": self.h,
            "text": self.text,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CaptionBox:
        """The recorded form back; ValueError naming what is wrong with it."""
        if not isinstance(data, Mapping):
            raise ValueError(f"expected a mapping, got {type(data).__name__}")
        missing = [k for k in ("kind", "start_s", "end_s", "x", "y", "w", "h") if k not in data]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        for key in ("x", "y", "w", "h"):
            if isinstance(data[key], bool) or not isinstance(data[key], int):
                raise ValueError(f"{key} is not an integer: {data[key]!r}")
        for key in ("start_s", "end_s"):
            if isinstance(data[key], bool) or not isinstance(data[key], int | float):
                raise ValueError(f"{key} is not a number: {data[key]!r}")
        return cls(
            kind=str(data["kind"]),
            start_s=float(data["start_s"]),
            end_s=float(data["end_s"]),
            x=data["x"],
            y=data["y"],
            w=data["w"],
            h=data["h"],
            text=str(data.get("text", "")),
        )

    @property
    def right(self) -> int:
        return self.x + self.w

    @property
    def bottom(self) -> int:
        return self.y + self.h


@dataclass(frozen=True)
class CaptionTrack:
    """The ASS document to burn in and the box of every event in it."""

    ass: str
    boxes: tuple[CaptionBox, ...]


@dataclass(frozen=True)
class FontMetrics:
    """What layout needs from a TTF: its design units, the ascent and descent libass sizes it
    by (the Windows metrics, as GDI does), and each character's advance width."""

    path: str
    units_per_em: int
    ascent: int
    descent: int
    advances: Mapping[int, int]

    def width_px(self, text: str, size: float) -> float:
        """Advance width of `text` at ASS font size `size`. libass scales a face so that
        ascent + descent equals the size, so one design unit is size / (ascent + descent) px."""
        missing = round(_MISSING_GLYPH_EM * self.units_per_em)
        units = 0
        for ch in text:
            if unicodedata.category(ch) in ("Mn", "Me", "Cf"):  # combining marks, joiners
                units += self.advances.get(ord(ch), 0)
            else:
                units += self.advances.get(ord(ch), missing)
        return units * size / (self.ascent + self.descent)


def font_file(font: str) -> Path:
    """The bold TTF of a caption font, from the fonts fontconfig (and so libass) sees."""
    if font not in CAPTION_FONTS:
        raise CaptionLayoutError(f"font {font!r} is not one of {sorted(CAPTION_FONTS)}")
    name = CAPTION_FONTS[font]
    for folder in FONT_DIRS:
        found = sorted(Path(folder).rglob(name)) if Path(folder).is_dir() else []
        if found:
            return found[0]
    raise CaptionLayoutError(f"{name} not found under {FONT_DIRS}: install fonts-dejavu-core")


@functools.lru_cache(maxsize=8)
def font_metrics(font: str) -> FontMetrics:
    from fontTools.ttLib import TTFont

    path = font_file(font)
    with TTFont(str(path), lazy=True) as tt:
        units_per_em = int(tt["head"].unitsPerEm)
        os2 = tt["OS/2"]
        ascent, descent = int(os2.usWinAscent), int(os2.usWinDescent)
        if ascent + descent <= 0:  # as libass: fall back to hhea
            ascent, descent = int(tt["hhea"].ascent), -int(tt["hhea"].descent)
        metrics = tt["hmtx"].metrics
        advances = {cp: int(metrics[glyph][0]) for cp, glyph in tt.getBestCmap().items()}
    return FontMetrics(str(path), units_per_em, ascent, descent, advances)


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


def caption_regions(
    width: int = 1080, height: int = 1920, zone: SafeZone = SHORTS_SAFE_ZONE
) -> dict[str, Box]:
    """Where titles, the hook and captions may draw: the safe area less a padding, split
    top to bottom, horizontally symmetric so text is centred on the frame."""
    safe = safe_box(width, height, zone)
    padding = round(SAFE_PADDING_PX * height / 1920)
    left = max(safe.left + padding, width - (safe.right - padding))
    top, bottom = safe.top + padding, safe.bottom - padding

    def band(span: tuple[float, float]) -> Box:
        return Box(
            left=left,
            top=top + math.ceil(span[0] * (bottom - top)),
            right=width - left,
            bottom=top + math.floor(span[1] * (bottom - top)),
        )

    return {
        "title": band(_TITLE_REGION),
        "hook": band(_HOOK_REGION),
        "caption": band(_CAPTION_REGION),
    }


def ass_override_colour(hex_colour: str) -> str:
    """'#RRGGBB' -> the '&HBBGGRR&' form of a \\1c override tag."""
    return f"&H{ass_colour(hex_colour)[4:]}&"


def caption_groups(
    words: Sequence[WordTiming], style: CaptionStyle = CaptionStyle()
) -> list[list[WordTiming]]:
    """Words grouped into cues: at most style.max_words words that break into at most
    style.max_lines lines of style.max_chars_per_line; a sentence end closes a cue."""
    groups: list[list[WordTiming]] = []
    current: list[WordTiming] = []
    for word in (w for w in words if w.word.strip()):
        candidate = [*current, word]
        texts = [w.word.strip() for w in candidate]
        if current and (
            len(candidate) > style.max_words
            or len(break_lines(texts, style.max_chars_per_line)) > style.max_lines
        ):
            groups.append(current)
            candidate = [word]
        current = candidate
        if _ends_sentence(word.word):
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def _dialogue(layer: int, start: float, end: float, style: str, placed: _Placed, body: str) -> str:
    x, y = placed.pos
    return (
        f"Dialogue: {layer},{ass_time(start)},{ass_time(end)},{style},,0,0,0,,"
        f"{{\\an{placed.an}\\pos({x},{y})\\fs{placed.size}}}{body}"
    )


def _karaoke_bodies(placed: _Placed, style: CaptionStyle) -> list[str]:
    """One text per word of the cue, that word in the highlight colour, the lines as laid out."""
    on, off = ass_override_colour(style.highlight), ass_override_colour(style.primary)
    words = [line.split(" ") for line in placed.lines]
    count = sum(len(line) for line in words)
    bodies = []
    for active in range(count):
        index, lines = 0, []
        for line in words:
            parts = []
            for word in line:
                escaped = ass_escape(word)
                parts.append(f"{{\\1c{on}}}{escaped}{{\\1c{off}}}" if index == active else escaped)
                index += 1
            lines.append(" ".join(parts))
        bodies.append("\\N".join(lines))
    return bodies


def build_captions(
    words: Sequence[WordTiming],
    style: CaptionStyle = CaptionStyle(),
    *,
    hook: str = "",
    titles: Sequence[Cue] = (),
    width: int = 1080,
    height: int = 1920,
    zone: SafeZone = SHORTS_SAFE_ZONE,
    title_colour: str = "#FFE082",
) -> CaptionTrack:
    """Karaoke captions from the word timings (the spoken word in the highlight colour), the
    hook in the middle for the first HOOK_SECONDS and each scene's title at the top, all laid
    out inside the safe area; the ASS document and the box of every cue, hook and title."""
    font = style.font
    if font not in CAPTION_FONTS:
        raise CaptionLayoutError(f"font {font!r} is not one of {sorted(CAPTION_FONTS)}")
    regions = caption_regions(width, height, zone)
    back = ass_colour(_OUTLINE_COLOUR, alpha=0x80)
    black = ass_colour(_OUTLINE_COLOUR)

    def style_line(name: str, size: int, colour: str) -> str:
        c = ass_colour(colour)
        return (
            f"Style: {name},{font},{size},{c},{c},{black},{back},-1,0,0,0,100,100,0,0,"
            f"1,{style.outline},{style.shadow},5,0,0,0,1"
        )

    header = [
        "[Script Info]",
        "ScriptType: v4.00+",
        f"PlayResX: {width}",
        f"PlayResY: {height}",
        "WrapStyle: 2",  # no wrapping by libass: lines are broken here, with \N
        "ScaledBorderAndShadow: yes",
        "",
        "[V4+ Styles]",
        "Format: Name, Fontname, Fontsize, PrimaryColour, SecondaryColour, OutlineColour, "
        "BackColour, Bold, Italic, Underline, StrikeOut, ScaleX, ScaleY, Spacing, Angle, "
        "BorderStyle, Outline, Shadow, Alignment, MarginL, MarginR, MarginV, Encoding",
        style_line("Caption", style.size, style.primary),
        style_line("Hook", style.size, style.primary),
        style_line("Title", TITLE_FONT_SIZE, title_colour),
        "",
        "[Events]",
        "Format: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text",
    ]
    events: list[str] = []
    boxes: list[CaptionBox] = []

    def record(kind: str, start: float, end: float, placed: _Placed, text: str) -> None:
        b = placed.box
        boxes.append(
            CaptionBox(kind, round(float(start), 3), round(float(end), 3), b.left, b.top,
                       b.right - b.left, b.bottom - b.top, text)
        )  # fmt: skip

    groups = caption_groups(words, style)
    for index, group in enumerate(groups):
        start, end = group[0].start_s, group[-1].end_s
        if index + 1 < len(groups):
            next_start = groups[index + 1][0].start_s
            if 0 <= next_start - end <= _MAX_BRIDGED_GAP_S:
                end = next_start
        end = max(end, start + 0.01)
        text = " ".join(w.word.strip() for w in group)
        placed = _layout(text, style, style.size, regions["caption"], "bottom", style.max_lines)
        bodies = _karaoke_bodies(placed, style)
        if len(bodies) != len(group):  # a word was cut to fit: no word to highlight in parts
            plain = "\\N".join(ass_escape(line) for line in placed.lines)
            events.append(_dialogue(0, start, end, "Caption", placed, plain))
            bodies = []
        # The layout keeps each word whole on one line, so word k of the cue is word k here.
        for k, body in enumerate(bodies):
            word_start = start if k == 0 else max(group[k].start_s, start)
            word_end = end if k + 1 == len(group) else max(group[k + 1].start_s, word_start)
            events.append(_dialogue(0, word_start, word_end, "Caption", placed, body))
        record("caption", start, end, placed, text)
    if hook.strip():
        placed = _layout(hook, style, style.size, regions["hook"], "middle", HOOK_MAX_LINES)
        body = "\\N".join(ass_escape(line) for line in placed.lines)
        events.append(_dialogue(2, 0.0, HOOK_SECONDS, "Hook", placed, body))
        record("hook", 0.0, HOOK_SECONDS, placed, " ".join(hook.split()))
    for title in titles:
        if not title.text.strip():
            continue
        placed = _layout(
            title.text, style, TITLE_FONT_SIZE, regions["title"], "top", TITLE_MAX_LINES
        )
        body = "\\N".join(ass_escape(line) for line in placed.lines)
        events.append(_dialogue(1, title.start_s, title.end_s, "Title", placed, body))
        record("title", title.start_s, title.end_s, placed, " ".join(title.text.split()))
    return CaptionTrack("\n".join([*header, *events]) + "\n", tuple(boxes))


def _box_list(boxes: Sequence[CaptionBox | Mapping[str, Any]]) -> tuple[list, list[str]]:
    parsed: list[tuple[int, CaptionBox]] = []
    problems: list[str] = []
    for index, raw in enumerate(boxes):
        try:
            box = raw if isinstance(raw, CaptionBox) else CaptionBox.from_json(raw)
        except ValueError as exc:
            problems.append(f"caption box {index}: malformed ({exc})")
            continue
        parsed.append((index, box))
    return parsed, problems


def _describe(index: int, box: CaptionBox) -> str:
    text = box.text if len(box.text) <= 40 else box.text[:37] + "..."
    return (
        f"{box.kind} box {index} {text!r} at x={box.x} y={box.y} w={box.w} h={box.h} "
        f"({box.start_s:.2f}-{box.end_s:.2f}s)"
    )


def caption_layout_problems(
    boxes: Sequence[CaptionBox | Mapping[str, Any]],
    width: int,
    height: int,
    safe_zone: SafeZone = SHORTS_SAFE_ZONE,
) -> list[str]:
    """What is wrong with a render's recorded caption boxes: a box (malformed, empty or) not
    inside the safe area, naming the sides it crosses and by how much, or two boxes on screen
    at the same time that overlap."""
    safe = safe_box(width, height, safe_zone)
    parsed, problems = _box_list(boxes)
    for index, box in parsed:
        if box.w <= 0 or box.h <= 0:
            problems.append(f"{_describe(index, box)}: empty")
            continue
        over = {
            "top": safe.top - box.y,
            "bottom": box.bottom - safe.bottom,
            "left": safe.left - box.x,
            "right": box.right - safe.right,
        }
        crossed = [f"{side} by {px} px" for side, px in over.items() if px > 0]
        if crossed:
            problems.append(
                f"{_describe(index, box)} is outside the safe area "
                f"({safe.left},{safe.top})-({safe.right},{safe.bottom}): {', '.join(crossed)}"
            )
    for (i, a), (j, b) in itertools.combinations(parsed, 2):
        together = a.start_s < b.end_s and b.start_s < a.end_s
        if together and a.x < b.right and b.x < a.right and a.y < b.bottom and b.y < a.bottom:
            problems.append(f"{_describe(i, a)} overlaps {_describe(j, b)}")
    return problems


def caption_layout_stats(
    boxes: Sequence[CaptionBox | Mapping[str, Any]],
    width: int,
    height: int,
    safe_zone: SafeZone = SHORTS_SAFE_ZONE,
) -> dict[str, float | int]:
    """Chartable numbers: boxes, the lowest and rightmost box edge as fractions of the frame,
    and the smallest distance of any box to the safe area's edges (negative: outside)."""
    safe = safe_box(width, height, safe_zone)
    parsed, _ = _box_list(boxes)
    if not parsed:
        return {"boxes": 0, "max_bottom_fraction": 0.0, "max_right_fraction": 0.0,
                "min_margin_px": 0}  # fmt: skip
    found = [box for _, box in parsed]
    return {
        "boxes": len(found),
        "max_bottom_fraction": round(max(b.bottom for b in found) / height, 4),
        "max_right_fraction": round(max(b.right for b in found) / width, 4),
        "min_margin_px": min(
            min(b.x - safe.left, b.y - safe.top, safe.right - b.right, safe.bottom - b.bottom)
            for b in found
        ),
    }
