"""Voice: espeak-ng offline; Edge-TTS, then Gemini TTS, then HALT in production."""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
import wave
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

from mdame_core.settings import os_variable, raw, set_variable
from mdame_domain.dimensions import VoiceSettings
from mdame_domain.doctor import Status, display_url, edge_voice_list_url
from mdame_domain.paid_calls import failure_class
from mdame_domain.speech import align_words, audio_to_wav, coverage_problems, decode_to_wav
from mdame_domain.voice import VoiceSynthesisError, VoiceTrack, WordTiming, synthesize_espeak
from mdame_domain.waits import NotYet
from mdame_resources.health import Health, HealthScope
from mdame_resources.providers.base import ProviderResource
from mdame_resources.providers.budget import BudgetExhausted, CallContext
from mdame_resources.providers.gemini import (
    ModelBlocked,
    PaidCallFailed,
    PaidCallRefused,
    synthesize_speech,
)

EDGE_URL_ENV = "MDAME_EDGE_TTS_URL"
_TICKS_PER_SECOND = 10_000_000
# edge_tts reads its endpoint from a module global: one synthesis at a time may set it.
_EDGE_URL_LOCK = threading.Lock()


class VoiceResource(ProviderResource):
    def synthesize(
        self,
        text: str,
        voice: str,
        out_wav: Path,
        settings: VoiceSettings | None = None,
        ctx: CallContext | None = None,
    ) -> VoiceTrack:
        """A voice track (WAV at out_wav, word timings), or VoiceSynthesisError when every
        provider failed (the caller HALTs). `voice` is the espeak-ng voice; `settings` the
        dimension's production voice settings (defaults when None); `ctx` the step's paid-call
        context, which a paid provider (Gemini TTS) needs."""
        raise NotImplementedError


class EspeakVoice(VoiceResource):
    words_per_minute: int = 165

    no_health_check: ClassVar[str] = "offline: it calls no service"

    @property
    def offline(self) -> bool:
        return True

    def synthesize(
        self,
        text: str,
        voice: str,
        out_wav: Path,
        settings: VoiceSettings | None = None,
        ctx: CallContext | None = None,
    ) -> VoiceTrack:
        return synthesize_espeak(text, voice, str(out_wav), self.words_per_minute)


class EdgeTtsFailure(Exception):
    """Edge-TTS gave no usable audio; `kind` says which failure (the fallback's trigger),
    `permanent` whether a later try could succeed, `fix` what an operator changes if not."""

    def __init__(self, kind: str, detail: str, *, permanent: bool = False, fix: str = "") -> None:
        super().__init__(f"Edge-TTS {kind}: {detail}")
        self.kind = kind
        self.detail = detail
        self.permanent = permanent
        self.fix = fix


def _cause(exc: BaseException) -> str:
    """'ClientConnectorError: Cannot connect to host ...': the type and the library's words."""
    text = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _handshake_failure(status: int, message: str) -> EdgeTtsFailure:
    """A refused WebSocket handshake. 403 is what the service answers a token it no longer
    accepts or a clock it judges skewed (edge-tts already corrected the skew once and tried
    again), so a later try, or a newer client, may pass; 408, 429 and 5xx pass with time; any
    other 4xx says the endpoint itself is wrong."""
    detail = f"the handshake was refused: HTTP {status} {message}".strip()
    if status == 403 or failure_class(status) == "transient":
        return EdgeTtsFailure(f"HTTP {status}" if status != 403 else "403", detail)
    return EdgeTtsFailure(
        f"HTTP {status}",
        detail,
        permanent=True,
        fix=f"{EDGE_URL_ENV} must point at an Edge-TTS synthesis endpoint",
    )


def _gemini_failure(exc: BaseException) -> tuple[bool, str]:
    """(permanent, fix) of a failed Gemini TTS call: a refusal (400, a refused key, an unknown
    model) and a safety block of the text are answered the same way again; 429, 5xx,
    timeouts, the budget cap and unusable audio may pass later."""
    if isinstance(exc, PaidCallRefused):
        message = str(exc)
        fix = message.split("; fix: ", 1)[1] if "; fix: " in message else message
        return True, f"Gemini TTS: {fix} (the voice is tts.gemini_voice)"
    if isinstance(exc, ModelBlocked):
        return True, "Gemini TTS blocks this script's text: the script must change"
    return False, ""


