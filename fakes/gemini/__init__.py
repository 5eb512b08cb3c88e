"""A local Gemini REST server that speaks the real wire protocol, for tests and the demo mode.

    POST /{version}/models/{model}:generateContent      (x-goog-api-key header, or ?key=)

Text: with generationConfig.responseMimeType application/json and a responseSchema (Gemini's
OpenAPI subset, types in capitals) or responseJsonSchema (JSON Schema), the answer is JSON that
follows the schema, generated deterministically from the request's contents (the user turns;
the system instruction is read for nothing but hints). A string whose description asks for
"N words" or "N-M words" gets that many words built from the prompt's own words; a number with
minimum 0 and maximum 1 gets a deterministic score in [0.75, 0.98] (tests override scores).
Every answer carries usageMetadata (prompt, candidates, thoughts and total token counts).

Image understanding: contents carrying inlineData image parts (what `types.Part.from_bytes`
sends, base64url) beside the text, with responseMimeType application/json and a schema, are
answered {"score": 0..1, "reason": str} by fakes/imagery.judge(images, narration): the narration
is the text of the request's `Narration: ...` line (a data block's field), else all of its text.
Each image bills IMAGE_TILE_TOKENS prompt tokens per 768-px tile (one tile when both sides are
at most 384 px), as Gemini counts them; set_score and set_field override the answer too.

Image generation: responseModalities ["IMAGE"] (with imageConfig.aspectRatio, 1:1 when absent)
is answered with one inlineData image/png drawn by fakes/imagery.picture_png of the prompt's
subject (imagery.depicted_word) at that aspect ratio, small (9:16: 288x512), billed
IMAGE_OUTPUT_TOKENS output tokens (usageMetadata.candidatesTokensDetails says IMAGE), as Gemini
bills a 1K image. An unknown aspect ratio is a 400. Off-topic pictures, for the relevance gate:
the fault "off_topic" draws another subject (off_topic_word: the farthest in colour from every
word of the prompt) for one request, and `server.off_topic_every = N` (POST /_fake/config
{"off_topic_every": N}) does so for the first request of one prompt in N (by its hash), the
same prompt asked again being drawn as asked. For an image request, "max_tokens" answers no
image (finishReason MAX_TOKENS) and "schema" a text part instead of the image.

TTS: responseModalities ["AUDIO"] with speechConfig's prebuilt voice gives inlineData audio
made by espeak-ng: raw 16-bit PCM at 24 kHz (`audio/L16;codec=pcm;rate=24000`) by default,
or a WAV file (`audio/wav`) when the server's tts_format is "wav".

Faults, a FIFO consumed one per generateContent request (in process: `server.faults.push(...)`;
over HTTP: POST /_fake/faults {"kind": ..., ...}):
  "429" (Retry-After: retry_after), "500", "503", "hang" (read the request, answer nothing for
  hang_s), "drop" (read the request, close the connection), "malformed" (200 with a body that
  is not JSON), "schema" (200 with JSON that breaks the requested schema), "safety" (prompt
  blocked: promptFeedback.blockReason), "safety_finish" (a candidate with finishReason SAFETY),
  "empty" (no candidates), "max_tokens" (finishReason MAX_TOKENS, truncated text), "400"
  (INVALID_ARGUMENT), "off_topic" (an image request only: another subject drawn), "hold"
  (read the request and hold it, the request in flight, until `server.release_held()` or
  hang_s, then answer it as asked and bill it, whether its client is still there or not;
  `server.held()` counts the requests held). A fault with `on` ("text", "audio", "image" or
  "judge": text with images to understand) fires only on that kind of request, the first such
  fault in the queue; one without fires on any.
An outage: `server.outage = 503` (or POST /_fake/config {"outage": 503}) answers every
generateContent request with that 5xx status until reset; `server.outage_on = "image"` (or
{"outage_on": "image"} beside it) limits it to that kind of request (an image model's outage).
A model not in `server.models` is answered 404 NOT_FOUND, as Google answers a model it does not
serve.
Scores and fields: `server.set_score(x)` / POST /_fake/config {"score": x} makes every 0-1
number x; `server.set_field(name, value)` / {"fields": {...}} forces a property by name (for
example {"allowed": false}). GET /_fake/requests returns the requests seen (model, kind, body
without the key, the status answered and the usage billed). GET /_fake/counters sums them up
(what a ledger is checked against): requests per status, and every billed answer's model, kind
(text, audio or image), usageMetadata and the pictures it carried (an image model bills each),
with their total ("images"). POST /_fake/clear_faults empties the queue, ends an outage and
answers the held requests, keeping what was seen. The API key is checked for presence only and
never stored.

Model list (what `client.models.list()` asks): GET /{version}/models answers the names in
`server.models` (pageSize and pageToken honoured). One model (`client.models.get(model=...)`,
what `mdame doctor` asks per configured model): GET /{version}/models/{model} answers its Model
resource, or 404 NOT_FOUND for a name not in `server.models`; it takes the next fault too, and
answers 429, 500, 503, hang and drop as generateContent does (any other kind is used up).
A refused key: `server.auth_error = 401` (or POST /_fake/config {"auth_error": 401}) answers
every API request with that status (401 UNAUTHENTICATED, 403 PERMISSION_DENIED) until reset.

    python -m fakes.gemini --port 8089 [--tts-format wav]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import io
import json
import math
import re
import shutil
import subprocess
import threading
import time
import wave
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from fakes import imagery

FAULT_KINDS = (
    "429",
    "500",
    "503",
    "hang",
    "drop",
    "malformed",
    "schema",
    "safety",
    "safety_finish",
    "empty",
    "max_tokens",
    "400",
    "off_topic",
    "hold",
)
# What a fault's `on` may name: the kind of generateContent request it fires on ("judge": a
# text request carrying images to understand, as the relevance gate sends).
REQUEST_KINDS = ("text", "audio", "image", "judge")
PCM_MIME = "audio/L16;codec=pcm;rate=24000"
SAMPLE_RATE = 24_000
# Gemini counts audio at 25 tokens per second.
AUDIO_TOKENS_PER_SECOND = 25
_PATH = re.compile(r"^/(?P<version>v1beta|v1|v1alpha)/models/(?P<model>[^/:]+):generateContent$")
_MODELS_PATH = re.compile(r"^/(?P<version>v1beta|v1|v1alpha)/models$")
_MODEL_PATH = re.compile(r"^/(?P<version>v1beta|v1|v1alpha)/models/(?P<model>[^/:]+)$")
# What the model list offers by default: MD-AME's default text and TTS models and a few more.
DEFAULT_MODELS = (
    "gemini-3.8-flash",
    "gemini-3.8-flash-tts",
    "gemini-3.8-pro",
    "gemini-2.5-flash",
    "gemini-2.5-flash-preview-tts",
    "gemini-2.5-flash-image",
)
_AUTH_STATUS = {401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED"}
_WORD = re.compile(r"[^\W\d_][\w'\-]*", re.UNICODE)
_WORD_RANGE = re.compile(r"(\d+)\s*(?:-|–|to|and)\s*(\d+)\s+words", re.I)
_WORD_COUNT = re.compile(r"(\d+)\s+words", re.I)


@dataclass
class Fault:
    kind: str
    retry_after: int = 1
    hang_s: float = 30.0
    on: str | None = None  # the request kind it fires on (REQUEST_KINDS); None: any
    released: threading.Event = field(default_factory=threading.Event, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {self.kind!r} (known: {', '.join(FAULT_KINDS)})")
        if self.on is not None and self.on not in REQUEST_KINDS:
            raise ValueError(f"unknown request kind {self.on!r} (known: {REQUEST_KINDS})")


class FaultQueue:
    """FIFO of faults; each generateContent request takes the next one, if any."""

    def __init__(self) -> None:
        self._queue: deque[Fault] = deque()
        self._lock = threading.Lock()

    def push(self, kind: str, **params: Any) -> None:
        fault = Fault(kind, **params)
        with self._lock:
            self._queue.append(fault)

    def pop(self, kind: str | None = None) -> Fault | None:
        """The first fault for a request of `kind` (one without `on` fires on any)."""
        with self._lock:
            for fault in self._queue:
                if fault.on is None or fault.on == kind:
                    self._queue.remove(fault)
                    return fault
            return None

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._queue)


@dataclass
class SeenRequest:
    model: str
    kind: str  # "text", "audio" or "image" (a picture asked for)
    body: dict[str, Any]
    fault: str | None
    status: int = 0  # the HTTP status answered; 0 while answering, or for no answer at all
    usage: dict[str, int] | None = None  # the usageMetadata of a 200 answer (what is billed)
    images: int = 0  # the pictures a 200 answer carried (an image model bills each)


@dataclass
class FakeGemini:
    """The server's state: faults, forced scores and fields, what it saw."""

    tts_format: str = "pcm"
    faults: FaultQueue = field(default_factory=FaultQueue)
    score: float | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    # Forced usageMetadata counts (e.g. {"candidatesTokenCount": 200}), for exact budget tests.
    usage: dict[str, int] = field(default_factory=dict)
    requests: list[SeenRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    base_url: str = ""
    # The model list's names (GET /{version}/models), and a status every API request gets
    # instead of an answer (401 or 403: a refused key), None for none.
    models: list[str] = field(default_factory=lambda: list(DEFAULT_MODELS))
    auth_error: int | None = None
    # A 5xx status every generateContent request gets (an outage), None for none; with
    # outage_on, only the requests of that kind (REQUEST_KINDS: "image", an image model's).
    outage: int | None = None
    outage_on: str | None = None
    # The image model draws another subject than asked on the first request of one prompt in
    # this many (0: never); the same prompt asked again is drawn as asked.
    off_topic_every: int = 0
    drawn_prompts: set[str] = field(default_factory=set)
    # The "hold" faults taken, whose requests wait for release_held (or their hang_s).
    holding: list[Fault] = field(default_factory=list)

    def set_score(self, score: float | None) -> None:
        self.score = score

    def set_field(self, name: str, value: Any) -> None:
        self.fields[name] = value

    def reset(self) -> None:
        self.faults.clear()
        self.score, self.fields, self.usage = None, {}, {}
        self.models, self.auth_error, self.outage = list(DEFAULT_MODELS), None, None
        self.outage_on = None
        self.off_topic_every = 0
        with self.lock:
            self.requests.clear()
            self.drawn_prompts.clear()

    @property
    def request_count(self) -> int:
        with self.lock:
            return len(self.requests)

    def clear_faults(self) -> None:
        """Queued faults and the outage end, held requests are answered; what was seen stays."""
        self.faults.clear()
        self.outage = self.outage_on = None
        self.release_held()

    def held(self) -> int:
        """Requests held by a "hold" fault and not released yet (each in flight)."""
        with self.lock:
            return sum(1 for fault in self.holding if not fault.released.is_set())

    def release_held(self) -> None:
        """Every held request is answered now (to a client that may be gone: billed all the
        same, as Google bills an answer whose caller died)."""
        with self.lock:
            for fault in self.holding:
                fault.released.set()

    def counters(self) -> dict[str, Any]:
        """generateContent requests per status answered ("0": no answer) and the billed
        answers (model and usageMetadata), in arrival order."""
        with self.lock:
            by_status: dict[str, int] = {}
            for seen in self.requests:
                by_status[str(seen.status)] = by_status.get(str(seen.status), 0) + 1
            billed = [
                {"model": r.model, "kind": r.kind, "usage": dict(r.usage), "images": r.images}
                for r in self.requests
                if r.usage is not None
            ]
            return {
                "requests": len(self.requests),
                "by_status": by_status,
                "billed": billed,
                "images": sum(b["images"] for b in billed),
            }


# --- the answer ---------------------------------------------------------------------------


def _get(mapping: Mapping[str, Any] | None, *names: str) -> Any:
    """A field under its camelCase or snake_case name (the SDK sends both, by nesting level)."""
    if not isinstance(mapping, Mapping):
        return None
    for name in names:
        if name in mapping:
            return mapping[name]
    return None


def _text_of(contents: Any) -> str:
    parts: list[str] = []
    for content in contents if isinstance(contents, list) else [contents]:
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, Mapping):
            for part in content.get("parts") or []:
                if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                    parts.append(part["text"])
    return "\n".join(parts)


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4)) if text else 0


