"""What the asset-check tests share: the partition, graph selections, reading a run's outcome,
misbehaving providers, and real-ffmpeg ways to spoil stored media.

The providers here stand in for external services that misbehave (a script writer that ignores
the hook threshold, a TTS voice that returns silence). Our own code, the database and ffmpeg
all run for real.
"""

from __future__ import annotations

import dataclasses
import subprocess
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg

from mdame_cli.runs import whole_graph
from mdame_domain.dimensions import VoiceSettings
from mdame_domain.voice import VoiceTrack
from mdame_domain.writer import Script, TopicBrief, write_script
from mdame_resources.providers.voice import EspeakVoice
from mdame_resources.providers.writer import LocalScriptWriter

DAY = date(2026, 11, 29)
DIMENSION = "science"
KEY = f"{DAY.isoformat()}|{DIMENSION}"
ORDER = (
    "trends",
    "topics",
    "scripts",
    "scene_plan",
    "scene_clips",
    "voice_tracks",
    "renders",
    "publications",
)


# ------------------------------------------------------------------------------------------
# Selections and run outcomes
# ------------------------------------------------------------------------------------------
def _asset_of(item: Any) -> str:
    if isinstance(item, dg.AssetChecksDefinition):
        # A multi-asset check (render_quality) has several keys, all on one asset.
        [asset] = {check_key.asset_key.to_user_string() for check_key in item.check_keys}
        return asset
    return item.key.to_user_string()


def graph(upto: str = "publications", only: tuple[str, ...] = ()) -> list[Any]:
    """Both code locations' assets through `upto` (or exactly `only`), with their checks."""
    wanted = set(only) if only else set(ORDER[: ORDER.index(upto) + 1])
    return [item for item in whole_graph() if _asset_of(item) in wanted]


def materialized(result: dg.ExecuteInProcessResult) -> set[str]:
    return {
        event.asset_key.to_user_string()
        for event in result.get_asset_materialization_events()
        if event.asset_key is not None
    }


def steps(result: dg.ExecuteInProcessResult, event_type: str) -> set[str]:
    """Step keys that emitted the event type (STEP_SUCCESS, STEP_FAILURE, STEP_SKIPPED)."""
    return {e.step_key for e in result.all_events if e.event_type_value == event_type}


def not_started(result: dg.ExecuteInProcessResult, *assets: str) -> list[str]:
    """Of `assets`, those whose step never started: the evidence that a gate held them back."""
    started = steps(result, "STEP_START")
    return [a for a in assets if a not in started]


def evaluation(result: dg.ExecuteInProcessResult, check_name: str):
    [found] = [c for c in result.get_asset_check_evaluations() if c.check_name == check_name]
    return found


def problems(found) -> list[str]:
    return list(found.metadata["problems"].value)


def failure_message(result: dg.ExecuteInProcessResult, step_key: str) -> str:
    """The user-code error of a failed step (Dagster wraps it)."""
    for event in result.all_events:
        if event.event_type_value == "STEP_FAILURE" and event.step_key == step_key:
            error = event.event_specific_data.error
            messages = []
            while error is not None:
                messages.append(error.message)
                error = error.cause
            return "\n".join(messages)
    raise AssertionError(f"step {step_key} did not fail")


# ------------------------------------------------------------------------------------------
# Misbehaving providers
# ------------------------------------------------------------------------------------------
class ThresholdIgnoringWriter(LocalScriptWriter):
    """A writer that ships its weakest hook instead of retrying when no hook clears the
    threshold (the contract says: return None and let the caller retry)."""

    def write(self, brief: TopicBrief, attempt: int, threshold: float) -> Script | None:
        script = write_script(brief, attempt, threshold=0.0)
        assert script is not None
        hook, score = min(script.hook_candidates, key=lambda c: c[1])
        text = " ".join([hook, *script.body_sentences, script.call_to_action])
        return dataclasses.replace(
            script, hook=hook, hook_score=score, text=text, word_count=len(text.split())
        )


class TerseWriter(LocalScriptWriter):
    """A writer that returns a good hook but cuts the body to one sentence (a model that
    stopped early): the script is far under the 80-word minimum."""

    def write(self, brief: TopicBrief, attempt: int, threshold: float) -> Script | None:
        script = write_script(brief, attempt, threshold)
        if script is None:
            return None
        body = script.body_sentences[:1]
        text = " ".join([script.hook, *body, script.call_to_action])
        return dataclasses.replace(
            script, body_sentences=body, text=text, word_count=len(text.split())
        )


class SilentVoice(EspeakVoice):
    """A TTS that reports words and timings but writes digital silence (a real failure mode
    of hosted TTS: a 200 response with an empty stream)."""

    def synthesize(
        self,
        text: str,
        voice: str,
        out_wav: Path,
        settings: VoiceSettings | None = None,
        ctx: Any = None,
    ) -> VoiceTrack:
        track = super().synthesize(text, voice, out_wav, settings, ctx)
        silence_like(out_wav)
        return track


# ------------------------------------------------------------------------------------------
# Spoiling stored media with real ffmpeg
# ------------------------------------------------------------------------------------------
def _ffmpeg(*args: str) -> None:
    subprocess.run(
        ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", *args],
        check=True,
        timeout=120,
    )


def duration_s(path: Path) -> float:
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", str(path)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return float(out.stdout.strip())


def silence_like(wav: Path) -> None:
    """Replaces a WAV with digital silence of the same length, sample rate and channels."""
    temp = wav.with_name(f"silent-{wav.name}")
    _ffmpeg("-i", str(wav), "-af", "volume=0", "-c:a", "pcm_s16le", str(temp))
    temp.replace(wav)


def replace_with_small_silent_video(path: Path) -> None:
    """Overwrites a stored render with a real but wrong MP4: 320x240, 4 s, no audio track."""
    temp = path.with_name(f"wrong-{path.name}")
    source = "testsrc=size=320x240:rate=25:duration=4"
    _ffmpeg("-f", "lavfi", "-i", source, "-c:v", "libx264", "-preset", "ultrafast", str(temp))
    path.chmod(0o644)
    temp.replace(path)


def remux_with_new_title(path: Path) -> None:
    """Rewrites a stored MP4 with the same streams but a changed title tag: it probes the same
    and plays the same, yet its bytes (and SHA-256) are not the ones that were approved."""
    temp = path.with_name(f"remux-{path.name}")
    _ffmpeg("-i", str(path), "-map", "0", "-c", "copy", "-metadata", "title=edited", str(temp))
    path.chmod(0o644)
    temp.replace(path)


def truncate_half(path: Path) -> None:
    """Bit rot / a torn copy: the file keeps its name but loses its second half."""
    path.chmod(0o644)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def stored_path(store: Any, uri: str) -> Path:
    path = store.path_for(uri)
    assert path.exists(), f"{uri} should be stored before the test spoils it"
    return path
