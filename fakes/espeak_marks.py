"""Continuous espeak-ng speech with espeak's own word marks (libespeak-ng through ctypes).

The espeak-ng command line gives no timings, but the library reports a WORD event with the
audio position of every word it speaks. The local Edge-TTS server uses these as its
WordBoundary offsets, so its timings are the real timings of the audio it sends. A word's end
is where its sound stops before the next word starts (pauses are not part of a word), as with
Edge's Duration.
"""

from __future__ import annotations

import ctypes
import re
import threading
from array import array
from dataclasses import dataclass

_AUDIO_OUTPUT_SYNCHRONOUS = 2
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_EVENT_WORD = 1
_RATE = 1
_PITCH = 3
_FRAME_S = 0.005  # loudness is judged on 5 ms frames
_LOUD = 300  # 16-bit peak amplitude above which a frame is speech


class _Event(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", ctypes.c_char * 8),
    ]


_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event)
)


@dataclass(frozen=True)
class Mark:
    word: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Speech:
    pcm: bytes  # 16-bit mono
    sample_rate: int
    marks: tuple[Mark, ...]

    @property
    def duration_s(self) -> float:
        return len(self.pcm) / 2 / self.sample_rate


class EspeakError(RuntimeError):
    pass


class _Library:
    """libespeak-ng keeps global state: one instance per process, one synthesis at a time."""

    _instance: _Library | None = None
    _create_lock = threading.Lock()

    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL("libespeak-ng.so.1")
        except OSError as exc:
            raise EspeakError(f"libespeak-ng is not installed: {exc}") from exc
        self.sample_rate = self.lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 200, None, 0)
        if self.sample_rate <= 0:
            raise EspeakError("espeak_Initialize failed")
        self.lock = threading.Lock()
        self._samples = array("h")
        self._words: list[tuple[int, int, int]] = []  # (text_position, length, audio ms)
        self._callback = _CALLBACK(self._on_synth)  # kept referenced: C holds the pointer
        self.lib.espeak_SetSynthCallback(self._callback)

    @classmethod
    def get(cls) -> _Library:
        with cls._create_lock:
            if cls._instance is None:
                cls._instance = _Library()
            return cls._instance

    def _on_synth(
        self, wav: ctypes.Array[ctypes.c_short], count: int, events: ctypes.Array[_Event]
    ) -> int:
        if count > 0 and wav:
            self._samples.extend(wav[:count])
        i = 0
        while events[i].type != 0:  # LIST_TERMINATED
            event = events[i]
            if event.type == _EVENT_WORD:
                self._words.append((event.text_position, event.length, event.audio_position))
            i += 1
        return 0

    def speak(self, text: str, voice: str, words_per_minute: int, pitch: int) -> Speech:
        with self.lock:
            # 'en-gb' is a language, not a voice name: try it, then its language alone.
            names = dict.fromkeys([voice, voice.split("-")[0]])
            if all(self.lib.espeak_SetVoiceByName(name.encode()) != 0 for name in names):
                raise EspeakError(f"espeak-ng has no voice {voice!r}")
            self.lib.espeak_SetParameter(_RATE, words_per_minute, 0)
            self.lib.espeak_SetParameter(_PITCH, pitch, 0)
            self._samples = array("h")
            self._words = []
            data = text.encode("utf-8")
            buf = ctypes.create_string_buffer(data)
            rc = self.lib.espeak_Synth(
                buf, len(data) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None
            )
            self.lib.espeak_Synchronize()
            if rc != 0:
                raise EspeakError(f"espeak_Synth failed with {rc}")
            samples, words = self._samples, self._words
        return Speech(
            samples.tobytes(), self.sample_rate, _marks(text, samples, words, self.sample_rate)
        )


_TOKEN = re.compile(r"\S+")
_PUNCT = ".,;:!?\"'()[]{}"


def _tokens(text: str) -> list[tuple[int, str]]:
    """(first character index, word) of every spoken word: whitespace-separated, punctuation
    stripped, tokens without a letter or digit dropped (as Edge reports them)."""
    found = []
    for match in _TOKEN.finditer(text):
        word = match.group().strip(_PUNCT)
        if any(ch.isalnum() for ch in word):
            found.append((match.start(), word))
    return found


def _marks(
    text: str, samples: array[int], words: list[tuple[int, int, int]], rate: int
) -> tuple[Mark, ...]:
    frame = max(1, int(_FRAME_S * rate))
    loud = [
        max((abs(s) for s in samples[i : i + frame]), default=0) > _LOUD
        for i in range(0, len(samples), frame)
    ]
    total_s = len(samples) / rate
    tokens = _tokens(text)
    # Each token belongs to the last espeak word event at or before it: espeak speaks some
    # function words together with their neighbour ("of the") and reports one event for both.
    # Zero-length events (a sentence's end) and positions running backwards mark no word.
    starts: list[tuple[int, float]] = []
    for position, length, audio_ms in words:
        if length > 0 and (not starts or position - 1 > starts[-1][0]):
            starts.append((position - 1, audio_ms / 1000))
    groups: list[tuple[float, list[str]]] = []
    event = -1
    for char_index, word in tokens:
        while event + 1 < len(starts) and starts[event + 1][0] <= char_index:
            event += 1
            groups.append((starts[event][1], []))
        if not groups:
            groups.append((0.0, []))
        groups[-1][1].append(word)
    groups = [(start, group) for start, group in groups if group]
    marks: list[Mark] = []
    for index, (start, group) in enumerate(groups):
        limit = groups[index + 1][0] if index + 1 < len(groups) else total_s
        first = int(start / _FRAME_S)
        last = min(len(loud), max(first + 1, int(limit / _FRAME_S)))
        # The group ends with its last loud frame before the next word begins.
        end_frame = next((f for f in range(last - 1, first - 1, -1) if loud[f]), last - 1)
        end = max(min(limit, (end_frame + 1) * _FRAME_S), start + _FRAME_S)
        weights = [len(word) for word in group]
        cursor = start
        for word, weight in zip(group, weights, strict=True):
            stop = cursor + (end - start) * weight / sum(weights)
            marks.append(Mark(word, round(cursor, 4), round(stop, 4)))
            cursor = stop
    return tuple(marks)


def speak(text: str, voice: str = "en-us", words_per_minute: int = 175, pitch: int = 50) -> Speech:
    """Speech for `text` and the start and end of every word in it."""
    return _Library.get().speak(text, voice, words_per_minute, pitch)