def _digest(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest()[:8], "big")


class _Generator:
    """Deterministic JSON that follows a schema, made from the prompt's words."""

    def __init__(self, prompt: str, state: FakeGemini) -> None:
        # The prompt's data fences are markup, not words a model would write back.
        words = [w for w in _WORD.findall(prompt) if "UNTRUSTED_DATA" not in w.upper()]
        self.words = [w for w in words if len(w) > 2] or words or ["story"]
        self.prompt, self.state = prompt, state

    def value(self, schema: Mapping[str, Any], path: str, name: str = "", index: int = 0) -> Any:
        if name in self.state.fields:
            return self.state.fields[name]
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            return enum[_digest(self.prompt, path) % len(enum)]
        kind = str(schema.get("type") or ("object" if "properties" in schema else "string"))
        if isinstance(schema.get("type"), list):
            kind = next(t for t in schema["type"] if t != "null")
        kind = kind.lower()
        if kind == "object":
            props = schema.get("properties") or {}
            return {key: self.value(sub, f"{path}.{key}", key, index) for key, sub in props.items()}
        if kind == "array":
            items = schema.get("items") or {"type": "string"}
            low = int(_get(schema, "minItems", "min_items") or 1)
            high = int(_get(schema, "maxItems", "max_items") or max(low, 3))
            count = max(low, min(high, 3))
            return [self.value(items, f"{path}[{i}]", name, i) for i in range(count)]
        if kind == "boolean":
            return True
        if kind in ("number", "integer"):
            return self._number(schema, path, kind, index)
        return self._string(schema, path)

    def _number(self, schema: Mapping[str, Any], path: str, kind: str, index: int) -> Any:
        low = _get(schema, "minimum")
        high = _get(schema, "maximum")
        low = float(low) if low is not None else 0.0
        high = float(high) if high is not None else low + 100.0
        if kind == "integer":
            return int(min(high, low + index))
        if low == 0.0 and high == 1.0:
            if self.state.score is not None:
                return self.state.score
            return round(0.75 + (_digest(self.prompt, path) % 2300) / 10_000, 4)
        return round(low + (_digest(self.prompt, path) % 1000) / 1000 * (high - low), 4)

    def _string(self, schema: Mapping[str, Any], path: str) -> str:
        description = str(schema.get("description") or "")
        wanted = _WORD_RANGE.search(description)
        if wanted:
            count = (int(wanted.group(1)) + int(wanted.group(2))) // 2
        else:
            single = _WORD_COUNT.search(description)
            count = int(single.group(1)) if single else 6
        max_length = _get(schema, "maxLength", "max_length")
        text = self._sentences(count, path)
        if max_length is not None:
            text = text[: int(max_length)]
        return text

    def _sentences(self, count: int, path: str) -> str:
        start = _digest(self.prompt, path) % len(self.words)
        picked = [self.words[(start + i) % len(self.words)] for i in range(count)]
        sentences: list[str] = []
        out: list[str] = []
        for i, word in enumerate(picked):
            out.append(word.lower() if out else word.capitalize())
            if len(out) >= 10 or i == len(picked) - 1:
                sentences.append(" ".join(out) + ".")
                out = []
        return " ".join(sentences)


