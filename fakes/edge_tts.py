"""A local Edge-TTS (Microsoft "read aloud") WebSocket server that the real edge-tts client
talks to unchanged.

The wire protocol, as edge-tts 7.3.1 speaks it: the client opens
`{WSS_URL}&ConnectionId=..&Sec-MS-GEC=..&Sec-MS-GEC-Version=..`, sends a text frame
`Path:speech.config` (JSON: word or sentence boundaries, output format) and one `Path:ssml`
(the text inside <speak><voice><prosody>). The server answers `Path:turn.start`, then for each
word an `audio.metadata` text frame ({"Metadata": [{"Type": "WordBoundary", "Data": {"Offset",
"Duration" in 100-ns ticks, "text": {"Text", "Length", "BoundaryType"}}}]}) ahead of the binary
audio frames that carry it (2-byte big-endian header length, headers ending in `Path:audio`,
"\\r\\n", then MP3 bytes: 24 kHz mono 48 kbit/s), an empty binary audio frame with no
Content-Type, and `Path:turn.end`.

The speech is real: espeak-ng through its library, with espeak's own word marks as the
boundaries (fakes.espeak_marks), so the offsets are the true timings of the audio sent.

Faults, consumed one per connection from a FIFO (`server.faults.push("drop")`), or sticky
(`server.set_fault("403")`), or over HTTP (`POST /_control/faults` with {"push": kind} or
{"set": kind | null}):
  403       the handshake is refused with 403 (edge-tts retries once per text chunk; a sticky
            403 is what a token change looks like)
  no_audio  turn.start and turn.end with no audio (edge-tts raises NoAudioReceived)
  drop      half of the words and audio, then the connection is cut (edge-tts raises nothing)
  short     every word boundary, a third of the audio, then a clean turn.end
  stall     turn.start and the first boundary, then nothing (until the server stops)

The voices list (edge-tts `list_voices`, `mdame doctor`'s cheap call) is served beside the
synthesis path, as Microsoft does: GET {PREFIX}/voices/list?trustedclienttoken=..., a JSON array
of the voices in `server.voices`; a sticky 403 refuses it too.

Standalone: `python -m fakes.edge_tts --port 8765` prints the WSS_URL to point
MDAME_EDGE_TTS_URL at.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import subprocess
import threading
import uuid
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from html import unescape
from typing import Any

from aiohttp import WSMsgType, web

from fakes.espeak_marks import Speech, speak

TICKS_PER_SECOND = 10_000_000
PREFIX = "/consumer/speech/synthesize/readaloud"
PATH = PREFIX + "/edge/v1"
VOICES_PATH = PREFIX + "/voices/list"
# The voices the list offers by default (short names; the synthesis path speaks any locale).
DEFAULT_VOICES = (
    "en-US-AriaNeural",
    "en-US-GuyNeural",
    "en-US-JennyNeural",
    "en-GB-SoniaNeural",
    "en-GB-RyanNeural",
    "de-DE-KatjaNeural",
    "fr-FR-DeniseNeural",
    "es-ES-ElviraNeural",
)
FAULTS = ("403", "no_audio", "drop", "short", "stall")
AUDIO_PIECE = 4096  # bytes of MP3 per binary frame
_PROSODY = re.compile(
    r"<prosody pitch='(?P<pitch>[^']*)' rate='(?P<rate>[^']*)' volume='[^']*'>(?P<text>.*)"
    r"</prosody>",
    re.S,
)
_VOICE = re.compile(r"<voice name='[^']*\((?P<locale>[a-z]{2,})-(?P<region>[A-Z]{2,}),")


@dataclass
class Faults:
    """What the next connections do: a FIFO of one-shot faults, else the sticky one."""

    queue: deque[str] = field(default_factory=deque)
    sticky: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def push(self, *kinds: str) -> None:
        for kind in kinds:
            _check_fault(kind)
        with self.lock:
            self.queue.extend(kinds)

    def set(self, kind: str | None) -> None:
        if kind is not None:
            _check_fault(kind)
        with self.lock:
            self.sticky = kind

    def clear(self) -> None:
        with self.lock:
            self.queue.clear()
            self.sticky = None

    def next(self) -> str | None:
        with self.lock:
            return self.queue.popleft() if self.queue else self.sticky


def _check_fault(kind: str) -> None:
    if kind not in FAULTS:
        raise ValueError(f"unknown Edge-TTS fault {kind!r}; one of {FAULTS}")


@dataclass(frozen=True)
class Request:
    """What one connection asked for (tests assert on it)."""

    speech_config: dict[str, Any]
    text: str
    locale: str
    rate: str
    pitch: str
    fault: str | None


def espeak_voice(locale: str) -> str:
    """The espeak-ng voice for an Edge locale ('en-US' -> 'en-us')."""
    return locale.lower()


def words_per_minute(rate: str) -> int:
    """Edge's rate ('+10%', '-20%') on espeak's default 175 wpm."""
    match = re.fullmatch(r"([+-]\d+)%", rate)
    percent = int(match.group(1)) if match else 0
    return max(80, min(450, round(175 * (1 + percent / 100))))


def espeak_pitch(pitch: str) -> int:
    """Edge's pitch ('+5Hz') on espeak's 0-99 scale (50 is the voice's own)."""
    match = re.fullmatch(r"([+-]\d+)Hz", pitch)
    hz = int(match.group(1)) if match else 0
    return max(0, min(99, 50 + hz // 2))


def encode_mp3(speech: Speech) -> bytes:
    """audio-24khz-48kbitrate-mono-mp3, as Edge sends it."""
    done = subprocess.run(
        ["ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "s16le",
         "-ar", str(speech.sample_rate), "-ac", "1", "-i", "pipe:0",
         "-ar", "24000", "-ac", "1", "-c:a", "libmp3lame", "-b:a", "48k", "-f", "mp3", "pipe:1"],
        input=speech.pcm, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"ffmpeg could not encode MP3: {done.stderr.decode()[-500:]}")
    return done.stdout


def _headers(
    path: str, request_id: str, content_type: str = "application/json; charset=utf-8"
) -> str:
    return f"X-RequestId:{request_id}\r\nContent-Type:{content_type}\r\nPath:{path}\r\n\r\n"


def _boundary(word: str, start_s: float, end_s: float) -> str:
    offset = round(start_s * TICKS_PER_SECOND)
    duration = max(1, round((end_s - start_s) * TICKS_PER_SECOND))
    data = {
        "Offset": offset,
        "Duration": duration,
        "text": {"Text": word, "Length": len(word), "BoundaryType": "WordBoundary"},
    }
    return json.dumps({"Metadata": [{"Type": "WordBoundary", "Data": data}]})


def _audio_frame(request_id: str, mp3: bytes) -> bytes:
    if mp3:
        head = f"X-RequestId:{request_id}\r\nContent-Type:audio/mpeg\r\nPath:audio"
    else:  # the end-of-stream frame: no Content-Type, no data
        head = f"X-RequestId:{request_id}\r\nPath:audio"
    # The length counts the headers and their closing CRLF, not its own two bytes.
    encoded = head.encode() + b"\r\n"
    return len(encoded).to_bytes(2, "big") + encoded + mp3


def parse_ssml(ssml: str) -> tuple[str, str, str, str]:
    """(text, locale, rate, pitch) of the client's SSML."""
    prosody = _PROSODY.search(ssml)
    voice = _VOICE.search(ssml)
    if prosody is None or voice is None:
        raise ValueError("not an edge-tts SSML request")
    locale = f"{voice.group('locale')}-{voice.group('region')}"
    return unescape(prosody.group("text")), locale, prosody.group("rate"), prosody.group("pitch")


class EdgeTtsServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, stall_s: float = 3600.0) -> None:
        self.host = host
        self.port = port
        self.stall_s = stall_s
        self.faults = Faults()
        self.voices: list[str] = list(DEFAULT_VOICES)
        self.requests: list[Request] = []
        self.connections = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._stopping: asyncio.Event | None = None

    # -- addresses -------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def wss_url(self) -> str:
        """What edge_tts.communicate.WSS_URL (and MDAME_EDGE_TTS_URL) is set to."""
        return f"ws://{self.host}:{self.port}{PATH}?TrustedClientToken=local-fake"

    def set_fault(self, kind: str | None) -> None:
        self.faults.set(kind)

    # -- the app ---------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get(PATH, self._synthesize)
        app.router.add_get(VOICES_PATH, self._voices)
        app.router.add_post("/_control/faults", self._control)
        app.router.add_get("/_control/state", self._state)
        return app

    async def _control(self, request: web.Request) -> web.Response:
        body = await request.json()
        try:
            if "push" in body:
                self.faults.push(body["push"])
            if "set" in body:
                self.faults.set(body["set"])
            if body.get("clear"):
                self.faults.clear()
        except ValueError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response({"queued": list(self.faults.queue), "set": self.faults.sticky})

    async def _state(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"connections": self.connections, "requests": [r.__dict__ for r in self.requests]}
        )

    async def _voices(self, request: web.Request) -> web.Response:
        if self.faults.sticky == "403":
            return web.Response(status=403, text="Forbidden")
        return web.json_response([_voice_entry(name) for name in self.voices])

    async def _synthesize(self, request: web.Request) -> web.StreamResponse:
        self.connections += 1
        fault = self.faults.next()
        if fault == "403":
            # aiohttp adds the Date header edge-tts reads for its clock-skew correction.
            return web.Response(status=403, text="Forbidden")
        ws = web.WebSocketResponse(compress=True)
        await ws.prepare(request)
        config: dict[str, Any] = {}
        async for message in ws:
            if message.type != WSMsgType.TEXT:
                continue
            head, _, body = message.data.partition("\r\n\r\n")
            if "Path:speech.config" in head:
                config = json.loads(body)
            elif "Path:ssml" in head:
                text, locale, rate, pitch = parse_ssml(body)
                self.requests.append(Request(config, text, locale, rate, pitch, fault))
                await self._answer(request, ws, text, locale, rate, pitch, fault)
                break
        await ws.close()
        return ws

    async def _answer(
        self, request: web.Request, ws: web.WebSocketResponse, text: str, locale: str,
        rate: str, pitch: str, fault: str | None,
    ) -> None:  # fmt: skip
        request_id = uuid.uuid4().hex
        await ws.send_str(_headers("turn.start", request_id) + '{"context":{"serviceTag":"fake"}}')
        if fault == "no_audio":
            await ws.send_str(_headers("turn.end", request_id) + "{}")
            return
        speech, mp3 = await asyncio.get_running_loop().run_in_executor(
            None, _speak_and_encode, text, espeak_voice(locale), rate, pitch
        )
        marks = list(speech.marks)
        if fault == "stall":
            if marks:
                mark = marks[0]
                await ws.send_str(
                    _headers("audio.metadata", request_id)
                    + _boundary(mark.word, mark.start_s, mark.end_s)
                )
            assert self._stopping is not None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.stall_s)
            return
        pieces = [mp3[i : i + AUDIO_PIECE] for i in range(0, len(mp3), AUDIO_PIECE)]
        if fault == "short":
            pieces = pieces[: max(1, len(pieces) // 3)]
        seconds_per_byte = speech.duration_s / max(1, len(mp3))
        sent_bytes = 0
        for index, piece in enumerate(pieces):
            if fault == "drop" and index >= max(1, len(pieces) // 2):
                # Cut the TCP connection with no close frame, as a dropped network does.
                transport = request.transport
                if transport is not None:
                    transport.abort()
                return
            covered_s = (sent_bytes + len(piece)) * seconds_per_byte
            # Boundaries go ahead of the audio that carries them, as the real service does.
            while marks and (marks[0].start_s < covered_s or fault == "short"):
                mark = marks.pop(0)
                await ws.send_str(
                    _headers("audio.metadata", request_id)
                    + _boundary(mark.word, mark.start_s, mark.end_s)
                )
            await ws.send_bytes(_audio_frame(request_id, piece))
            sent_bytes += len(piece)
        for mark in marks:
            await ws.send_str(
                _headers("audio.metadata", request_id)
                + _boundary(mark.word, mark.start_s, mark.end_s)
            )
        await ws.send_bytes(_audio_frame(request_id, b""))
        await ws.send_str(_headers("turn.end", request_id) + "{}")

    # -- running it ------------------------------------------------------------------------
    async def start(self) -> None:
        self._stopping = asyncio.Event()
        self._runner = web.AppRunner(self.app(), handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]  # the ephemeral port when 0 was asked

    async def stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()


def _voice_entry(short_name: str) -> dict[str, Any]:
    """A voices-list entry in the service's shape."""
    locale, _, person = short_name.rpartition("-")
    return {
        "Name": f"Microsoft Server Speech Text to Speech Voice ({locale}, {person})",
        "ShortName": short_name,
        "Gender": "Female",
        "Locale": locale,
        "SuggestedCodec": "audio-24khz-48kbitrate-mono-mp3",
        "FriendlyName": f"Microsoft {person.removesuffix('Neural')} Online (Natural)",
        "Status": "GA",
        "VoiceTag": {"ContentCategories": ["General"], "VoicePersonalities": ["Friendly"]},
    }


def _speak_and_encode(text: str, voice: str, rate: str, pitch: str) -> tuple[Speech, bytes]:
    speech = speak(text, voice, words_per_minute(rate), espeak_pitch(pitch))
    return speech, encode_mp3(speech)


@contextlib.contextmanager
def running(
    host: str = "127.0.0.1", port: int = 0, stall_s: float = 3600.0
) -> Iterator[EdgeTtsServer]:
    """The server on its own event-loop thread for the duration of the block."""
    server = EdgeTtsServer(host, port, stall_s)
    loop = asyncio.new_event_loop()
    started = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, name="edge-tts-fake", daemon=True)
    thread.start()
    if not started.wait(30):
        raise RuntimeError("the local Edge-TTS server did not start")
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    server = EdgeTtsServer(args.host, args.port)

    async def serve() -> None:
        await server.start()
        print(f"Edge-TTS fake: MDAME_EDGE_TTS_URL={server.wss_url}", flush=True)
        print(f"control: POST {server.base_url}/_control/faults", flush=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
