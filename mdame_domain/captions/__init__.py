"""Burned-in karaoke captions and the hook, laid out as ASS inside the safe area, and what the
rendered frames show of them.

YouTube Shorts (and the other vertical players) draw their own UI over the video: the title and
buttons at the bottom, the action rail on the right, the header at the top. Every event is laid
out here, not by libass: lines are broken in plain code, each text block is measured with the
TTF's real advance widths and placed with \\an\\pos, and libass only draws (WrapStyle 2: no
wrapping of its own). So each event's pixel box is known before rendering, is recorded with the
render, and is checked against the safe area by caption_layout_problems.

The package: `model` (Cue, CaptionStyle, CaptionBox, CaptionTrack, CaptionLayoutError),
`geometry` (the safe area and its regions), `ass` (ASS escaping, colours, times), `fonts` (the
caption fonts and their metrics), `layout` (line breaking and placing a block in a region),
`track` (build_captions, hook_end_s), `checks` (caption_layout_problems and
caption_layout_stats) and `onscreen` (the text blocks decoded frames show: read_text_on_screen,
text_on_screen_problems). Import the names from here.
"""

from __future__ import annotations

# Every name the module defined before it became this package is importable from here: the
# public ones are listed in __all__, the private helpers carry noqa: F401.
from mdame_domain.captions.ass import (  # noqa: F401
    _WORD_JOINER,
    ass_colour,
    ass_escape,
    ass_override_colour,
    ass_time,
)
from mdame_domain.captions.checks import (  # noqa: F401
    _box_list,
    _describe,
    caption_layout_problems,
    caption_layout_stats,
)
from mdame_domain.captions.fonts import (  # noqa: F401
    _MISSING_GLYPH_EM,
    CAPTION_FONTS,
    FONT_DIRS,
    FontMetrics,
    font_file,
    font_metrics,
)
from mdame_domain.captions.geometry import (  # noqa: F401
    _CAPTION_REGION,
    _HOOK_REGION,
    SAFE_PADDING_PX,
    SHORTS_SAFE_ZONE,
    Box,
    SafeZone,
    caption_regions,
    safe_box,
)
from mdame_domain.captions.layout import (  # noqa: F401
    _VERTICAL_SLACK,
    _WIDTH_SLACK,
    MIN_FONT_SIZE,
    _layout,
    _place,
    _Placed,
    _split_word,
    break_lines,
)
from mdame_domain.captions.model import (
    CaptionBox,
    CaptionLayoutError,
    CaptionStyle,
    CaptionTrack,
    Cue,
)
from mdame_domain.captions.onscreen import (
    MAX_TEXT_BLOCKS,
    FrameReading,
    TextBlock,
    fill_colour,
    read_text_on_screen,
    recorded_block_problems,
    text_on_screen_problems,
    text_on_screen_stats,
)
from mdame_domain.captions.track import (  # noqa: F401
    _MAX_BRIDGED_GAP_S,
    _OUTLINE_COLOUR,
    _SENTENCE_END,
    HOOK_MAX_LINES,
    HOOK_MAX_S,
    HOOK_MIN_S,
    _dialogue,
    _ends_sentence,
    _karaoke_bodies,
    build_captions,
    caption_groups,
    hook_end_s,
)

__all__ = [
    "Box",
    "CAPTION_FONTS",
    "CaptionBox",
    "CaptionLayoutError",
    "CaptionStyle",
    "CaptionTrack",
    "Cue",
    "FONT_DIRS",
    "FontMetrics",
    "FrameReading",
    "HOOK_MAX_LINES",
    "HOOK_MAX_S",
    "HOOK_MIN_S",
    "MAX_TEXT_BLOCKS",
    "MIN_FONT_SIZE",
    "SAFE_PADDING_PX",
    "SHORTS_SAFE_ZONE",
    "SafeZone",
    "TextBlock",
    "ass_colour",
    "ass_escape",
    "ass_override_colour",
    "ass_time",
    "break_lines",
    "build_captions",
    "caption_groups",
    "caption_layout_problems",
    "caption_layout_stats",
    "caption_regions",
    "font_file",
    "fill_colour",
    "font_metrics",
    "hook_end_s",
    "read_text_on_screen",
    "recorded_block_problems",
    "safe_box",
    "text_on_screen_problems",
    "text_on_screen_stats",
]