def _schema_of(config: Mapping[str, Any]) -> Mapping[str, Any] | None:
    schema = _get(config, "responseJsonSchema", "response_json_schema")
    if schema is None:
        schema = _get(config, "responseSchema", "response_schema")
    return schema if isinstance(schema, Mapping) else None


def _broken_for(schema: Mapping[str, Any] | None) -> Any:
    """JSON that breaks the schema: the wrong type at the root, no required field."""
    kind = str((schema or {}).get("type", "object")).lower()
    return {"unexpected": "field"} if kind == "array" else ["not", "an", "object"]


def _usage(prompt: str, output_tokens: int, thoughts: int) -> dict[str, int]:
    prompt_tokens = _tokens(prompt)
    return {
        "promptTokenCount": prompt_tokens,
        "candidatesTokenCount": output_tokens,
        "thoughtsTokenCount": thoughts,
        "totalTokenCount": prompt_tokens + output_tokens + thoughts,
    }


def _thoughts(config: Mapping[str, Any]) -> int:
    thinking = _get(config, "thinkingConfig", "thinking_config") or {}
    budget = _get(thinking, "thinkingBudget", "thinking_budget")
    return min(int(budget), 32) if isinstance(budget, int) and budget > 0 else 0


def espeak_pcm(text: str, voice: str = "en-us") -> bytes:
    """Raw 16-bit mono PCM at 24 kHz of `text`, spoken by espeak-ng (resampled by ffmpeg)."""
    espeak = subprocess.run(
        ["espeak-ng", "-v", voice, "--stdout", text], capture_output=True, check=True
    )
    done = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", "pipe:0", "-ac", "1", "-ar", str(SAMPLE_RATE)]
        + ["-f", "s16le", "pipe:1"],
        input=espeak.stdout,
        capture_output=True,
        check=True,
    )
    return done.stdout


