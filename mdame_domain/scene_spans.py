"""Each scene's span of the voice track: where its own words are said.

A scene's narration is part of the script the voice speaks, and the voice track records when
each word is said (WordTiming). Scene 0 starts at 0, every later scene at the start of its first
spoken word, each ends where the next starts and the last at the track's end, so what is on
screen matches what is said.

The scenes' words and the timed words are aligned as sequences, not by string equality: both
sides are read as lower-case tokens (punctuation dropped, hyphenated and slashed words split,
digits read as the words a voice says for them: "20%" -> "twenty percent"); runs of equal
tokens anchor the alignment (difflib), and the tokens between two anchors are paired by an edit
distance that prefers similar tokens ("colour"/"color"). A scene whose first token was not
spoken starts at its first token that was; a scene none of whose tokens was spoken is placed
between its neighbours by its share of their words (`how` says which). When too few of the
script's tokens are found among the timed words (another text was spoken, or the timings are
missing), the cuts fall back to the plan's weights, and the notes say so.

A cut is never closer than `min_scene_s` to its neighbour (the render's floor): where the words
leave less, the cuts move as little as they can, the most any one moves as small as possible.
"""

from __future__ import annotations

import difflib
import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mdame_domain.voice import WordTiming

# The shortest span a scene gets when its words leave less (a cut a viewer can follow).
MIN_SCENE_S = 0.5
# Below this share of the script's tokens found among the timed words, the words cannot place
# the cuts: the plan's weights do.
MIN_MATCHED_SHARE = 0.5
# How alike two tokens must be (difflib's ratio) to pair them between anchors as the same word.
SIMILAR = 0.6

_ONES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
         "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
         "eighteen", "nineteen")  # fmt: skip
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_SCALES = ((10**12, "trillion"), (10**9, "billion"), (10**6, "million"), (1000, "thousand"))
_ORDINALS = {"one": "first", "two": "second", "three": "third", "five": "fifth",
             "eight": "eighth", "nine": "ninth", "twelve": "twelfth"}  # fmt: skip
_SYMBOLS = {"%": " percent ", "&": " and ", "+": " plus ", "$": " dollars ", "°": " degrees "}
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?(?:st|nd|rd|th)?")


def _cardinal(n: int) -> list[str]:
    if n < 20:
        return [_ONES[n]]
    if n < 100:
        tens, ones = divmod(n, 10)
        return [_TENS[tens]] + ([_ONES[ones]] if ones else [])
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return [_ONES[hundreds], "hundred"] + (_cardinal(rest) if rest else [])
    for scale, name in _SCALES:
        if n >= scale:
            high, rest = divmod(n, scale)
            return _cardinal(high) + [name] + (_cardinal(rest) if rest else [])
    raise AssertionError(n)  # pragma: no cover - the scales cover every n >= 1000


def number_words(text: str) -> list[str]:
    """The words a voice says for a number as written: '1,200' -> one thousand two hundred,
    '3.5' -> three point five, '21st' -> twenty first."""
    suffix = text[-2:] if text[-2:] in ("st", "nd", "rd", "th") else ""
    digits = text[: len(text) - len(suffix)].replace(",", "")
    whole, _, fraction = digits.partition(".")
    if len(whole) > 15:
        return list(whole)  # an identifier, read digit by digit
    words = _cardinal(int(whole))
    if fraction:
        words += ["point", *(_ONES[int(d)] for d in fraction)]
    elif suffix:
        last = words[-1]
        regular = last[:-1] + "ieth" if last.endswith("y") else last + "th"
        words[-1] = _ORDINALS.get(last, regular)
    return words


