"""The offline voice: espeak-ng, with real per-word timings for the captions.

espeak-ng gives no word timestamps, so the text is cut into short phrases, each phrase is
synthesised on its own and measured, and the phrases are joined into one WAV. Word timings are
then exact at phrase boundaries and proportional to word length inside a phrase (<= 6 words),
which is close enough for 1-3 word captions.
"""

from __future__ import annotations

import functools
import re
import tempfile
import wave
from array import array
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from mdame_domain.mediatools import MediaToolError, run_tool

MAX_WORDS_PER_CHUNK = 6
SENTENCE_PAUSE_S = 0.30
PHRASE_PAUSE_S = 0.06
# espeak pads every utterance with silence; trimming it keeps the timings on the speech.
_SILENCE_THRESHOLD = 200  # 16-bit sample amplitude
_EDGE_KEEP_S = 0.02
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# espeak-ng reads [[...]] as phoneme input; captions and speech should both see plain words.
_MARKUP = re.compile(r"[\[\]<>]")


class VoiceSynthesisError(RuntimeError):
    """Speech could not be produced (empty text, unknown voice, silent output).

    `permanent`: no later try can succeed until an operator changes something (an unknown
    voice, a refused key, invalid settings), and `fix` says what; otherwise (a connection
    error, a dropped stream, a timeout, an overloaded service) a later try may succeed."""

    def __init__(self, message: str, *, permanent: bool = False, fix: str = "") -> None:
        super().__init__(message)
        self.permanent = permanent
        self.fix = fix


@dataclass(frozen=True)
class WordTiming:
    word: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class VoiceTrack:
    path: str
    duration_s: float
    words: tuple[WordTiming, ...]
    sample_rate: int
    # Which service spoke it, and why an earlier one in a fallback chain did not.
    provider: str = "espeak-ng"
    fallback_from: str = ""


@dataclass(frozen=True)
class _Chunk:
    words: tuple[str, ...]
    ends_sentence: bool

    @property
    def text(self) -> str:
        return " ".join(self.words)

    @property
    def spoken_text(self) -> str:
        # A trailing comma makes espeak use a continuing, not a final, intonation mid-sentence.
        if self.ends_sentence or self.text[-1:] in ",;:.!?":
            return self.text
        return f"{self.text},"


@dataclass(frozen=True)
class _Pcm:
    frames: bytes
    sample_rate: int
    sample_width: int
    channels: int

    @property
    def duration_s(self) -> float:
        return len(self.frames) / (self.sample_rate * self.sample_width * self.channels)


def _spoken_words(sentence: str) -> list[str]:
    """Whitespace words, with bare punctuation ("-", "...") glued to its neighbour."""
    words: list[str] = []
    for token in sentence.split():
        if words and not any(ch.isalnum() for ch in token):
            words[-1] = f"{words[-1]} {token}"
        else:
            words.append(token)
    return words


def split_phrases(text: str, max_words: int = MAX_WORDS_PER_CHUNK) -> list[_Chunk]:
    """Sentences first, then runs of at most max_words words."""
    chunks: list[_Chunk] = []
    for sentence in _SENTENCE_END.split(_MARKUP.sub(" ", text).strip()):
        words = _spoken_words(sentence)
        for start in range(0, len(words), max_words):
            piece = tuple(words[start : start + max_words])
            chunks.append(_Chunk(piece, ends_sentence=start + max_words >= len(words)))
    return chunks


@functools.cache
def installed_voices() -> frozenset[str]:
    """Lower-cased language codes and voice files espeak-ng knows (e.g. 'en-us', 'gmw/en-us')."""
    listing = run_tool(["espeak-ng", "--voices"], timeout=30.0).stdout.decode("utf-8", "replace")
    names: set[str] = set()
    for line in listing.splitlines()[1:]:
        columns = line.split()
        if len(columns) >= 5:
            # Pty, Language, Age/Gender, VoiceName, File, then "(code priority)" pairs.
            names.update({columns[1].lower(), columns[4].lower()})
            names.update(code.lstrip("(").lower() for code in columns[5::2])
    return frozenset(names)


def check_voice(voice: str) -> None:
    """Refuse voices espeak-ng would silently replace (it reads 'no-such' as Norwegian)."""
    base = voice.split("+", 1)[0].strip().lower()
    if not base or base not in installed_voices():
        raise VoiceSynthesisError(
            f"unknown espeak-ng voice {voice!r} (see espeak-ng --voices)",
            permanent=True,
            fix="set voice in the dimension's YAML to a voice espeak-ng --voices lists",
        )


def _espeak(text: str, voice: str, words_per_minute: int, out_wav: Path) -> None:
    # Text goes in on stdin so a leading '-' can never be read as an option.
    args = ["espeak-ng", "-v", voice, "-s", str(words_per_minute), "-w", str(out_wav), "--stdin"]
    try:
        run_tool(args, timeout=60.0, input_bytes=text.encode("utf-8"))
    except MediaToolError as exc:
        raise VoiceSynthesisError(f"espeak-ng could not speak with voice {voice!r}: {exc}") from exc


