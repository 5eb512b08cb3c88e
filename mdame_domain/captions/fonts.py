"""The caption fonts and their metrics: which TTF each font is, and the advance widths layout
measures text with."""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mdame_domain.captions.model import CaptionLayoutError

# The fonts the install script provides (fonts-dejavu-core); bold faces, as the styles are bold.
CAPTION_FONTS: dict[str, str] = {
    "DejaVu Sans": "DejaVuSans-Bold.ttf",
    "DejaVu Sans Mono": "DejaVuSansMono-Bold.ttf",
    "DejaVu Serif": "DejaVuSerif-Bold.ttf",
}
FONT_DIRS = ("/usr/share/fonts", "/usr/local/share/fonts")
# A glyph the font lacks is drawn from a fallback font: assume it wide (CJK is 1 em).
_MISSING_GLYPH_EM = 1.15


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
