"""Burned-in captions: word groups from the voice timings, laid out as ASS inside the safe zone.

YouTube Shorts (and the other vertical players) draw their own UI over the video: the title and
buttons at the bottom, the action rail on the right, the header at the top. Captions are placed
with ASS style margins so libass can never draw them there.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

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
# Extra room between the captions and the UI, in pixels of a 1920-high frame.
SAFE_PADDING_PX = 24
# Lines a caption may wrap to; 3 short words at 72 px rarely need a second one.
MAX_CAPTION_LINES = 3
LINE_HEIGHT_FACTOR = 1.25
OUTLINE_PX = 4


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


@dataclass(frozen=True)
class CaptionMargins:
    left: int
    right: int
    vertical: int


def safe_box(width: int = 1080, height: int = 1920, zone: SafeZone = SHORTS_SAFE_ZONE) -> Box:
    """The part of the frame no platform UI covers."""
    return Box(
        left=math.ceil(width * zone.left),
        top=math.ceil(height * zone.top),
        right=math.floor(width * (1 - zone.right)),
        bottom=math.floor(height * (1 - zone.bottom)),
    )


def caption_margins(
    width: int = 1080, height: int = 1920, zone: SafeZone = SHORTS_SAFE_ZONE
) -> CaptionMargins:
    """Style margins: bottom above the UI, the right rail avoided, left mirrored to centre."""
    padding = round(SAFE_PADDING_PX * height / 1920)
    side = math.ceil(width * max(zone.right, zone.left)) + padding
    return CaptionMargins(left=side, right=side, vertical=math.ceil(height * zone.bottom) + padding)


def caption_box(width: int = 1080, height: int = 1920, font_size: int = 72) -> Box:
    """The pixel box captions may occupy (bottom-centre, up to MAX_CAPTION_LINES lines)."""
    margins = caption_margins(width, height)
    bottom = height - margins.vertical
    text_height = math.ceil(MAX_CAPTION_LINES * font_size * LINE_HEIGHT_FACTOR)
    # The outline is drawn outside the glyphs, so it counts against the box too.
    return Box(
        left=margins.left - OUTLINE_PX,
        top=bottom - text_height - OUTLINE_PX,
        right=width - margins.right + OUTLINE_PX,
        bottom=bottom + OUTLINE_PX,
    )


def _ends_sentence(word: str) -> bool:
    return bool(_SENTENCE_END.search(word))


def _group_words(words: Sequence[WordTiming], max_words: int) -> list[list[WordTiming]]:
    """Runs of at most max_words; a sentence end always closes a group."""
    groups: list[list[WordTiming]] = []
    current: list[WordTiming] = []
    for word in words:
        current.append(word)
        if len(current) >= max_words or _ends_sentence(word.word):
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def caption_cues(words: Sequence[WordTiming], max_words: int = 3) -> list[Cue]:
    """Group timed words into caption cues of at most max_words words."""
    if max_words < 1:
        raise ValueError("max_words must be at least 1")
    groups = _group_words([w for w in words if w.word.strip()], max_words)
    cues: list[Cue] = []
    for index, group in enumerate(groups):
        start, end = group[0].start_s, group[-1].end_s
        if index + 1 < len(groups):
            next_start = groups[index + 1][0].start_s
            if 0 <= next_start - end <= _MAX_BRIDGED_GAP_S:
                end = next_start
        text = " ".join(w.word.strip() for w in group)
        cues.append(Cue(start_s=round(start, 3), end_s=round(max(end, start + 0.01), 3), text=text))
    return cues


def _char_width_em(ch: str) -> float:
    """Generous advance widths for a bold sans (DejaVu Sans Bold is the reference)."""
    if ch in "MWmw@%":
        return 1.12
    if ch in "iljtfrI.,;:'!|()[]\"" or ch.isspace():
        return 0.5
    if ch.isupper():
        return 0.88
    if ch.islower() or ch.isdigit():
        return 0.74
    return 1.0  # symbols, emoji, other scripts: assume wide


def _text_width_px(text: str, font_size: int) -> float:
    return sum(_char_width_em(ch) for ch in text) * font_size + 2 * OUTLINE_PX


def _wrapped_lines(words: Sequence[str], font_size: int, available_px: float) -> int:
    """Greedy word wrap, as libass does with WrapStyle 0 (close enough to bound it)."""
    lines, current = 1, ""
    for word in words:
        candidate = f"{current} {word}" if current else word
        if current and _text_width_px(candidate, font_size) > available_px:
            lines, current = lines + 1, word
        else:
            current = candidate
    return lines


def fitting_font_size(text: str, font_size: int, available_px: float) -> int:
    """The largest size <= font_size at which every word fits and the cue fits the line cap."""
    words = text.split() or [""]
    size = font_size
    while size > 12 and (
        max(_text_width_px(word, size) for word in words) > available_px
        or _wrapped_lines(words, size, available_px) > MAX_CAPTION_LINES
    ):
        size -= 2
    return size


def ass_escape(text: str) -> str:
    """Make text literal for libass: no override blocks, no \\N/\\h escapes, one line."""
    text = " ".join(text.split())
    # A word joiner after a backslash keeps libass from reading it as an escape.
    text = text.replace("\\", "\\" + _WORD_JOINER)
    return text.replace("{", "\\{").replace("}", "\\}")


def _size_override(text: str, font_size: int, available_px: float) -> str:
    """A {\\fs} tag shrinking a cue whose words would not fit between the margins."""
    size = fitting_font_size(" ".join(text.split()), font_size, available_px)
    return "" if size == font_size else f"{{\\fs{size}}}"


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


def title_margin_top(height: int = 1920, zone: SafeZone = SHORTS_SAFE_ZONE) -> int:
    return math.ceil(height * zone.top) + round(SAFE_PADDING_PX * height / 1920)


def title_box(width: int = 1080, height: int = 1920, font_size: int = TITLE_FONT_SIZE) -> Box:
    """The pixel box a scene's on-screen title may occupy (top-centre, below the top UI)."""
    margins = caption_margins(width, height)
    top = title_margin_top(height)
    text_height = math.ceil(TITLE_MAX_LINES * font_size * LINE_HEIGHT_FACTOR)
    return Box(
        left=margins.left - OUTLINE_PX,
        top=top - OUTLINE_PX,
        right=width - margins.right + OUTLINE_PX,
        bottom=top + text_height + OUTLINE_PX,
    )