def _wav(pcm: bytes) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(SAMPLE_RATE)
        writer.writeframes(pcm)
    return out.getvalue()


def _espeak_voice(config: Mapping[str, Any]) -> str:
    speech = _get(config, "speechConfig", "speech_config") or {}
    language = _get(speech, "languageCode", "language_code")
    if isinstance(language, str) and language:
        return language.lower()
    return "en-us"


def _voice_name(config: Mapping[str, Any]) -> str | None:
    speech = _get(config, "speechConfig", "speech_config") or {}
    voice = _get(speech, "voiceConfig", "voice_config") or {}
    prebuilt = _get(voice, "prebuiltVoiceConfig", "prebuilt_voice_config") or {}
    name = _get(prebuilt, "voiceName", "voice_name")
    return name if isinstance(name, str) and name else None


def answer(state: FakeGemini, body: Mapping[str, Any], fault: Fault | None) -> dict[str, Any]:
    """The JSON body of a 200 answer to a generateContent request (faults that are a 200)."""
    config = _get(body, "generationConfig", "generation_config") or {}
    prompt = _text_of(body.get("contents"))
    # The system instruction is billed as prompt tokens too.
    system = _text_of(_get(body, "systemInstruction", "system_instruction") or [])
    billed = f"{system}\n{prompt}" if system else prompt
    modalities = [
        str(m).upper() for m in _get(config, "responseModalities", "response_modalities") or []
    ]
    kind = fault.kind if fault else None
    if kind == "safety":
        return {
            "promptFeedback": {"blockReason": "SAFETY", "safetyRatings": []},
            "usageMetadata": _usage(billed, 0, 0),
        }
    if kind == "empty":
        return {"candidates": [], "usageMetadata": _usage(billed, 0, 0)}
    if kind == "safety_finish":
        return {
            "candidates": [{"finishReason": "SAFETY", "index": 0, "safetyRatings": []}],
            "usageMetadata": _usage(billed, 0, 0),
        }
    if "IMAGE" in modalities:
        return _picture(state, config, prompt, billed, kind)
    images = _inline_images(body.get("contents"))
    if images:
        return _judgement(state, config, prompt, billed, images, kind)
    if "AUDIO" in modalities:
        if _voice_name(config) is None:
            raise _BadRequest("speechConfig.voiceConfig.prebuiltVoiceConfig.voiceName is required")
        pcm = espeak_pcm(prompt or " ", _espeak_voice(config))
        data, mime = (_wav(pcm), "audio/wav") if state.tts_format == "wav" else (pcm, PCM_MIME)
        seconds = len(pcm) / 2 / SAMPLE_RATE
        part = {"inlineData": {"mimeType": mime, "data": base64.b64encode(data).decode()}}
        return {
            "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}],
            "usageMetadata": _usage(billed, math.ceil(seconds * AUDIO_TOKENS_PER_SECOND), 0),
        }
    schema = _schema_of(config)
    mime = _get(config, "responseMimeType", "response_mime_type")
    if kind == "schema":
        text = json.dumps(_broken_for(schema))
    elif mime == "application/json" and schema is not None:
        text = json.dumps(_Generator(prompt, state).value(schema, "$"), ensure_ascii=False)
    else:
        text = _Generator(prompt, state)._sentences(24, "$")
    finish = "STOP"
    if kind == "max_tokens":
        text, finish = text[: max(1, len(text) // 2)], "MAX_TOKENS"
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": text}]},
                "finishReason": finish,
                "index": 0,
            }
        ],
        "usageMetadata": _usage(billed, _tokens(text), _thoughts(config)),
        "modelVersion": "fake-gemini",
    }


