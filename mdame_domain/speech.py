"""Production speech, provider-neutral: does the audio cover the text, audio formats to WAV,
and word timings for audio that comes without them (Gemini TTS).

Plain functions over bytes and files, with ffmpeg as the only tool; no provider SDK here.
"""

from __future__ import annotations

import math
import re
import wave
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mdame_domain.mediatools import MediaToolError, run_tool
from mdame_domain.voice import VoiceSynthesisError, WordTiming

_TOKEN = re.compile(r"\S+")
_PUNCT = ".,;:!?\"'()[]{}«»“”‘’…"
_SENTENCE_END = (".", "!", "?", "…")
_CLAUSE_END = (",", ";", ":", "-", "—", "–")


def spoken_words(text: str) -> list[str]:
    """The words a TTS service reports a boundary for: whitespace-separated, surrounding
    punctuation stripped, tokens without a letter or digit dropped."""
    words = []
    for token in _TOKEN.findall(text):
        word = token.strip(_PUNCT)
        if any(ch.isalnum() for ch in word):
            words.append(word)
    return words


def _norm(word: str) -> str:
    return "".join(ch for ch in word.lower() if ch.isalnum())


# ------------------------------------------------------------------------------------------
# Coverage: never accept audio that does not speak the whole text
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CoverageRules:
    min_word_ratio: float = 0.9  # boundaries received / words sent
    end_tolerance_s: float = 0.3  # the last boundary may end this much after the audio
    min_seconds_per_word: float = 0.12  # audio shorter than this per word is not speech of it
    tail_words: int = 3  # the last boundary must be one of the text's last words


def coverage_problems(
    text: str,
    words: Sequence[WordTiming],
    audio_duration_s: float,
    rules: CoverageRules = CoverageRules(),
) -> list[str]:
    """Why the audio and its word boundaries do not cover `text` (empty: they do). A dropped
    stream, a stream cut at a chunk boundary and a truncated file all show up here: too few
    words, a last word that is not the text's, boundaries past the end of the audio, or audio
    too short for the number of words."""
    sent = spoken_words(text)
    if not sent:
        return ["the text has no words to speak"]
    problems = []
    if audio_duration_s <= 0.05:
        problems.append("no audio")
    if len(words) < rules.min_word_ratio * len(sent):
        problems.append(f"{len(words)} word boundaries received for {len(sent)} words sent")
    if words:
        tail = {_norm(w) for w in sent[-rules.tail_words :]}
        if _norm(words[-1].word) not in tail:
            problems.append(
                f"the last word received is {words[-1].word!r}, not one of the text's last "
                f"words {sent[-rules.tail_words :]}"
            )
        last_end = max(w.end_s for w in words)
        if last_end > audio_duration_s + rules.end_tolerance_s:
            problems.append(
                f"the audio is {audio_duration_s:.2f}s but its words run to {last_end:.2f}s"
            )
    minimum = rules.min_seconds_per_word * len(sent)
    if 0.05 < audio_duration_s < minimum:
        problems.append(
            f"the audio is {audio_duration_s:.2f}s, too short for {len(sent)} words "
            f"(at least {minimum:.1f}s)"
        )
    return problems


# ------------------------------------------------------------------------------------------
# Audio to WAV
# ------------------------------------------------------------------------------------------
def wav_duration(path: str | Path) -> float:
    with wave.open(str(path), "rb") as wav:
        return wav.getnframes() / wav.getframerate()


def decode_to_wav(source: str | Path, out_wav: str | Path, sample_rate: int = 24000) -> float:
    """Any audio file ffmpeg reads (Edge's MP3) -> 16-bit mono WAV; returns its duration."""
    try:
        run_tool(
            ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-i", str(source),
             "-ac", "1", "-ar", str(sample_rate), "-c:a", "pcm_s16le", "-f", "wav", str(out_wav)],
            timeout=120.0,
        )  # fmt: skip
    except MediaToolError as exc:
        raise VoiceSynthesisError(f"the audio could not be decoded: {exc}") from exc
    return wav_duration(out_wav)


