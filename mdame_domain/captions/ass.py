"""ASS (Advanced SubStation Alpha) text: escaping, colours and timestamps as libass reads them."""

from __future__ import annotations

import re

_WORD_JOINER = "\u2060"


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


def ass_override_colour(hex_colour: str) -> str:
    """'#RRGGBB' -> the '&HBBGGRR&' form of a \\1c override tag."""
    return f"&H{ass_colour(hex_colour)[4:]}&"
