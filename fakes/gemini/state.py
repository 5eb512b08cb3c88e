"""The fake Gemini's state: the fault queue, what a test forces (scores, fields, usage, an
outage, a refused key, the model list) and the requests it saw."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

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
# What the model list offers by default: MD-AME's default text and TTS models and a few more.
DEFAULT_MODELS = (
    "gemini-3.8-flash",
    "gemini-3.8-flash-tts",
    "gemini-3.8-pro",
    "gemini-2.5-flash",
    "gemini-2.5-flash-preview-tts",
    "gemini-2.5-flash-image",
)


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