# --- image generation ------------------------------------------------------------------------

# Gemini bills a generated 1K image as this many output tokens.
IMAGE_OUTPUT_TOKENS = 1290
# The aspect ratios imageConfig accepts, as (width, height); the fake draws the longer side
# PICTURE_LONG_SIDE pixels (a real 1K image is 1024; tests want them small).
ASPECT_RATIOS = {
    "1:1": (1, 1), "2:3": (2, 3), "3:2": (3, 2), "3:4": (3, 4), "4:3": (4, 3),
    "9:16": (9, 16), "16:9": (16, 9), "21:9": (21, 9),
}  # fmt: skip
PICTURE_LONG_SIDE = 512
# Subjects an off-topic picture shows instead of the prompt's.
_OTHER_SUBJECTS = ("umbrella", "giraffe", "bicycle", "teapot", "lighthouse", "cactus", "violin")


def picture_size(aspect_ratio: str) -> tuple[int, int]:
    """The fake's picture size for an aspect ratio (9:16: 288x512), even on both sides."""
    w, h = ASPECT_RATIOS[aspect_ratio]
    scale = PICTURE_LONG_SIDE / max(w, h)
    return 2 * round(w * scale / 2), 2 * round(h * scale / 2)


def off_topic_word(prompt: str) -> str:
    """Another subject than the prompt's: of _OTHER_SUBJECTS, the one whose colours are
    farthest from every subject word the prompt has, so no judge takes it for one of them."""
    words = imagery.subject_words(prompt) or [imagery.depicted_word(prompt)]

    def nearest(other: str) -> float:
        mine = imagery.colours_of(other)
        return min(
            sum((a - b) ** 2 for a, b in zip(mine, imagery.colours_of(w), strict=True)) ** 0.5
            for w in words
        )

    return max((o for o in _OTHER_SUBJECTS if o not in words), key=nearest)


def _off_topic(state: FakeGemini, prompt: str, kind: str | None) -> bool:
    if kind == "off_topic":
        return True
    every = state.off_topic_every
    with state.lock:
        first = prompt not in state.drawn_prompts
        state.drawn_prompts.add(prompt)
    return bool(every) and first and _digest(prompt, "off-topic") % every == 0


def _picture(
    state: FakeGemini, config: Mapping[str, Any], prompt: str, billed: str, kind: str | None
) -> dict[str, Any]:
    """An image model's answer: a PNG of the prompt's subject (fakes/imagery) at the asked
    aspect ratio as inlineData, billed IMAGE_OUTPUT_TOKENS. Faults: "max_tokens" cuts the
    image off (no image, finishReason MAX_TOKENS), "schema" answers text instead of an image,
    "off_topic" draws another subject."""
    image_config = _get(config, "imageConfig", "image_config") or {}
    aspect = _get(image_config, "aspectRatio", "aspect_ratio") or "1:1"
    if aspect not in ASPECT_RATIOS:
        raise _BadRequest(
            f"Invalid aspect ratio {aspect!r}: supported values are {', '.join(ASPECT_RATIOS)}."
        )
    if kind == "max_tokens":
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": []}}
        return {
            "candidates": [{**candidate, "finishReason": "MAX_TOKENS", "index": 0}],
            "usageMetadata": _usage(billed, 0, 0),
        }
    if kind == "schema":
        text = "I can describe that picture, but here are some words instead."
        part: dict[str, Any] = {"text": text}
        output = _tokens(text)
    else:
        word = imagery.depicted_word(prompt)
        if _off_topic(state, prompt, kind):
            word = off_topic_word(prompt)
        png = imagery.picture_png(word, *picture_size(aspect))
        part = {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(png).decode()}}
        output = IMAGE_OUTPUT_TOKENS
    usage: dict[str, Any] = _usage(billed, output, 0)
    if "inlineData" in part:
        usage["candidatesTokensDetails"] = [{"modality": "IMAGE", "tokenCount": output}]
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": usage,
        "modelVersion": "fake-gemini",
    }