def tokens(text: str) -> list[str]:
    """A text as the tokens it is aligned by (see the module docstring)."""
    plain = unicodedata.normalize("NFKD", text.lower())
    plain = "".join(ch for ch in plain if not unicodedata.combining(ch))
    for symbol, words in _SYMBOLS.items():
        plain = plain.replace(symbol, words)
    plain = plain.replace("'", "").replace("\u2019", "")  # don't -> dont, as a voice's word
    out: list[str] = []
    for part in re.split(r"[^\w.,]+|_", plain):
        for piece in re.findall(r"\d[\d,]*(?:\.\d+)?(?:st|nd|rd|th)?|[^\W\d_]+", part):
            out += number_words(piece) if _NUMBER.fullmatch(piece) else [piece]
    return out


@dataclass(frozen=True)
class SceneSpan:
    """One scene's span of the track: where the render shows its clip (start_s..end_s), where
    its words start (words_start_s: the cut the words ask for), the timed word it starts on,
    and how that was found: 'start' (the first scene), 'word' (its first word), 'later word'
    (its first words were not spoken), 'interpolated' (none of its words was found),
    'weights' (the words could not place the cuts)."""

    index: int
    start_s: float
    end_s: float
    words_start_s: float
    first_word: str
    how: str

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "start_s": round(self.start_s, 4),
            "end_s": round(self.end_s, 4),
            "words_start_s": round(self.words_start_s, 4),
            "first_word": self.first_word,
            "how": self.how,
        }


@dataclass(frozen=True)
class SceneTiming:
    """Every scene's span, how the cuts were placed ('words' or 'weights') and why."""

    spans: tuple[SceneSpan, ...]
    method: str
    matched_tokens: int
    script_tokens: int
    min_scene_s: float
    notes: tuple[str, ...] = ()

    @property
    def durations_s(self) -> list[float]:
        return [s.duration_s for s in self.spans]

    @property
    def cuts_s(self) -> list[float]:
        """Where each scene after the first starts in the render."""
        return [s.start_s for s in self.spans[1:]]

    @property
    def word_cuts_s(self) -> list[float]:
        """Where each scene after the first starts saying its words."""
        return [s.words_start_s for s in self.spans[1:]]

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "matched_tokens": self.matched_tokens,
            "script_tokens": self.script_tokens,
            "min_scene_s": self.min_scene_s,
            "notes": list(self.notes),
        }


def _pair_gap(xs: Sequence[str], ys: Sequence[str]) -> list[tuple[int, int]]:
    """Pairs (i, j) of an edit-distance alignment of two short runs: a similar token costs
    less than a substitution, which costs less than leaving both out."""
    n, m = len(xs), len(ys)
    if not n or not m:
        return []
    inf = math.inf
    cost = [[inf] * (m + 1) for _ in range(n + 1)]
    back: list[list[str]] = [[""] * (m + 1) for _ in range(n + 1)]
    cost[0][0] = 0.0
    for i in range(n + 1):
        for j in range(m + 1):
            here = cost[i][j]
            if i < n and here + 1.0 < cost[i + 1][j]:
                cost[i + 1][j], back[i + 1][j] = here + 1.0, "x"
            if j < m and here + 1.0 < cost[i][j + 1]:
                cost[i][j + 1], back[i][j + 1] = here + 1.0, "y"
            if i < n and j < m:
                ratio = difflib.SequenceMatcher(None, xs[i], ys[j]).ratio()
                step = 0.0 if xs[i] == ys[j] else (0.5 if ratio >= SIMILAR else 1.5)
                if here + step < cost[i + 1][j + 1]:
                    cost[i + 1][j + 1], back[i + 1][j + 1] = here + step, "p"
    pairs = []
    i, j = n, m
    while i or j:
        move = back[i][j]
        if move == "p":
            i, j = i - 1, j - 1
            pairs.append((i, j))
        elif move == "x":
            i -= 1
        else:
            j -= 1
    return pairs[::-1]