def ass_subtitles(
    cues: Sequence[Cue],
    width: int = 1080,
    height: int = 1920,
    font: str = "DejaVu Sans",
    font_size: int = 72,
    primary: str = "#FFFFFF",
    outline: str = "#000000",
    titles: Sequence[Cue] = (),
    title_colour: str = "#FFE082",
) -> str:
    """A complete ASS document: bold, outlined, bottom-centre captions inside the safe zone,
    and optional per-scene titles (the scene's on-screen text) top-centre inside it too."""
    margins = caption_margins(width, height)
    if "," in font:
        raise ValueError(f"ASS font names cannot contain commas: {font!r}")
    # PlayRes equal to the frame size makes every margin and size below real pixels.
    header = [
        "[Script Info]",
        "ScriptType: v4.00+",
        f"PlayResX: {width}",
        f"PlayResY: {height}",
        "WrapStyle: 0",
        "ScaledBorderAndShadow: yes",
        "",
        "[V4+ Styles]",
        "Format: Name, Fontname, Fontsize, PrimaryColour, SecondaryColour, OutlineColour, "
        "BackColour, Bold, Italic, Underline, StrikeOut, ScaleX, ScaleY, Spacing, Angle, "
        "BorderStyle, Outline, Shadow, Alignment, MarginL, MarginR, MarginV, Encoding",
        f"Style: Caption,{font},{font_size},{ass_colour(primary)},{ass_colour(primary)},"
        f"{ass_colour(outline)},{ass_colour(outline, alpha=0x80)},-1,0,0,0,100,100,0,0,"
        f"1,{OUTLINE_PX},0,2,{margins.left},{margins.right},{margins.vertical},1",
        f"Style: Title,{font},{TITLE_FONT_SIZE},{ass_colour(title_colour)},"
        f"{ass_colour(title_colour)},{ass_colour(outline)},{ass_colour(outline, alpha=0x80)},"
        f"-1,0,0,0,100,100,0,0,1,{OUTLINE_PX},0,8,{margins.left},{margins.right},"
        f"{title_margin_top(height)},1",
        "",
        "[Events]",
        "Format: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text",
    ]
    available_px = width - margins.left - margins.right
    events = [
        f"Dialogue: 0,{ass_time(cue.start_s)},{ass_time(cue.end_s)},Caption,,0,0,0,,"
        f"{_size_override(cue.text, font_size, available_px)}{ass_escape(cue.text)}"
        for cue in cues
    ]
    events += [
        f"Dialogue: 1,{ass_time(t.start_s)},{ass_time(t.end_s)},Title,,0,0,0,,"
        f"{_size_override(t.text, TITLE_FONT_SIZE, available_px)}{ass_escape(t.text)}"
        for t in titles
        if t.text.strip()
    ]
    return "\n".join([*header, *events]) + "\n"
