"""build_captions: the ASS document of a render's karaoke captions, hook and scene titles, and
the box of every event in it; caption_groups splits the word timings into cues."""

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
    Cue,
)
from mdame_domain.voice import WordTiming

# Short gaps between cues are closed so captions do not flicker off between words.
_MAX_BRIDGED_GAP_S = 0.25
_SENTENCE_END = re.compile(r"[.!?]['\")\]]*$")
TITLE_FONT_SIZE = 60
TITLE_MAX_LINES = 3  # on-screen text is at most 8 words
HOOK_SECONDS = 2.0
HOOK_MAX_LINES = 3
_OUTLINE_COLOUR = "#000000"


def _ends_sentence(word: str) -> bool:
    return bool(_SENTENCE_END.search(word))


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