def align(script: Sequence[str], spoken: Sequence[str]) -> list[int | None]:
    """For each script token, the index of the spoken token it was said as (None: not said)."""
    out: list[int | None] = [None] * len(script)
    matcher = difflib.SequenceMatcher(None, list(script), list(spoken), autojunk=False)
    i0 = j0 = 0
    for a, b, size in matcher.get_matching_blocks():
        # Between two runs of equal tokens: pair what was said differently.
        for gi, gj in _pair_gap(script[i0:a], spoken[j0:b]):
            out[i0 + gi] = j0 + gj
        for k in range(size):
            out[a + k] = b + k
        i0, j0 = a + size, b + size
    return out


def _floored(targets: Sequence[float], total_s: float, floor_s: float) -> list[float]:
    """Cuts no closer than floor_s to each other, to 0 or to total_s, each as near its target
    as that allows: the largest move minimised, and no cut moved that need not be."""
    n = len(targets)

    def bounds(reach: float) -> tuple[list[float], list[float]] | None:
        low, high = [0.0] * n, [0.0] * n
        previous = 0.0
        for i, t in enumerate(targets):
            low[i] = previous = max(t - reach, previous + floor_s)
        following = total_s
        for i in range(n - 1, -1, -1):
            high[i] = following = min(targets[i] + reach, following - floor_s)
        if any(lo > hi + 1e-9 for lo, hi in zip(low, high, strict=True)):
            return None
        return low, high

    if not n:
        return []
    lo_reach, hi_reach = 0.0, total_s
    if bounds(0.0) is None:
        for _ in range(60):
            mid = (lo_reach + hi_reach) / 2
            lo_reach, hi_reach = (lo_reach, mid) if bounds(mid) else (mid, hi_reach)
    found = bounds(hi_reach if bounds(0.0) is None else 0.0)
    assert found is not None
    low, high = found
    cuts: list[float] = []
    for i, t in enumerate(targets):
        least = max(low[i], cuts[-1] + floor_s if cuts else floor_s)
        cuts.append(min(max(t, least), high[i]))
    return cuts


def _weights(weights: Sequence[float], total_s: float) -> list[float]:
    total = math.fsum(weights)
    shares = [w / total if total > 0 else 1 / len(weights) for w in weights]
    cuts, elapsed = [], 0.0
    for share in shares[:-1]:
        elapsed += share * total_s
        cuts.append(elapsed)
    return cuts


def scene_spans(
    narrations: Sequence[str],
    words: Sequence[WordTiming],
    total_s: float,
    weights: Sequence[float] | None = None,
    min_scene_s: float = MIN_SCENE_S,
) -> SceneTiming:
    """Each scene's span of a voice track of total_s seconds whose timed words are `words`,
    from the scenes' narrations in order (see the module docstring); `weights` (the plan's
    duration weights, by default the narrations' word counts) place the cuts when the words
    cannot."""
    if not narrations:
        raise ValueError("need at least one scene")
    if total_s <= 0:
        raise ValueError(f"the track must have a length, not {total_s}")
    floor_s = min(min_scene_s, total_s / len(narrations))
    per_scene = [tokens(text) for text in narrations]
    script = [t for toks in per_scene for t in toks]
    owner = [(w, k) for w, word in enumerate(words) for k in range(len(tokens(word.word)))]
    spoken = [t for word in words for t in tokens(word.word)]
    paired = align(script, spoken) if script and spoken else [None] * len(script)
    # A token said as written counts whole, one said differently (paired between anchors) half.
    matched = sum(
        1.0 if script[i] == spoken[j] else 0.5 for i, j in enumerate(paired) if j is not None
    )
    notes: list[str] = []
    later = len(narrations) - 1
    if not script or matched < MIN_MATCHED_SHARE * len(script):
        notes.append(
            f"the voice's {len(words)} timed words match {matched:g} of the script's "
            f"{len(script)} words: the cuts follow the plan's weights"
        )
        shares = weights or [max(1, len(t)) for t in per_scene]
        method, targets = "weights", _weights(shares, total_s)
        hows, firsts = ["weights"] * later, [""] * later
    else:
        method = "words"
        targets, hows, firsts = _word_targets(per_scene, paired, owner, words, notes)
    cuts = _floored(targets, total_s, floor_s)
    moved = [(i + 1, c - t) for i, (c, t) in enumerate(zip(cuts, targets, strict=True)) if c != t]
    if moved:
        worst = max(moved, key=lambda m: abs(m[1]))
        notes.append(
            f"{len(moved)} cut(s) moved to give every scene {floor_s:g}s at least; the most, "
            f"scene {worst[0]}'s start, by {worst[1]:+.3f}s"
        )
    starts = [0.0, *cuts]
    ends = [*cuts, total_s]
    spans = tuple(
        SceneSpan(
            index=i,
            start_s=starts[i],
            end_s=ends[i],
            words_start_s=0.0 if i == 0 else targets[i - 1],
            first_word="" if i == 0 else firsts[i - 1],
            how="start" if i == 0 else hows[i - 1],
        )
        for i in range(len(narrations))
    )
    return SceneTiming(spans, method, round(matched), len(script), floor_s, tuple(notes))


