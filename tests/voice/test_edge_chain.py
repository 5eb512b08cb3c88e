"""EdgeGeminiVoiceChain with the real edge-tts client against the local Edge-TTS server, and
its Gemini TTS fallback with the real google-genai SDK against the local Gemini server, paid
through the ledger in a real PostgreSQL.

Every Edge fault ends in the fallback, whose audio is aligned to the text; when Gemini fails
too the error names both, and no audio is left behind. A healthy run gives a WAV whose word
timings are the Edge server's own.
"""

from __future__ import annotations

import time
import wave
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes import gemini as fake_gemini
from fakes.edge_tts import EdgeTtsServer, running
from mdame_domain.dimensions import VoiceSettings
from mdame_domain.speech import spoken_words
from mdame_domain.voice import VoiceSynthesisError
from mdame_pipeline.dimension_registry import DIMENSIONS_DIR, sync_registry
from mdame_pipeline.locks import held_lock
from mdame_resources.providers.budget import CallContext
from mdame_resources.providers.voice import EdgeGeminiVoiceChain
from tests.adminkit import as_admin
from tests.providers.gemkit import DIMENSION, KEY, assert_balanced, context

TEXT = (
    "Scientists found a planet where it rains glass sideways. Winds there beat the speed of "
    "sound. Would you still visit it? Follow for more space facts every day."
)


@pytest.fixture(scope="module")
def edge() -> Iterator[EdgeTtsServer]:
    with running(stall_s=30.0) as server:
        yield server


@pytest.fixture(scope="module")
def gemini() -> Iterator[fake_gemini.FakeGemini]:
    with fake_gemini.running() as server:
        yield server


@pytest.fixture(autouse=True)
def _clean(edge: EdgeTtsServer, gemini, monkeypatch: pytest.MonkeyPatch) -> None:
    edge.faults.clear()
    gemini.requests.clear()
    monkeypatch.setenv("MDAME_EDGE_TTS_URL", edge.wss_url)
    monkeypatch.setenv("MDAME_GEMINI_BASE_URL", gemini.base_url)
    monkeypatch.setenv("MDAME_GEMINI_BACKOFF_S", "0.01")  # Gemini's transient tries, shortened


@pytest.fixture
def ctx(state) -> Iterator[CallContext]:
    sync_registry(as_admin(state), DIMENSIONS_DIR)
    with held_lock(state, DIMENSION, "voice-test") as store:
        yield context(store)


def _chain(**overrides: object) -> EdgeGeminiVoiceChain:
    return EdgeGeminiVoiceChain(gemini_api_key=KEY, **overrides)  # type: ignore[arg-type]


def _tts_requests(gemini) -> list:
    return [r for r in gemini.requests if r.kind == "audio"]


def test_healthy_run_gives_a_wav_with_the_servers_word_timings(
    edge: EdgeTtsServer, tmp_path: Path
) -> None:
    out = tmp_path / "voice.wav"
    settings = VoiceSettings(edge_voice="en-GB-SoniaNeural", rate="+10%", pitch="-5Hz")
    track = _chain().synthesize(TEXT, "en-us", out, settings)
    assert (track.provider, track.fallback_from) == ("edge-tts", "")
    with wave.open(str(out), "rb") as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 24000)
        assert track.duration_s == pytest.approx(wav.getnframes() / 24000, abs=0.01)
    assert [w.word for w in track.words] == spoken_words(TEXT)
    for earlier, later in zip(track.words, track.words[1:], strict=False):
        assert earlier.start_s < earlier.end_s <= later.start_s + 0.001
    assert track.words[-1].end_s <= track.duration_s + 0.05
    request = edge.requests[-1]
    metadata = request.speech_config["context"]["synthesis"]["audio"]["metadataoptions"]
    assert metadata["wordBoundaryEnabled"] == "true"
    assert (request.locale, request.rate, request.pitch) == ("en-GB", "+10%", "-5Hz")


