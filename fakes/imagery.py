"""What the local servers' pictures show, and how their image judge tells: one convention.

A test server cannot draw a telescope, nor can it look at a frame and see one. So the fakes
agree on a code: a subject word is drawn as a picture whose upper and lower halves take two
colours from the word's SHA-256 (with a gentle gradient and grain, so that motion and crops
stay visible), and
the fake image judge reads a picture's colours back into the word it shows. The image model
of fakes/gemini draws its prompt's subject this way, the stock servers (fakes/pexels.py,
fakes/pixabay.py) their query's subject (and, on purpose, some other subject), and the Gemini
image-understanding answer scores a keyframe by whether the word it shows is one the narration
says. The product never knows: it sends prompts, queries and keyframes, and reads scores.

Everything is made with ffmpeg, which the product already needs.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from collections.abc import Iterable

# Words no picture is of: the framing the planner adds, and the narration's glue.
_NOT_SUBJECTS_TEXT = """
    about after again also another away back bold came come could does doing done down each
    even every explanatory first from have here into just know like look made make many more
    most much need never next only other over really right scene shot showing since some
    still such take than that their them then there these they thing think this those through
    very want what when where which while will with without would your style vertical
    composition text logos opening attention grabbing warm closing calm motion themed around
    cinematic photorealistic today video watch follow subscribe
    """
_NOT_SUBJECTS = frozenset(_NOT_SUBJECTS_TEXT.split())
_WORD = re.compile(r"[a-z]{4,}")
# Farther than this from every narration word's colours (distance over the six channels): not
# what it says. A JPEG keyframe, a 9:16 crop or a slow zoom moves them by about 10.
MATCH_DISTANCE = 40.0
ON_TOPIC_SCORE = 0.92
OFF_TOPIC_SCORE = 0.12


def subject_words(text: str) -> list[str]:
    """The words of `text` a picture could be of, in order (lowercase, 4+ letters)."""
    return [w for w in _WORD.findall(text.lower()) if w not in _NOT_SUBJECTS]


def depicted_word(prompt: str) -> str:
    """The subject a fake picture of `prompt` shows: the first subject word after 'showing'
    or 'around' when the prompt has one (the planner's prompts do), else its first."""
    lowered = prompt.lower()
    for marker in ("showing ", "around "):
        if marker in lowered:
            after = subject_words(lowered.split(marker, 1)[1])
            if after:
                return after[0]
    words = subject_words(lowered)
    return words[0] if words else "nothing"


Colours = tuple[int, int, int, int, int, int]  # the upper half's RGB, then the lower half's


def colours_of(word: str) -> Colours:
    """The two colours a picture of `word` has, upper half and lower half, from its hash: six
    channels, so that two words' pictures are told apart."""
    digest = hashlib.sha256(word.lower().encode()).digest()
    r1, g1, b1, r2, g2, b2 = (40 + byte * 175 // 255 for byte in digest[:6])
    return r1, g1, b1, r2, g2, b2


def _source(word: str, width: int, height: int, seconds: float | None) -> str:
    c = colours_of(word)
    # Each half its colour, with a gentle horizontal gradient (mean unchanged) and moving grain.
    expr = "clip(if(lt(Y,H/2),{a},{b})+20*(X/W-0.5)+5*sin(X/7+Y/5+T*3),0,255)"
    duration = f":d={seconds}" if seconds else ""
    return (
        f"color=c=black:s={width}x{height}:r=24{duration},format=rgb24,"
        f"geq=r='{expr.format(a=c[0], b=c[3])}':g='{expr.format(a=c[1], b=c[4])}'"
        f":b='{expr.format(a=c[2], b=c[5])}'"
    )


def _ffmpeg(args: list[str], stdin: bytes | None = None) -> bytes:
    done = subprocess.run(
        ["ffmpeg", "-hide_banner", "-loglevel", "error", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ffmpeg failed: {done.stderr.decode(errors='replace')[-500:]}")
    return done.stdout


def picture_png(word: str, width: int = 576, height: int = 1024) -> bytes:
    """A PNG of `word` (see the module docstring)."""
    return _ffmpeg(
        ["-f", "lavfi", "-i", _source(word, width, height, None), "-frames:v", "1",
         "-f", "image2pipe", "-vcodec", "png", "-"]
    )  # fmt: skip


def footage_mp4(word: str, width: int, height: int, seconds: float) -> bytes:
    """A small H.264 MP4 (yuv420p, faststart, no audio) of `word` lasting `seconds`."""
    return _ffmpeg(
        ["-f", "lavfi", "-i", _source(word, width, height, seconds), "-c:v", "libx264",
         "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-movflags", "+faststart+frag_keyframe",
         "-f", "mp4", "-"]
    )  # fmt: skip


def seen_colours(image: bytes) -> Colours:
    """The mean colours of an image's upper and lower bands (10-35 % and 65-90 % of its
    height, away from the halves' seam that a crop or a zoom moves a little)."""
    raw = _ffmpeg(
        ["-i", "pipe:0", "-frames:v", "1", "-vf",
         "split[u][l];[u]crop=iw:ih/4:0:ih/10,scale=1:1:flags=area[a];"
         "[l]crop=iw:ih/4:0:ih*13/20,scale=1:1:flags=area[b];[a][b]vstack",
         "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
        stdin=image,
    )  # fmt: skip
    if len(raw) < 6:
        raise ValueError("not an image ffmpeg can read")
    return raw[0], raw[1], raw[2], raw[3], raw[4], raw[5]


def _distance(a: Iterable[int], b: Iterable[int]) -> float:
    return sum((x - y) ** 2 for x, y in zip(a, b, strict=True)) ** 0.5


def judge(images: list[bytes], narration: str) -> tuple[float, str]:
    """The fake image judge: (score, reason) for keyframes against the narration they should
    show. On topic when every keyframe shows a word the narration says."""
    words = subject_words(narration) or ["nothing"]
    seen = []
    for image in images:
        colours = seen_colours(image)
        best = min(words, key=lambda w: _distance(colours, colours_of(w)))
        seen.append(best if _distance(colours, colours_of(best)) <= MATCH_DISTANCE else None)
    if seen and all(seen):
        shown = ", ".join(dict.fromkeys(w for w in seen if w))
        return ON_TOPIC_SCORE, f"the frames show {shown}, which the narration names"
    return OFF_TOPIC_SCORE, "the frames show nothing the narration talks about"
