"""The media profile: the frame size of everything the pipeline makes.

`shorts` is the product: 1080x1920 renders from 360x640 procedural clips (their patterns are
drawn at 180x320 and scaled: a bigger clip only costs its encode more, and the render scales it
to the frame anyway). `tiny` runs the same
code on frames a fifth as wide and tall (216x384 renders from 108x192 clips), so that tests and
benches whose subject is orchestration, state and recovery are not dominated by the encode.
Captions are laid out on the 1080x1920 frame in both (libass scales them to the render), so
their layout, and its checks, are the same whichever profile renders. MDAME_MEDIA_PROFILE picks
the profile; the default is `shorts`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mdame_core import settings

PROFILE_ENV = "MDAME_MEDIA_PROFILE"
# The frame captions are laid out on, in every profile.
CAPTION_FRAME = (1080, 1920)


@dataclass(frozen=True)
class MediaProfile:
    name: str
    width: int  # the render
    height: int
    clip_width: int  # the procedural scene clips
    clip_height: int


SHORTS = MediaProfile("shorts", 1080, 1920, 360, 640)
TINY = MediaProfile("tiny", 216, 384, 108, 192)
PROFILES = {p.name: p for p in (SHORTS, TINY)}


def media_profile(environ: Mapping[str, str] | None = None) -> MediaProfile:
    """The profile this process makes media with (MDAME_MEDIA_PROFILE, default shorts)."""
    try:
        return PROFILES[settings.get(PROFILE_ENV, environ)]
    except settings.SettingsError as exc:
        raise ValueError(str(exc)) from None
