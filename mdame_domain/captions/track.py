"""build_captions: the ASS document of a render's karaoke captions and hook, and the box of every
event in it; caption_groups splits the word timings into cues; hook_end_s says how long the
hook stays.

At most two text blocks are on screen at once: the hook, while it is said, over the captions.
A title is the platform's (the upload's metadata), so none is burned in over them."""

from __future__ import annotations

import re
from collections.abc import Sequence

from mdame_domain.captions.ass import ass_colour, ass_escape, ass_override_colour, ass_time
from mdame_domain.captions.fonts import CAPTION_FONTS
from mdame_domain.captions.geometry import SHORTS_SAFE_ZONE, SafeZone, caption_regions
from mdame_domain.captions.layout import _layout, _Placed, break_lines
from mdame_domain.captions.model import (
    CaptionBox,
    CaptionLayoutError,
    CaptionStyle,
    CaptionTrack,
)
from mdame_domain.voice import WordTiming

# Short gaps between cues are closed so captions do not flicker off between words.
_MAX_BRIDGED_GAP_S = 0.25
_SENTENCE_END = re.compile(r"[.!?]['\")\]]*$")
_TOKEN = re.compile(r"\w+")
# The hook stays while it is said (the narration opens with it), long enough to be read and
# not past the point a viewer has heard it: MDAME_HOOK_MIN_S and MDAME_HOOK_MAX_S override.
HOOK_MIN_S = 2.0
HOOK_MAX_S = 5.0
HOOK_MAX_LINES = 3
_OUTLINE_COLOUR = "#000000"


def _ends_sentence(word: str) -> bool:
    return bool(_SENTENCE_END.search(word))


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.casefold())


def hook_end_s(
    words: Sequence[WordTiming],
    hook: str,
    min_s: float = HOOK_MIN_S,
    max_s: float = HOOK_MAX_S,
) -> float:
    """When the hook leaves the screen: when its last word has been said, if the narration
    opens with it, kept within min_s..max_s; min_s when the narration does not open with it."""
    if min_s <= 0 or max_s < min_s:
        raise ValueError(f"hook seconds must be 0 < min <= max, got {min_s} and {max_s}")
    wanted = _tokens(hook)
    said: list[tuple[str, float]] = [(token, w.end_s) for w in words for token in _tokens(w.word)]
    if not wanted or len(said) < len(wanted):
        return min_s
    if [token for token, _ in said[: len(wanted)]] != wanted:
        return min_s
    return min(max_s, max(min_s, said[len(wanted) - 1][1]))


# The style defaults here share one CaptionStyle(): safe, as it is frozen.
def caption_groups(
    words: Sequence[WordTiming],
    style: CaptionStyle = CaptionStyle(),  # noqa: B008
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
    style: CaptionStyle = CaptionStyle(),  # noqa: B008
    *,
    hook: str = "",
    hook_min_s: float = HOOK_MIN_S,
    hook_max_s: float = HOOK_MAX_S,
    width: int = 1080,
    height: int = 1920,
    zone: SafeZone = SHORTS_SAFE_ZONE,
) -> CaptionTrack:
    """Karaoke captions from the word timings (the spoken word in the highlight colour) and
    the hook above them until it has been said (hook_end_s), laid out inside the safe area;
    the ASS document and the box of every cue and of the hook."""
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
        until = hook_end_s(words, hook, hook_min_s, hook_max_s)
        events.append(_dialogue(2, 0.0, until, "Hook", placed, body))
        record("hook", 0.0, until, placed, " ".join(hook.split()))
    return CaptionTrack("\n".join([*header, *events]) + "\n", tuple(boxes))