def _word_targets(
    per_scene: Sequence[Sequence[str]],
    paired: Sequence[int | None],
    owner: Sequence[tuple[int, int]],
    words: Sequence[WordTiming],
    notes: list[str],
) -> tuple[list[float], list[str], list[str]]:
    """Each later scene's word-derived start, how it was found and the word it starts on."""

    def start_of(j: int) -> float:
        # A token inside a timed word ('twenty' of 'twenty-one'): its share of the word.
        w, k = owner[j]
        parts = sum(1 for o in owner if o[0] == w)
        word = words[w]
        return word.start_s + (word.end_s - word.start_s) * k / parts

    offsets = [0]
    for toks in per_scene:
        offsets.append(offsets[-1] + len(toks))
    targets: list[float | None] = []
    hows, firsts = [], []
    for scene in range(1, len(per_scene)):
        first, end = offsets[scene], offsets[scene + 1]
        said = [(i, paired[i]) for i in range(first, end) if paired[i] is not None]
        if said:
            i, j = said[0]
            assert j is not None
            targets.append(start_of(j))
            hows.append("word" if i == first else "later word")
            firsts.append(words[owner[j][0]].word)
            if i != first:
                notes.append(f"scene {scene}'s first {i - first} word(s) were not found spoken")
        else:
            targets.append(None)
            hows.append("interpolated")
            firsts.append("")
            notes.append(f"none of scene {scene}'s words was found spoken: placed by its words")
    return _interpolated(targets, offsets, paired, owner, words), hows, firsts


def _interpolated(
    targets: Sequence[float | None],
    offsets: Sequence[int],
    paired: Sequence[int | None],
    owner: Sequence[tuple[int, int]],
    words: Sequence[WordTiming],
) -> list[float]:
    """The missing targets placed between the last spoken word before and the first after,
    by the scenes' token counts in between."""
    out = list(targets)
    for k, value in enumerate(targets):
        if value is not None:
            continue
        token = offsets[k + 1]  # the scene's first token
        said = [(i, j) for i, j in enumerate(paired) if j is not None]
        before = [(i, j) for i, j in said if i < token]
        after = [(i, j) for i, j in said if i >= token]
        before_i, left = (
            (before[-1][0], words[owner[before[-1][1]][0]].end_s) if before else (-1, 0.0)
        )
        after_i, right = (
            (after[0][0], words[owner[after[0][1]][0]].start_s)
            if after
            else (len(paired), words[-1].end_s)
        )
        share = (token - before_i) / max(1, after_i - before_i)
        out[k] = left + (right - left) * share
    # Monotone, as the spoken order is.
    result: list[float] = []
    for value in out:
        assert value is not None
        result.append(max(value, result[-1]) if result else value)
    return result
