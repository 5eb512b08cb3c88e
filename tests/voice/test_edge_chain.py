"""EdgeGeminiVoiceChain with the real edge-tts client against the local Edge-TTS server.

Every fault ends in the fallback (here: its clear 'not wired' VoiceSynthesisError naming the
Edge failure), never in accepted audio; a healthy run gives a WAV whose word timings are the
server's own.
"""

from __future__ import annotations

import time
import wave
from collections.abc import Iterator
from pathlib import Path

import pytest

from mdame_domain.dimensions import VoiceSettings
from mdame_domain.speech import spoken_words
from mdame_domain.voice import VoiceSynthesisError, VoiceTrack
from mdame_fakes.edge_tts import EdgeTtsServer, running
from mdame_resources.providers.voice import EdgeGeminiVoiceChain, EdgeTtsFailure

TEXT = (
    "Scientists found a planet where it rains glass sideways. Winds there beat the speed of "
    "sound. Would you still visit it? Follow for more space facts every day."
)


@pytest.fixture(scope="module")
def edge() -> Iterator[EdgeTtsServer]:
    with running(stall_s=30.0) as server:
        yield server


@pytest.fixture(autouse=True)
def _clean(edge: EdgeTtsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    edge.faults.clear()
    monkeypatch.setenv("MDAME_EDGE_TTS_URL", edge.wss_url)


class RecordingChain(EdgeGeminiVoiceChain):
    """The chain with its fallback call site recorded (the test's only addition): it shows
    which Edge failure triggered the fallback, then raises as the unwired fallback does."""

    def _fallback(
        self, text: str, settings: VoiceSettings, out_wav: Path, failure: EdgeTtsFailure
    ) -> VoiceTrack:
        FALLBACKS.append(failure)
        return super()._fallback(text, settings, out_wav, failure)


FALLBACKS: list[EdgeTtsFailure] = []


def _chain(**overrides: object) -> RecordingChain:
    FALLBACKS.clear()
    return RecordingChain(gemini_api_key="test-key-not-secret", **overrides)  # type: ignore[arg-type]


def test_healthy_run_gives_a_wav_with_the_servers_word_timings(
    edge: EdgeTtsServer, tmp_path: Path
) -> None:
    out = tmp_path / "voice.wav"
    settings = VoiceSettings(edge_voice="en-GB-SoniaNeural", rate="+10%", pitch="-5Hz")
    track = _chain().synthesize(TEXT, "en-us", out, settings)
    assert FALLBACKS == []
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
def test_each_fault_falls_back_and_no_audio_is_accepted(
    edge: EdgeTtsServer, tmp_path: Path, faults: list[str], kind: str
) -> None:
    edge.faults.push(*faults)
    out = tmp_path / "voice.wav"
    with pytest.raises(VoiceSynthesisError, match="Gemini TTS fallback is not wired") as err:
        _chain().synthesize(TEXT, "en-us", out)
    assert [f.kind for f in FALLBACKS] == [kind]
    assert kind in str(err.value)
    assert not out.exists()  # nothing degraded is left for the pipeline


def test_a_single_403_is_retried_by_edge_tts_and_succeeds(
    edge: EdgeTtsServer, tmp_path: Path
) -> None:
    edge.faults.push("403")
    track = _chain().synthesize(TEXT, "en-us", tmp_path / "voice.wav")
    assert FALLBACKS == [] and len(track.words) == len(spoken_words(TEXT))


def test_a_stalled_stream_is_cut_by_our_deadline(edge: EdgeTtsServer, tmp_path: Path) -> None:
    edge.faults.push("stall")
    started = time.monotonic()
    with pytest.raises(VoiceSynthesisError, match="timeout"):
        _chain(edge_deadline_s=2.0).synthesize(TEXT, "en-us", tmp_path / "voice.wav")
    assert time.monotonic() - started < 10
    assert [f.kind for f in FALLBACKS] == ["timeout"]


def test_an_unreachable_server_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MDAME_EDGE_TTS_URL", "ws://127.0.0.1:9/edge/v1?TrustedClientToken=x")
    with pytest.raises(VoiceSynthesisError, match="connection failed"):
        _chain().synthesize(TEXT, "en-us", tmp_path / "voice.wav")
    assert [f.kind for f in FALLBACKS] == ["connection failed"]


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