@pytest.mark.parametrize(
    ("faults", "kind"),
    [
        (["403", "403"], "403"),  # refused again after edge-tts's clock-skew retry
        (["no_audio"], "no audio"),
        (["drop"], "audio incomplete"),
        (["short"], "audio incomplete"),
    ],
)
def test_each_edge_fault_falls_back_to_gemini_tts_with_aligned_words(
    edge: EdgeTtsServer, gemini, ctx, owner, tmp_path: Path, faults: list[str], kind: str
) -> None:
    edge.faults.push(*faults)
    out = tmp_path / "voice.wav"
    track = _chain().synthesize(TEXT, "en-us", out, VoiceSettings(gemini_voice="Puck"), ctx)
    assert (track.provider, kind in track.fallback_from) == ("gemini-tts", True)
    [request] = _tts_requests(gemini)
    assert "Puck" in str(request.body)
    with wave.open(str(out), "rb") as wav:
        assert track.duration_s == pytest.approx(wav.getnframes() / wav.getframerate(), abs=0.01)
    assert [w.word for w in track.words] == spoken_words(TEXT)
    assert track.words[-1].end_s <= track.duration_s + 0.05
    book = assert_balanced(owner)
    assert book["spent"] > 0 and book["held"] == 0  # the fallback was paid, and settled


def test_when_gemini_fails_too_the_error_names_both_and_no_audio_is_left(
    edge: EdgeTtsServer, gemini, ctx, owner, tmp_path: Path
) -> None:
    edge.faults.push("no_audio")
    gemini.faults.push("safety")  # a block is final: no retry
    out = tmp_path / "voice.wav"
    with pytest.raises(VoiceSynthesisError) as err:
        _chain().synthesize(TEXT, "en-us", out, None, ctx)
    assert "Edge-TTS no audio" in str(err.value) and "then Gemini TTS" in str(err.value)
    assert not out.exists()  # nothing degraded is left for the pipeline
    assert_balanced(owner)


def test_the_fallback_needs_a_paid_call_context(edge: EdgeTtsServer, gemini, tmp_path) -> None:
    edge.faults.push("no_audio")
    with pytest.raises(VoiceSynthesisError, match="needs the step's paid-call context"):
        _chain().synthesize(TEXT, "en-us", tmp_path / "voice.wav")
    assert _tts_requests(gemini) == []  # nothing sent, nothing to pay


def test_a_single_403_is_retried_by_edge_tts_and_succeeds(
    edge: EdgeTtsServer, gemini, tmp_path: Path
) -> None:
    edge.faults.push("403")
    track = _chain().synthesize(TEXT, "en-us", tmp_path / "voice.wav")
    assert track.provider == "edge-tts" and len(track.words) == len(spoken_words(TEXT))
    assert _tts_requests(gemini) == []


def test_a_stalled_stream_is_cut_by_our_deadline(edge: EdgeTtsServer, tmp_path: Path) -> None:
    edge.faults.push("stall")
    started = time.monotonic()
    with pytest.raises(VoiceSynthesisError, match="Edge-TTS timeout"):
        _chain(edge_deadline_s=2.0).synthesize(TEXT, "en-us", tmp_path / "voice.wav")
    assert time.monotonic() - started < 10


def test_an_unreachable_server_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MDAME_EDGE_TTS_URL", "ws://127.0.0.1:9/edge/v1?TrustedClientToken=x")
    with pytest.raises(VoiceSynthesisError, match="Edge-TTS connection failed"):
        _chain().synthesize(TEXT, "en-us", tmp_path / "voice.wav")


def test_an_endpoint_without_a_query_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MDAME_EDGE_TTS_URL", "ws://127.0.0.1:9/edge/v1")
    with pytest.raises(VoiceSynthesisError, match="must contain '\\?'"):
        _chain().synthesize(TEXT, "en-us", tmp_path / "voice.wav")