_L16 = re.compile(r"^audio/(l16|pcm)\b", re.I)
_RATE = re.compile(r"\brate=(\d+)", re.I)
_CHANNELS = re.compile(r"\bchannels=(\d+)", re.I)


def audio_to_wav(data: bytes, mime_type: str, out_wav: str | Path) -> float:
    """TTS audio by its mime type -> WAV at out_wav; returns the duration. Raw PCM
    ('audio/L16;codec=pcm;rate=24000': 16-bit little-endian as Gemini sends it, despite L16's
    network order in RFC 2586) gets a WAV header; a WAV (or any other container) is decoded."""
    if not data:
        raise VoiceSynthesisError("the TTS response carried no audio")
    mime = mime_type.strip()
    if _L16.match(mime):
        rate_match = _RATE.search(mime)
        channels_match = _CHANNELS.search(mime)
        rate = int(rate_match.group(1)) if rate_match else 24000
        channels = int(channels_match.group(1)) if channels_match else 1
        if not 8000 <= rate <= 192000 or channels not in (1, 2):
            raise VoiceSynthesisError(f"unsupported PCM audio {mime!r}")
        usable = len(data) - len(data) % (2 * channels)
        with wave.open(str(out_wav), "wb") as wav:
            wav.setnchannels(channels)
            wav.setsampwidth(2)
            wav.setframerate(rate)
            wav.writeframes(data[:usable])
        if channels == 1:
            return wav_duration(out_wav)
        staged = Path(str(out_wav) + ".stereo.wav")
        Path(out_wav).rename(staged)
        try:
            return decode_to_wav(staged, out_wav, rate)
        finally:
            staged.unlink(missing_ok=True)
    if mime.lower().split(";")[0] in ("audio/wav", "audio/x-wav", "audio/wave", "audio/mpeg",
                                       "audio/mp3", "audio/ogg", "audio/opus"):  # fmt: skip
        staged = Path(str(out_wav) + ".in")
        staged.write_bytes(data)
        try:
            return decode_to_wav(staged, out_wav)
        finally:
            staged.unlink(missing_ok=True)
    raise VoiceSynthesisError(f"unsupported TTS audio type {mime_type!r}")


# ------------------------------------------------------------------------------------------
# Alignment: word timings for audio that has none
# ------------------------------------------------------------------------------------------
FRAME_S = 0.01
_MIN_GAP_S = 0.07  # quieter than this long is a pause; shorter dips are inside speech
_MIN_SPEECH_S = 0.03
_SNAP_S = 0.08  # a word boundary moves to the deepest energy dip this close to it


@dataclass(frozen=True)
class _Segment:
    start: int  # frames
    end: int  # frames, exclusive

    @property
    def frames(self) -> int:
        return self.end - self.start


def _frame_levels(path: str | Path) -> list[float]:
    """RMS level in dBFS of every 10 ms frame of a 16-bit mono WAV (decoded first if not)."""
    with wave.open(str(path), "rb") as wav:
        ok = wav.getsampwidth() == 2 and wav.getnchannels() == 1
        rate = wav.getframerate()
        frames = wav.readframes(wav.getnframes()) if ok else b""
    if not ok:
        staged = Path(str(path) + ".mono.wav")
        try:
            decode_to_wav(path, staged)
            return _frame_levels(staged)
        finally:
            staged.unlink(missing_ok=True)
    samples = array("h", frames)
    step = max(1, int(rate * FRAME_S))
    levels = []
    for i in range(0, len(samples), step):
        chunk = samples[i : i + step]
        power = sum(s * s for s in chunk) / max(1, len(chunk))
        levels.append(10 * math.log10(power / 32768.0**2) if power > 0 else -120.0)
    return levels