# Gemini counts an image as 258 tokens per 768x768 tile, one tile when both sides are <= 384 px.
IMAGE_TILE_TOKENS = 258
_NARRATION_LINE = re.compile(r"^Narration:[ \t]*(.+)$", re.MULTILINE)


def _inline_images(contents: Any) -> list[bytes]:
    """The image parts' bytes (inlineData, base64 or base64url) in the request's contents."""
    images: list[bytes] = []
    for content in contents if isinstance(contents, list) else [contents]:
        parts = content.get("parts") if isinstance(content, Mapping) else None
        for part in parts or []:
            blob = _get(part, "inlineData", "inline_data")
            mime = str(_get(blob, "mimeType", "mime_type") or "")
            data = _get(blob, "data")
            if mime.startswith("image/") and isinstance(data, str):
                text = data.replace("-", "+").replace("_", "/")
                try:
                    images.append(base64.b64decode(text + "=" * (-len(text) % 4), validate=True))
                except ValueError:
                    raise _BadRequest("inlineData.data is not base64") from None
    return images


def _image_tokens(image: bytes) -> int:
    size = _image_size(image)
    if size is None:
        raise _BadRequest("Unable to process input image.")
    width, height = size
    if width <= 384 and height <= 384:
        return IMAGE_TILE_TOKENS
    return IMAGE_TILE_TOKENS * math.ceil(width / 768) * math.ceil(height / 768)


def _image_size(image: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG's IHDR or a JPEG's start-of-frame marker."""
    if image.startswith(b"\x89PNG\r\n\x1a\n") and len(image) >= 24:
        return int.from_bytes(image[16:20], "big"), int.from_bytes(image[20:24], "big")
    at = 2 if image.startswith(b"\xff\xd8") else len(image)
    while at + 9 < len(image) and image[at] == 0xFF:
        marker, length = image[at + 1], int.from_bytes(image[at + 2 : at + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height = int.from_bytes(image[at + 5 : at + 7], "big")
            return int.from_bytes(image[at + 7 : at + 9], "big"), height
        at += 2 + length
    return None


def _judgement(
    state: FakeGemini,
    config: Mapping[str, Any],
    prompt: str,
    billed: str,
    images: list[bytes],
    kind: str | None,
) -> dict[str, Any]:
    """The image judge's answer (see the module docstring), billed per image."""
    image_tokens = sum(_image_tokens(image) for image in images)
    found = _NARRATION_LINE.search(prompt)
    narration = found.group(1) if found else prompt
    try:
        score, reason = imagery.judge(images, narration)
    except (RuntimeError, ValueError):
        raise _BadRequest("Unable to process input image.") from None
    verdict: dict[str, Any] = {
        "score": state.score if state.score is not None else score,
        "reason": reason,
    }
    verdict.update({k: v for k, v in state.fields.items() if k in verdict})
    mime = _get(config, "responseMimeType", "response_mime_type")
    if kind == "schema":
        text = json.dumps(_broken_for(_schema_of(config)))
    elif mime == "application/json":
        text = json.dumps(verdict, ensure_ascii=False)
    else:
        text = reason
    finish = "STOP"
    if kind == "max_tokens":
        text, finish = text[: max(1, len(text) // 2)], "MAX_TOKENS"
    usage = _usage(billed, _tokens(text), _thoughts(config))
    usage["promptTokenCount"] += image_tokens
    usage["totalTokenCount"] += image_tokens
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": text}]},
                "finishReason": finish,
                "index": 0,
            }
        ],
        "usageMetadata": usage,
        "modelVersion": "fake-gemini",
    }


def _carries_images(contents: Any) -> bool:
    """Whether the request's contents hold an image part (an image to understand)."""
    for content in contents if isinstance(contents, list) else [contents]:
        parts = content.get("parts") if isinstance(content, Mapping) else None
        for part in parts or []:
            blob = _get(part, "inlineData", "inline_data")
            if str(_get(blob, "mimeType", "mime_type") or "").startswith("image/"):
                return True
    return False


def _pictures_in(reply: Mapping[str, Any]) -> int:
    """The image parts of an answer (what an image model bills per picture)."""
    return sum(
        1
        for candidate in reply.get("candidates") or []
        for part in (candidate.get("content") or {}).get("parts") or []
        if str((part.get("inlineData") or {}).get("mimeType", "")).startswith("image/")
    )


class _BadRequest(Exception):
    pass