class EdgeGeminiVoiceChain(VoiceResource):
    """Edge-TTS with word boundaries; on any Edge failure the Gemini TTS fallback; when that
    fails too, VoiceSynthesisError (the voice stage HALTs the script), permanent only when
    every provider failed for a reason no later try can heal. Audio that does not cover the
    text is a failure, never a result."""

    gemini_api_key: str = ""
    # The Edge-TTS WebSocket URL (must contain '?'); empty: $MDAME_EDGE_TTS_URL, else the
    # service's own.
    edge_url: str = ""
    # Our own bound on the whole stream: once the socket is open, edge-tts's receive timeout
    # does not stop a server that stalls.
    edge_deadline_s: float = 120.0
    edge_connect_timeout_s: int = 10

    def synthesize(
        self,
        text: str,
        voice: str,
        out_wav: Path,
        settings: VoiceSettings | None = None,
        ctx: CallContext | None = None,
    ) -> VoiceTrack:
        settings = settings or VoiceSettings()
        try:
            return self._edge(text, settings, out_wav)
        except EdgeTtsFailure as failure:
            return self._fallback(text, settings, out_wav, failure, ctx)

    # -- the fallback: one call site --------------------------------------------------------
    def _fallback(
        self,
        text: str,
        settings: VoiceSettings,
        out_wav: Path,
        failure: EdgeTtsFailure,
        ctx: CallContext | None,
    ) -> VoiceTrack:
        """Gemini TTS with settings.gemini_voice, through the paid-call ledger; its audio to WAV
        and word timings by aligning the known text to it (Gemini gives none)."""
        if ctx is None:
            raise VoiceSynthesisError(
                f"{failure}; Gemini TTS needs the step's paid-call context",
                permanent=failure.permanent,
                fix=failure.fix,
            )
        try:
            audio, mime = synthesize_speech(
                text, settings.gemini_voice, ctx=ctx, api_key=self.gemini_api_key
            )
            duration = audio_to_wav(audio, mime, out_wav)
            words = align_words(text, out_wav)
        except NotYet:
            # A killed run's Gemini call of this script may still be answered: the voice waits
            # for it (no HALT); Edge is tried again first when the step runs again.
            Path(out_wav).unlink(missing_ok=True)
            raise
        except (PaidCallFailed, BudgetExhausted, VoiceSynthesisError) as exc:
            Path(out_wav).unlink(missing_ok=True)
            permanent, fix = _gemini_failure(exc)
            raise VoiceSynthesisError(
                f"{failure}; then Gemini TTS: {exc}",
                # One provider that may answer later is reason enough to try again.
                permanent=failure.permanent and permanent,
                fix="; ".join(f for f in (failure.fix, fix) if f),
            ) from exc
        with wave.open(str(out_wav), "rb") as wav:
            sample_rate = wav.getframerate()
        return VoiceTrack(
            str(out_wav), round(duration, 3), words, sample_rate, "gemini-tts", str(failure)
        )

    # -- Edge-TTS ---------------------------------------------------------------------------
    def _endpoint(self) -> str | None:
        url = self.edge_url or raw(EDGE_URL_ENV)
        if not url:
            return None
        if "?" not in url:
            # edge-tts appends '&ConnectionId=...': without a query the URL would be wrong.
            raise EdgeTtsFailure(
                "endpoint invalid",
                f"{EDGE_URL_ENV} must contain '?' (a query string)",
                permanent=True,
                fix=f"set {EDGE_URL_ENV} to the synthesis URL with its query string",
            )
        host = urlsplit(url).hostname or ""
        if host in ("127.0.0.1", "localhost", "::1"):
            # edge-tts honours proxy variables; a local server is never behind the proxy.
            current = os_variable("NO_PROXY")
            if host not in current.split(","):
                set_variable("NO_PROXY", ",".join(filter(None, [current, host])))
        return url

    def _edge(self, text: str, settings: VoiceSettings, out_wav: Path) -> VoiceTrack:
        url = self._endpoint()
        with tempfile.TemporaryDirectory(prefix="mdame-edge-") as tmp:
            mp3 = Path(tmp) / "edge.mp3"
            words = self._stream(text, settings, url, mp3)
            if mp3.stat().st_size == 0:
                raise EdgeTtsFailure("audio missing", "the stream carried no audio bytes")
            try:
                duration = decode_to_wav(mp3, out_wav)
            except VoiceSynthesisError as exc:
                raise EdgeTtsFailure("audio undecodable", str(exc)[:300]) from exc
        problems = coverage_problems(text, words, duration)
        if problems:
            # A cut stream raises nothing in edge-tts: the audio just comes back short.
            Path(out_wav).unlink(missing_ok=True)
            raise EdgeTtsFailure("audio incomplete", "; ".join(problems))
        return VoiceTrack(str(out_wav), round(duration, 3), tuple(words), 24000, "edge-tts")

    def _stream(
        self, text: str, settings: VoiceSettings, url: str | None, mp3: Path
    ) -> list[WordTiming]:
        # A fresh loop on a worker thread: the caller may itself be inside an event loop.
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, self._astream(text, settings, url, mp3)).result()

    async def _astream(
        self, text: str, settings: VoiceSettings, url: str | None, mp3: Path
    ) -> list[WordTiming]:
        import aiohttp
        import edge_tts
        import edge_tts.communicate
        import edge_tts.constants
        from edge_tts import exceptions as edge_errors

        words: list[WordTiming] = []
        with _EDGE_URL_LOCK:
            # edge_tts.constants keeps the service's own URL: a call without an endpoint must
            # not inherit an earlier call's.
            edge_tts.communicate.WSS_URL = url or edge_tts.constants.WSS_URL
            try:
                communicate = edge_tts.Communicate(
                    text,
                    settings.edge_voice,
                    rate=settings.rate,
                    pitch=settings.pitch,
                    boundary="WordBoundary",
                    connect_timeout=self.edge_connect_timeout_s,
                    receive_timeout=max(1, int(self.edge_deadline_s)),
                )
            except (TypeError, ValueError) as exc:
                raise EdgeTtsFailure(
                    "settings invalid",
                    _cause(exc),
                    permanent=True,
                    fix="correct tts: {edge_voice, rate, pitch} in the dimension's YAML",
                ) from exc
            try:
                async with asyncio.timeout(self.edge_deadline_s):
                    with mp3.open("wb") as audio:
                        async for chunk in communicate.stream():
                            if chunk["type"] == "audio":
                                audio.write(chunk["data"])
                            elif chunk["type"] == "WordBoundary":
                                start = chunk["offset"] / _TICKS_PER_SECOND
                                end = start + chunk["duration"] / _TICKS_PER_SECOND
                                words.append(
                                    WordTiming(chunk["text"], round(start, 3), round(end, 3))
                                )
            except TimeoutError as exc:
                heard = f"{len(words)} word(s) received" if words else "nothing received"
                raise EdgeTtsFailure(
                    "timeout",
                    f"no complete answer within {self.edge_deadline_s:g}s ({heard}; the "
                    "stream stalled)",
                ) from exc
            except aiohttp.ClientResponseError as exc:
                raise _handshake_failure(exc.status, exc.message or "") from exc
            except edge_errors.NoAudioReceived as exc:
                raise await self._no_audio(url, settings.edge_voice, exc) from exc
            except edge_errors.SkewAdjustmentError as exc:
                raise EdgeTtsFailure(
                    "403", f"refused, and no clock skew to correct: {_cause(exc)}"
                ) from exc
            except edge_errors.EdgeTTSException as exc:
                raise EdgeTtsFailure("protocol error", _cause(exc)) from exc
            except (aiohttp.ClientError, OSError) as exc:
                raise EdgeTtsFailure("connection failed", _cause(exc)) from exc
            except (ValueError, json.JSONDecodeError, KeyError) as exc:
                # Malformed frames raise bare ValueError/JSONDecodeError/KeyError in edge-tts.
                raise EdgeTtsFailure("malformed frame", _cause(exc)) from exc
        return words

    # -- health ----------------------------------------------------------------------------
    def health_check(self, timeout: float, scope: HealthScope | None = None) -> list[Health]:
        """edge-tts list_voices() at the voices list beside the synthesis endpoint; WARN when a
        dimension's voice is not offered (Gemini TTS would take over). The Gemini TTS fallback's
        key and models are the writer's check (one key, every configured model)."""
        import aiohttp
        import edge_tts.constants
        import edge_tts.voices

        try:
            wss = self._endpoint()  # a local server is never behind the proxy
        except EdgeTtsFailure as failure:
            return [Health(Status.FAIL, failure.detail)]
        try:
            url = edge_voice_list_url(wss) if wss else edge_tts.constants.VOICE_LIST
        except ValueError as exc:
            return [Health(Status.FAIL, f"{EDGE_URL_ENV}: {exc}")]
        where = display_url(url)

        async def voices() -> list[Any]:
            with _EDGE_URL_LOCK:
                # list_voices reads the module's VOICE_LIST; point it here for this call only.
                edge_tts.voices.VOICE_LIST = url
                try:
                    async with asyncio.timeout(timeout):
                        return list(await edge_tts.voices.list_voices())
                finally:
                    edge_tts.voices.VOICE_LIST = edge_tts.constants.VOICE_LIST

        try:
            listed = asyncio.run(voices())
        except aiohttp.ClientResponseError as exc:
            return [Health(Status.FAIL, f"{where} answered HTTP {exc.status}")]
        except TimeoutError:
            return [Health(Status.FAIL, f"{where}: no answer within {timeout}s")]
        except aiohttp.ClientError as exc:
            return [Health(Status.FAIL, f"{where} not reachable ({type(exc).__name__})")]
        names = {str(v.get("ShortName")) for v in listed}
        missing = sorted(
            f"{d.tts.edge_voice} ({d.slug})"
            for d in (scope.dimensions if scope else ())
            if d.tts.edge_voice not in names
        )
        if missing:
            return [
                Health(
                    Status.WARN,
                    f"{len(names)} voices at {where}, but not {', '.join(missing)}: those "
                    "dimensions would fall back to Gemini TTS",
                )
            ]
        return [Health(Status.OK, f"{len(names)} voices at {where}")]

    async def _no_audio(self, url: str | None, voice: str, exc: BaseException) -> EdgeTtsFailure:
        """The service answers a voice it does not have with no audio at all, as it may answer
        a passing fault: its voices list tells the two apart. A list that cannot be read leaves
        the failure transient."""
        listed = await _listed_voices(url, self.edge_connect_timeout_s)
        if listed is not None and voice not in listed:
            return EdgeTtsFailure(
                "unknown voice",
                f"{voice!r} is not in the service's voices list ({_cause(exc)})",
                permanent=True,
                fix=f"set tts: {{edge_voice}} in the dimension's YAML to a listed voice, not "
                f"{voice!r}",
            )
        return EdgeTtsFailure("no audio", _cause(exc))


async def _listed_voices(url: str | None, timeout_s: float) -> set[str] | None:
    """The ShortNames of the Edge-TTS voices list beside `url`, or None when it cannot be read."""
    import aiohttp
    import edge_tts.constants
    import edge_tts.voices

    try:
        listing = edge_voice_list_url(url) if url else edge_tts.constants.VOICE_LIST
    except ValueError:
        return None
    # list_voices reads the module's VOICE_LIST; pointed here for this call only (the caller
    # holds _EDGE_URL_LOCK).
    edge_tts.voices.VOICE_LIST = listing
    try:
        async with asyncio.timeout(timeout_s):
            voices = await edge_tts.voices.list_voices()
    except (TimeoutError, aiohttp.ClientError, OSError, ValueError):
        return None
    finally:
        edge_tts.voices.VOICE_LIST = edge_tts.constants.VOICE_LIST
    return {str(v.get("ShortName")) for v in voices}


__all__ = [
    "EdgeGeminiVoiceChain",
    "EdgeTtsFailure",
    "EspeakVoice",
    "VoiceResource",
    "VoiceSynthesisError",
]