def _read_pcm(path: Path) -> _Pcm:
    with wave.open(str(path), "rb") as wav:
        return _Pcm(
            frames=wav.readframes(wav.getnframes()),
            sample_rate=wav.getframerate(),
            sample_width=wav.getsampwidth(),
            channels=wav.getnchannels(),
        )


def _trim_silence(pcm: _Pcm) -> _Pcm:
    """Cut leading/trailing silence, keeping a few ms so consonants are not clipped."""
    if pcm.sample_width != 2:
        return pcm
    samples = array("h", pcm.frames)
    loud = [i for i, s in enumerate(samples) if abs(s) > _SILENCE_THRESHOLD]
    if not loud:
        return _Pcm(b"", pcm.sample_rate, pcm.sample_width, pcm.channels)
    keep = int(_EDGE_KEEP_S * pcm.sample_rate) * pcm.channels
    first = max(0, loud[0] - keep)
    last = min(len(samples), loud[-1] + 1 + keep)
    # Cut on whole frames (one sample per channel) so channels never swap.
    first -= first % pcm.channels
    last -= last % pcm.channels
    return _Pcm(samples[first:last].tobytes(), pcm.sample_rate, pcm.sample_width, pcm.channels)


def _synthesize_chunk(chunk: _Chunk, voice: str, wpm: int, workdir: Path, index: int) -> _Pcm:
    path = workdir / f"chunk-{index:04d}.wav"
    _espeak(chunk.spoken_text, voice, wpm, path)
    return _trim_silence(_read_pcm(path))


def word_timings(words: Sequence[str], start_s: float, duration_s: float) -> list[WordTiming]:
    """Spread a phrase's measured duration over its words by character length."""
    weights = [max(1, len(word)) for word in words]
    total = sum(weights)
    timings: list[WordTiming] = []
    cursor = start_s
    for word, weight in zip(words, weights, strict=True):
        end = cursor + duration_s * weight / total
        timings.append(WordTiming(word, round(cursor, 3), round(end, 3)))
        cursor = end
    return timings


def _silence(pcm: _Pcm, seconds: float) -> bytes:
    frames = int(seconds * pcm.sample_rate)
    return b"\x00" * (frames * pcm.sample_width * pcm.channels)


def _join(chunks: Sequence[_Chunk], pcms: Sequence[_Pcm]) -> tuple[bytes, list[WordTiming]]:
    """Concatenate the phrases with pauses; return the PCM and every word's timing."""
    first = pcms[0]
    bytes_per_second = first.sample_rate * first.sample_width * first.channels
    pieces: list[bytes] = []
    timings: list[WordTiming] = []
    cursor_bytes = 0
    for position, (chunk, pcm) in enumerate(zip(chunks, pcms, strict=True)):
        if (pcm.sample_rate, pcm.sample_width, pcm.channels) != (
            first.sample_rate, first.sample_width, first.channels,
        ):  # fmt: skip
            raise VoiceSynthesisError("espeak-ng phrases came back in different audio formats")
        if position:
            pause = SENTENCE_PAUSE_S if chunks[position - 1].ends_sentence else PHRASE_PAUSE_S
            gap = _silence(first, pause)
            pieces.append(gap)
            cursor_bytes += len(gap)
        start_s = cursor_bytes / bytes_per_second
        timings.extend(word_timings(chunk.words, start_s, pcm.duration_s))
        pieces.append(pcm.frames)
        cursor_bytes += len(pcm.frames)
    return b"".join(pieces), timings


def _write_wav(path: str, pcm_format: _Pcm, frames: bytes) -> None:
    with wave.open(path, "wb") as wav:
        wav.setnchannels(pcm_format.channels)
        wav.setsampwidth(pcm_format.sample_width)
        wav.setframerate(pcm_format.sample_rate)
        wav.writeframes(frames)


def synthesize_espeak(
    text: str, voice: str, out_wav: str, words_per_minute: int = 165
) -> VoiceTrack:
    """Speak `text` with espeak-ng into out_wav and return the track with word timings."""
    chunks = split_phrases(text)
    if not chunks:
        raise VoiceSynthesisError("nothing to say: the text is empty")
    if not 80 <= words_per_minute <= 450:
        raise VoiceSynthesisError(f"words_per_minute out of espeak's range: {words_per_minute}")
    check_voice(voice)
    with tempfile.TemporaryDirectory(prefix="mdame-voice-") as tmp:
        workdir = Path(tmp)
        # espeak-ng is single threaded; two workers keep both cores busy on short phrases.
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = [
                pool.submit(_synthesize_chunk, chunk, voice, words_per_minute, workdir, index)
                for index, chunk in enumerate(chunks)
            ]
            pcms = [future.result() for future in futures]
    if not any(pcm.frames for pcm in pcms):
        raise VoiceSynthesisError(f"espeak-ng produced only silence for {text[:80]!r}")
    frames, timings = _join(chunks, pcms)
    _write_wav(out_wav, pcms[0], frames)
    fmt = pcms[0]
    duration_s = len(frames) / (fmt.sample_rate * fmt.sample_width * fmt.channels)
    return VoiceTrack(
        path=out_wav,
        duration_s=round(duration_s, 3),
        words=tuple(timings),
        sample_rate=fmt.sample_rate,
    )