def _error_body(code: int, status: str, message: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": message, "status": status}}).encode()


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    seen: SeenRequest | None = None  # the generateContent request being answered

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
        pass  # quiet: tests read the requests list instead

    def _send(self, code: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        if self.seen is not None:
            self.seen.status = code
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw or b"{}")

    def do_GET(self) -> None:
        self.seen = None  # a kept-alive connection's previous request is answered
        state = self.server.fake
        if urlparse(self.path).path == "/_fake/requests":
            with state.lock:
                seen = [
                    {
                        "model": r.model,
                        "kind": r.kind,
                        "fault": r.fault,
                        "body": r.body,
                        "status": r.status,
                        "usage": r.usage,
                    }
                    for r in state.requests
                ]
            self._send(200, json.dumps(seen).encode())
            return
        if urlparse(self.path).path == "/_fake/counters":
            self._send(200, json.dumps(state.counters()).encode())
            return
        if _MODELS_PATH.match(urlparse(self.path).path):
            self._models(state)
            return
        if one := _MODEL_PATH.match(urlparse(self.path).path):
            self._model(state, one["version"], one["model"])
            return
        self._send(404, _error_body(404, "NOT_FOUND", "no such path"))

    def _refused(self, state: FakeGemini) -> bool:
        """Answers a missing key (403, as Google does) or the configured auth_error."""
        url = urlparse(self.path)
        key = self.headers.get("x-goog-api-key") or parse_qs(url.query).get("key", [""])[0]
        if not key:
            message = "Method doesn't allow unregistered callers. Please use an API key."
            self._send(403, _error_body(403, "PERMISSION_DENIED", message))
            return True
        if state.auth_error is not None:
            code = state.auth_error
            status = _AUTH_STATUS.get(code, "UNAUTHENTICATED")
            self._send(code, _error_body(code, status, "API key not valid."))
            return True
        return False

    def _models(self, state: FakeGemini) -> None:
        if self._refused(state):
            return
        query = parse_qs(urlparse(self.path).query)
        size = max(1, int(query.get("pageSize", ["50"])[0]))
        start = int(query.get("pageToken", ["0"])[0] or 0)
        names = state.models[start : start + size]
        body: dict[str, Any] = {
            "models": [
                {
                    "name": f"models/{name}",
                    "displayName": name,
                    "supportedGenerationMethods": ["generateContent"],
                }
                for name in names
            ]
        }
        if start + size < len(state.models):
            body["nextPageToken"] = str(start + size)
        self._send(200, json.dumps(body).encode())

    def _model(self, state: FakeGemini, version: str, model: str) -> None:
        """models.get: the Model resource as Google answers it, or its 404."""
        if self._refused(state):
            return
        fault = state.faults.pop()
        if fault is not None and fault.kind in ("429", "500", "503", "hang", "drop"):
            self._generate(state, {}, fault)
            return
        if model not in state.models:
            message = (
                f"models/{model} is not found for API version {version}, or is not supported "
                "for get. Call ListModels to see the list of available models and their "
                "supported methods."
            )
            self._send(404, _error_body(404, "NOT_FOUND", message))
            return
        tts = model.endswith("-tts")
        body = {
            "name": f"models/{model}",
            "version": "001",
            "displayName": model,
            "description": f"{model} (a local fake)",
            "inputTokenLimit": 8192 if tts else 1048576,
            "outputTokenLimit": 16384 if tts else 65536,
            "supportedGenerationMethods": ["generateContent", "countTokens"],
            "temperature": 1,
            "topP": 0.95,
            "topK": 64,
            "maxTemperature": 2,
        }
        self._send(200, json.dumps(body).encode())

    def do_POST(self) -> None:
        self.seen = None
        url = urlparse(self.path)
        state = self.server.fake
        if url.path.startswith("/_fake/"):
            self._control(url.path, state)
            return
        match = _PATH.match(url.path)
        try:
            body = self._body()
        except json.JSONDecodeError:
            self._send(400, _error_body(400, "INVALID_ARGUMENT", "the body is not JSON"))
            return
        if match is None:
            self._send(404, _error_body(404, "NOT_FOUND", f"no such method {url.path}"))
            return
        if self._refused(state):
            return
        if match["model"] not in state.models:
            message = (
                f"models/{match['model']} is not found for API version {match['version']}, or "
                "is not supported for generateContent. Call ListModels to see the list of "
                "available models and their supported methods."
            )
            self._seen(state, SeenRequest(match["model"], "text", body, "404"))
            self._send(404, _error_body(404, "NOT_FOUND", message))
            return
        config = _get(body, "generationConfig", "generation_config") or {}
        modalities = _get(config, "responseModalities", "response_modalities") or []
        asked = [str(m).upper() for m in modalities]
        kind = "image" if "IMAGE" in asked else "audio" if "AUDIO" in asked else "text"
        judged = kind == "text" and _carries_images(body.get("contents"))
        out = state.outage_on in (None, "judge" if judged else kind)
        if state.outage is not None and out:
            self._seen(state, SeenRequest(match["model"], kind, body, "outage"))
            code = state.outage
            status = "UNAVAILABLE" if code == 503 else "INTERNAL"
            self._send(code, _error_body(code, status, "The service is currently unavailable."))
            return
        fault = state.faults.pop("judge" if judged else kind)
        self._seen(state, SeenRequest(match["model"], kind, body, fault.kind if fault else None))
        if fault is not None and fault.kind == "hold":
            with state.lock:
                state.holding.append(fault)
            fault.released.wait(fault.hang_s)
            fault = None  # then answered as asked
        self._generate(state, body, fault)

    def _seen(self, state: FakeGemini, seen: SeenRequest) -> None:
        with state.lock:
            state.requests.append(seen)
        self.seen = seen

    def _generate(self, state: FakeGemini, body: Mapping[str, Any], fault: Fault | None) -> None:
        kind = fault.kind if fault else None
        if kind == "429":
            message = "Resource has been exhausted (e.g. check quota)."
            headers = {"Retry-After": str(fault.retry_after)} if fault else {}
            self._send(429, _error_body(429, "RESOURCE_EXHAUSTED", message), headers)
        elif kind == "500":
            self._send(500, _error_body(500, "INTERNAL", "An internal error has occurred."))
        elif kind == "503":
            self._send(503, _error_body(503, "UNAVAILABLE", "The model is overloaded."))
        elif kind == "400":
            message = 'Invalid JSON payload received. Unknown name "bogus": Cannot find field.'
            self._send(400, _error_body(400, "INVALID_ARGUMENT", message))
        elif kind == "hang":
            assert fault is not None
            time.sleep(fault.hang_s)
            self.close_connection = True
        elif kind == "drop":
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(2)
        elif kind == "malformed":
            self._send(200, b'{"candidates": [{"content": {"parts": [{"text": "trunc')
        else:
            try:
                reply = answer(state, body, fault)
                if state.usage and "usageMetadata" in reply:
                    meta = {**reply["usageMetadata"], **state.usage}
                    meta["totalTokenCount"] = sum(
                        meta[k]
                        for k in ("promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount")
                    )
                    reply["usageMetadata"] = meta
                if self.seen is not None and "usageMetadata" in reply:
                    with state.lock:
                        self.seen.usage = dict(reply["usageMetadata"])
                        self.seen.images = _pictures_in(reply)
                self._send(200, json.dumps(reply).encode())
            except _BadRequest as exc:
                self._send(400, _error_body(400, "INVALID_ARGUMENT", str(exc)))

    def _control(self, path: str, state: FakeGemini) -> None:
        try:
            body = self._body()
            if path == "/_fake/faults":
                state.faults.push(**body)
            elif path == "/_fake/config":
                if "score" in body:
                    state.set_score(body["score"])
                for name, value in (body.get("fields") or {}).items():
                    state.set_field(name, value)
                if "usage" in body:
                    state.usage = dict(body["usage"])
                if "tts_format" in body:
                    state.tts_format = body["tts_format"]
                if "auth_error" in body:
                    state.auth_error = body["auth_error"]
                if "outage" in body:
                    state.outage = body["outage"]
                    state.outage_on = body.get("outage_on")
                if "models" in body:
                    state.models = list(body["models"])
                if "off_topic_every" in body:
                    state.off_topic_every = int(body["off_topic_every"])
            elif path == "/_fake/reset":
                state.reset()
            elif path == "/_fake/clear_faults":
                state.clear_faults()
            else:
                self._send(404, _error_body(404, "NOT_FOUND", "no such control"))
                return
        except (TypeError, ValueError) as exc:
            self._send(400, _error_body(400, "INVALID_ARGUMENT", str(exc)))
            return
        self._send(200, b"{}")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeGemini


def _serve(host: str, port: int, fake: FakeGemini) -> _Server:
    server = _Server((host, port), _Handler)
    server.fake = fake
    fake.base_url = f"http://{host}:{server.server_address[1]}"
    return server


@contextlib.contextmanager
def running(
    tts_format: str = "pcm", host: str = "127.0.0.1", port: int = 0
) -> Iterator[FakeGemini]:
    """The server on an ephemeral port for the block; yields its state (`.base_url`,
    `.faults.push(kind)`, `.set_score(x)`, `.set_field(name, value)`, `.requests`)."""
    if tts_format not in ("pcm", "wav"):
        raise ValueError("tts_format must be 'pcm' or 'wav'")
    fake = FakeGemini(tts_format=tts_format)
    server = _serve(host, port, fake)
    thread = threading.Thread(target=server.serve_forever, name="fake-gemini", daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A local Gemini generateContent server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tts-format", choices=("pcm", "wav"), default="pcm")
    args = parser.parse_args(argv)
    if shutil.which("espeak-ng") is None:
        parser.error("espeak-ng is required for TTS answers")
    server = _serve(args.host, args.port, FakeGemini(tts_format=args.tts_format))
    print(f"fake Gemini listening on {server.fake.base_url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    server.server_close()


if __name__ == "__main__":
    main()