def _segments(levels: Sequence[float]) -> list[_Segment]:
    """Speech segments: frames within 35 dB of the loud end of the track (and above -50
    dBFS), with short dips bridged."""
    if not levels:
        return []
    loud = sorted(levels)[int(0.95 * (len(levels) - 1))]
    threshold = max(-50.0, loud - 35.0)
    min_gap = round(_MIN_GAP_S / FRAME_S)
    segments: list[_Segment] = []
    start = None
    for i, level in enumerate([*levels, -120.0]):
        if level > threshold and start is None:
            start = i
        elif level <= threshold and start is not None:
            if segments and start - segments[-1].end < min_gap:
                start = segments.pop().start
            segments.append(_Segment(start, i))
            start = None
    return [s for s in segments if s.frames >= round(_MIN_SPEECH_S / FRAME_S)]


_SMALL = [0, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 3, 1, 2, 2, 2, 2, 3, 2, 2]  # zero..nineteen
_TENS = [0, 0, 2, 2, 2, 2, 2, 3, 2, 2]  # twenty..ninety


def _number_syllables(value: int) -> int:
    """Syllables of an integer read out in English ('one hundred and eighty-nine thousand')."""
    if value == 0:
        return 2
    total = 0
    for scale_syllables in (0, 2, 2, 2, 2):  # units, thousand, million, billion, trillion
        value, group = divmod(value, 1000)
        if group:
            hundreds, rest = divmod(group, 100)
            if hundreds:
                total += _SMALL[hundreds] + 2 + (1 if rest else 0)  # "... hundred and"
            if rest >= 20:
                total += _TENS[rest // 10] + _SMALL[rest % 10]
            elif rest:
                total += _SMALL[rest]
            total += scale_syllables
        if not value:
            break
    return total


def _digit_syllables(word: str) -> float:
    """Syllables of the numbers inside a token ('8,700', '3.5', '189733b')."""
    total = 0.0
    for run in re.findall(r"\d[\d,]*(?:\.\d+)?", word):
        whole, _, fraction = run.replace(",", "").partition(".")
        total += _number_syllables(int(whole[:15])) if whole else 0
        total += (2 + len(fraction)) if fraction else 0  # "point five"
    return total


def syllables(word: str) -> float:
    """A word's expected length in syllables: vowel groups, numbers as read out."""
    digits = _digit_syllables(word)
    letters = [ch for ch in word.lower() if ch.isalpha()]
    groups = 0
    previous = False
    for ch in letters:
        vowel = ch in "aeiouy"
        if vowel and not previous:
            groups += 1
        previous = vowel
    if letters and letters[-1] == "e" and groups > 1 and letters[-2:] != ["l", "e"]:
        groups -= 1  # silent final e
    if letters and groups == 0:
        groups = max(1, len(letters) // 2)  # acronyms and the like: spelled out
    if word.isupper() and 1 < len(letters) <= 3:
        groups = len(letters)  # "AI", "HD": letters read one by one
    if digits and len(letters) == 1:
        groups = 1  # "189733b": the number, then a letter
    return (max(1, groups) if letters else 0) + digits + 0.1 * len(letters)


def _pause_after(token: str) -> float:
    """How likely a pause follows this token (0..1) from its punctuation."""
    stripped = token.rstrip("\"')]}»”’")
    if stripped.endswith(_SENTENCE_END):
        return 1.0
    if stripped.endswith(_CLAUSE_END):
        return 0.6
    return 0.0


def align_words(text: str, wav_path: str | Path) -> tuple[WordTiming, ...]:
    """Word timings for `text` spoken in the WAV at wav_path.

    Speech segments come from the energy envelope (pauses: 70 ms or more below a level set
    from the track's own loudness). Words go to segments by dynamic programming: each segment
    (or run of segments) takes a run of words whose syllable weight fits its duration at the
    track's speaking rate, and a pause after a sentence or clause end is preferred. Inside a
    run, words share its speech time by syllable weight, and each boundary then snaps to the
    deepest energy dip near it."""
    tokens = [t for t in _TOKEN.findall(text) if any(ch.isalnum() for ch in t)]
    words = [t.strip(_PUNCT) for t in tokens]
    if not words:
        return ()
    levels = _frame_levels(wav_path)
    segments = _segments(levels)
    if not segments:
        raise VoiceSynthesisError("alignment found no speech in the audio")
    weights = [syllables(w) for w in words]
    pauses = [_pause_after(t) for t in tokens]
    groups = _assign(weights, pauses, segments)
    timings: list[WordTiming] = []
    for (w0, w1), (s0, s1) in groups:
        timings.extend(_spread(words[w0:w1], weights[w0:w1], segments[s0:s1], levels))
    return tuple(timings)


def _assign(
    weights: Sequence[float], pauses: Sequence[float], segments: Sequence[_Segment]
) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """((first word, end word), (first segment, end segment)) runs, in order, covering all."""
    n, m = len(weights), len(segments)
    speech = sum(s.frames for s in segments)
    per_weight = speech / sum(weights)
    prefix = [0.0]
    for weight in weights:
        prefix.append(prefix[-1] + weight)
    max_words, max_segments = 40, 4
    inf = float("inf")
    cost = [[inf] * (m + 1) for _ in range(n + 1)]
    back: list[list[tuple[int, int] | None]] = [[None] * (m + 1) for _ in range(n + 1)]
    cost[0][0] = 0.0
    for i in range(n):
        for j in range(m):
            if cost[i][j] == inf:
                continue
            for j2 in range(j + 1, min(m, j + max_segments) + 1):
                frames = sum(s.frames for s in segments[j:j2])
                inner_gaps = segments[j2 - 1].end - segments[j].start - frames
                for i2 in range(i + 1, min(n, i + max_words) + 1):
                    expected = (prefix[i2] - prefix[i]) * per_weight
                    mismatch = math.log(frames / expected) ** 2 * (prefix[i2] - prefix[i])
                    # A pause should follow punctuation; gaps bridged inside a run should not
                    # be long ones; both unless this run ends the text.
                    end_penalty = 0.0 if i2 == n else 2.0 * (1.0 - pauses[i2 - 1])
                    total = cost[i][j] + mismatch + end_penalty + 0.02 * inner_gaps
                    if j2 == m and i2 != n:
                        continue
                    if total < cost[i2][j2]:
                        cost[i2][j2] = total
                        back[i2][j2] = (i, j)
                    if expected > 3 * frames:
                        break
    if cost[n][m] == inf:  # fewer words than segments: one run over everything
        return [((0, n), (0, m))]
    runs = []
    i, j = n, m
    while (i, j) != (0, 0):
        previous = back[i][j]
        assert previous is not None
        runs.append(((previous[0], i), (previous[1], j)))
        i, j = previous
    return runs[::-1]


def _spread(
    words: Sequence[str],
    weights: Sequence[float],
    segments: Sequence[_Segment],
    levels: Sequence[float],
) -> list[WordTiming]:
    """Words over a run of segments by weight, in speech time, boundaries snapped to dips."""
    frames = [f for s in segments for f in range(s.start, s.end)]  # speech frames, in order
    total = sum(weights)
    cuts = [segments[0].start]
    cumulative = 0.0
    snap = round(_SNAP_S / FRAME_S)
    for weight in weights[:-1]:
        cumulative += weight
        index = min(len(frames) - 1, int(len(frames) * cumulative / total))
        guess = frames[index]
        low, high = max(cuts[-1] + 1, guess - snap), min(segments[-1].end - 1, guess + snap)
        if low <= high:
            guess = min(range(low, high + 1), key=lambda f: (levels[f], abs(f - guess)))
        cuts.append(max(guess, cuts[-1] + 1))
    cuts.append(max(segments[-1].end, cuts[-1] + 1))
    speech = set(frames)
    timings = []
    for k, word in enumerate(words):
        span = [f for f in range(cuts[k], cuts[k + 1]) if f in speech] or [cuts[k]]
        # A word is its speech: a pause inside its share belongs to neither neighbour.
        start, end = span[0], span[-1] + 1
        timings.append(WordTiming(word, round(start * FRAME_S, 3), round(end * FRAME_S, 3)))
    return timings