def test_the_control_endpoint_injects_faults(edge: EdgeTtsServer, tmp_path: Path) -> None:
    import httpx

    reply = httpx.post(f"{edge.base_url}/_control/faults", json={"push": "no_audio"})
    assert reply.status_code == 200 and reply.json()["queued"] == ["no_audio"]
    assert httpx.post(f"{edge.base_url}/_control/faults", json={"push": "x"}).status_code == 400
    with pytest.raises(VoiceSynthesisError, match="no audio"):
        _chain().synthesize(TEXT, "en-us", tmp_path / "voice.wav")


# -- failure classes: what a later try can heal, and what needs an operator -------------------


@pytest.mark.parametrize(
    ("faults", "cause"),
    [
        (["403", "403"], "HTTP 403"),  # refused again after edge-tts's clock-skew correction
        (["drop"], "audio incomplete"),  # a cut stream: edge-tts raises nothing
        (["stall"], "the stream stalled"),
        (["no_audio"], "NoAudioReceived"),  # the voice is listed: a passing fault
    ],
)
def test_passing_faults_on_both_providers_halt_as_transient_naming_the_last_causes(
    edge: EdgeTtsServer, gemini, ctx, owner, tmp_path: Path, faults: list[str], cause: str
) -> None:
    edge.faults.push(*faults)
    gemini.outage = 503  # every Gemini TTS try of this run answers 503
    try:
        with pytest.raises(VoiceSynthesisError) as err:
            _chain(edge_deadline_s=2.0).synthesize(TEXT, "en-us", tmp_path / "v.wav", None, ctx)
    finally:
        gemini.outage = None
    assert err.value.permanent is False and err.value.fix == ""
    assert cause in str(err.value) and "then Gemini TTS" in str(err.value)
    assert "HTTP 503" in str(err.value)  # Gemini's own last cause
    assert_balanced(owner)


def test_an_unreachable_server_names_the_clients_own_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MDAME_EDGE_TTS_URL", "ws://127.0.0.1:9/edge/v1?TrustedClientToken=x")
    with pytest.raises(VoiceSynthesisError) as err:
        _chain().synthesize(TEXT, "en-us", tmp_path / "voice.wav")
    assert "ClientConnectorError: Cannot connect to host 127.0.0.1:9" in str(err.value)


def test_an_unknown_edge_voice_and_a_refused_gemini_call_are_permanent_with_the_fix(
    edge: EdgeTtsServer, gemini, ctx, owner, tmp_path: Path
) -> None:
    # The service answers a voice it does not have with no audio at all.
    edge.faults.push("no_audio")
    gemini.faults.push("400")
    settings = VoiceSettings(edge_voice="en-US-NobodyNeural", gemini_voice="Puck")
    with pytest.raises(VoiceSynthesisError) as err:
        _chain().synthesize(TEXT, "en-us", tmp_path / "voice.wav", settings, ctx)
    assert err.value.permanent is True
    assert "Edge-TTS unknown voice" in str(err.value) and "HTTP 400" in str(err.value)
    assert "tts: {edge_voice}" in err.value.fix and "tts.gemini_voice" in err.value.fix
    assert_balanced(owner)


def test_an_unknown_edge_voice_with_gemini_down_is_still_retried(
    edge: EdgeTtsServer, gemini, ctx, tmp_path: Path
) -> None:
    edge.faults.push("no_audio")
    gemini.outage = 503
    try:
        with pytest.raises(VoiceSynthesisError) as err:
            _chain().synthesize(
                TEXT,
                "en-us",
                tmp_path / "v.wav",
                VoiceSettings(edge_voice="en-US-NobodyNeural"),
                ctx,
            )
    finally:
        gemini.outage = None
    # Gemini may answer later: the voice can still be made without an operator.
    assert err.value.permanent is False and "unknown voice" in str(err.value)
