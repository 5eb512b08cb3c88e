"""HALT and its backoff retry through the real asset graph: the production voice chain with the
real edge-tts client against the local Edge-TTS server, real PostgreSQL, ffmpeg and espeak-ng.

While Edge refuses every handshake and Gemini TTS (the fallback, against the local Gemini
server) is down, the script halts: nothing is rendered or published, and an alert event is
recorded. A run before the backoff leaves it halted; once the backoff has expired (the row is
moved, then the backoff setting is shortened: no sleeping) each run retries voice only and
halts again, past the four halts after which the script used to fail for good; once both
providers answer again the voice is made and the script is published.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from typing import Any

import dagster as dg
import psycopg
import pytest

from fakes import gemini as fake_gemini
from fakes.edge_tts import running
from mdame_cli.runs import whole_graph
from mdame_core.state import RetryNotDue
from mdame_domain.outbox import list_outbox
from mdame_resources.notify import read_outbox
from mdame_resources.providers.voice import EdgeGeminiVoiceChain
from mdame_runtime.partition_keys import partition_key

DAY = date(2026, 11, 29)


def _run(
    pipeline, key: str, selection: str | dg.AssetSelection | None = None
) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        whole_graph(),
        selection=selection,
        partition_key=key,
        instance=pipeline.instance,
        resources=pipeline.resources,
        raise_on_error=False,
    )


@contextmanager
def _voice_chain(pipeline, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any]]:
    """The registry synced, the production voice chain against the local Edge-TTS and Gemini
    servers, Edge refusing every handshake (a token change), and a retry window still open
    today for DAY, which is in the past."""
    pipeline.sync()
    with running() as edge, fake_gemini.running() as gemini:
        monkeypatch.setenv("MDAME_EDGE_TTS_URL", edge.wss_url)
        monkeypatch.setenv("MDAME_GEMINI_BASE_URL", gemini.base_url)
        pipeline.resources["voice"] = EdgeGeminiVoiceChain(gemini_api_key="test-key-not-secret")
        days_ago = (datetime.now(UTC).date() - DAY).days
        monkeypatch.setenv("MDAME_RETRY_WINDOW_DAYS", str(max(1, days_ago + 1)))
        edge.set_fault("403")
        yield edge, gemini


def _count(pipeline, table: str) -> int:
    return pipeline.state._select(f"SELECT count(*) FROM mdame.{table}")[0][0]


def test_halted_script_is_not_published_and_is_retried_after_the_backoff(
    pipeline, fresh_db, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = str(partition_key(DAY, "science"))
    with _voice_chain(pipeline, monkeypatch) as (edge, gemini):
        monkeypatch.setenv("MDAME_GEMINI_TRANSIENT_TRIES", "1")  # one Gemini try per run
        gemini.outage = 503  # ... and the fallback is down too

        halted_run = _run(pipeline, key)

        assert not halted_run.success
        (failed_step,) = halted_run.get_step_failure_events()
        assert failed_step.step_key == "voice_tracks"
        (script,) = pipeline.state.list_work_units("script")
        assert script.state == "halted" and "403" in script.result["reason"]
        assert "then Gemini TTS" in script.result["reason"] and "503" in script.result["reason"]
        events = pipeline.state.list_events("script", script.id)
        assert [e.detail["halts"] for e in events if e.event == "voice_halted"] == [1]
        assert _count(pipeline, "renders") == 0 and _count(pipeline, "publications") == 0
        assert list_outbox(pipeline.home / "outbox") == []
        # The operator is told (issue 12): offline, through the outbox notifier.
        alerts = pipeline.state._select("SELECT dimension_slug, cause FROM mdame.alerts")
        assert alerts == [("science", "halt")]
        (alert,) = read_outbox(pipeline.home / "outbox", "science")
        assert alert["text"].startswith("MD-AME alert · science · HALT")
        assert "voice synthesis failed" in alert["text"]

        early = _run(pipeline, key)  # the backoff has not expired
        assert early.success
        assert pipeline.state.get_work_unit("script", script.id).state == "halted"
        assert _count(pipeline, "renders") == 0 and list_outbox(pipeline.home / "outbox") == []
        with pytest.raises(RetryNotDue):
            from mdame_pipeline.locks import held_lock

            with held_lock(pipeline.state, "science", "test") as fenced:
                fenced.retry_halted_voice(script.id)
        assert pipeline.state.partitions_with_voice_retry_due() == []

        with psycopg.connect(fresh_db.owner, autocommit=True) as owner:
            owner.execute(
                "UPDATE mdame.voice_halts SET next_retry_at = now() - interval '1 second'"
            )
        (due,) = pipeline.state.partitions_with_voice_retry_due()  # the sensor's read
        assert (due.partition_date, due.dimension_slug) == (DAY, "science")
        scenes_before = _count(pipeline, "scenes")

        # The outage goes on: every retry (backoffs shortened) halts again, past the 4th halt.
        monkeypatch.setenv("MDAME_VOICE_BACKOFF_S", "0.001")
        monkeypatch.setenv("MDAME_VOICE_BACKOFF_MAX_S", "0.001")
        for halts in range(2, 6):
            again = _run(pipeline, key, "voice_tracks")
            assert not again.success
            halt = pipeline.state.get_voice_halt(script.id)
            assert (halt.halts, halt.permanent) == (halts, False)
            assert pipeline.state.get_work_unit("script", script.id).state == "halted"
        assert halt.next_retry_at is not None  # 0009 had failed the script at halt 4

        edge.set_fault(None)  # both providers answer again
        gemini.outage = None
        retried = _run(pipeline, key)

        assert retried.success, [e.message for e in retried.all_events if e.is_failure]
        script = pipeline.state.get_work_unit("script", script.id)
        assert script.state == "published"
        assert _count(pipeline, "scenes") == scenes_before  # voice only: nothing upstream redone
        (track,) = pipeline.state.list_work_units("voice_track")
        assert track.payload["provider"] == "edge-tts" and track.payload["words"]
        assert len(list_outbox(pipeline.home / "outbox")) == 1
        assert any(r.fault is None for r in edge.requests)


def test_a_permanent_cause_fails_the_script_at_once_with_one_alert_naming_the_fix(
    pipeline, fresh_db, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline.sync()
    with psycopg.connect(fresh_db.owner, autocommit=True) as owner:
        owner.execute(
            """UPDATE mdame.dimensions
                  SET config = jsonb_set(config, '{tts}', config -> 'tts'
                               || '{"edge_voice": "en-US-NobodyNeural"}')
                WHERE slug = 'science'"""
        )
    key = str(partition_key(DAY, "science"))
    with running() as edge, fake_gemini.running() as gemini:
        monkeypatch.setenv("MDAME_EDGE_TTS_URL", edge.wss_url)
        monkeypatch.setenv("MDAME_GEMINI_BASE_URL", gemini.base_url)
        days_ago = (datetime.now(UTC).date() - DAY).days
        monkeypatch.setenv("MDAME_RETRY_WINDOW_DAYS", str(max(1, days_ago + 1)))  # still open
        pipeline.resources["voice"] = EdgeGeminiVoiceChain(gemini_api_key="test-key-not-secret")
        edge.set_fault("no_audio")  # what the service answers a voice it does not have
        gemini.faults.push("400")  # ... and Gemini refuses the request

        result = _run(pipeline, key)

    assert not result.success
    (script,) = pipeline.state.list_work_units("script")
    assert script.state == "failed" and "failed for good" in script.result["error"]
    halt = pipeline.state.get_voice_halt(script.id)
    assert (halt.halts, halt.permanent, halt.next_retry_at) == (1, True, None)
    assert pipeline.state.partitions_with_voice_retry_due() == []  # nothing to retry
    # One HALT alert (Gemini's own refusal alert comes beside it).
    (alert,) = [a for a in read_outbox(pipeline.home / "outbox", "science") if "HALT" in a["text"]]
    assert "failed for good" in alert["text"] and "unknown voice" in alert["text"]
    assert "tts: {edge_voice}" in alert["text"] and "tts.gemini_voice" in alert["text"]


def test_a_killed_runs_gemini_call_in_flight_makes_the_voice_wait_not_halt(
    pipeline, fresh_db, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Edge refuses, and the Gemini TTS fallback's call of this script was submitted by a run
    that was killed: its answer may come until its lease ends. The voice step waits (no HALT,
    no alert, the run succeeds and says until when, the demo and the hop sensor read the same
    time), and once the lease is over the next run voices the script through Gemini and
    publishes it."""
    from mdame_assets.defs.hops import awaiting_publishing
    from mdame_domain.dimensions import load_dimension_file
    from mdame_domain.idempotency import idempotency_key
    from mdame_pipeline.dimension_registry import DIMENSIONS_DIR
    from mdame_pipeline.locks import held_lock

    key = str(partition_key(DAY, "science"))
    with _voice_chain(pipeline, monkeypatch):
        before_voice = dg.AssetSelection.all() - dg.AssetSelection.groups("publishing")
        assert _run(pipeline, key, before_voice).success

        # What a run killed inside the Gemini TTS call left: its attempt, under a lease.
        (script,) = pipeline.state.list_work_units("script")
        dimension = load_dimension_file(DIMENSIONS_DIR / "science.yaml")
        model = dimension.gemini_tts_model
        text = script.payload["script"]["text"]
        work = idempotency_key("gemini-tts", "science", model, dimension.tts.gemini_voice, "", text)
        with held_lock(pipeline.state, "science", "killed-run") as killed:
            start = killed.begin_paid_call(
                "science", work, f"gemini:{model}", "0" * 64, 1000, None, 2, 600, {"model": model}
            )
            assert start.action == "submit"

        waited = _run(pipeline, key)

        assert waited.success, [e.message for e in waited.all_events if e.is_failure]
        assert pipeline.state.get_work_unit("script", script.id).state == "voice_queued"
        assert pipeline.state._select("SELECT count(*) FROM mdame.voice_halts")[0][0] == 0
        assert pipeline.state._select("SELECT count(*) FROM mdame.alerts")[0][0] == 0
        [voice] = waited.asset_materializations_for_node("voice_tracks")
        [words] = voice.metadata["waiting"].value.values()
        until, what = pipeline.state.partition_wait(script.payload["dimension_id"], DAY)
        assert what == "an interrupted Gemini call" and until is not None
        assert f"until {until.astimezone(UTC):%H:%M:%S} UTC" in words
        [work_item] = pipeline.state.partitions_with_scripts_in(awaiting_publishing(pipeline.state))
        assert work_item.waits_until == until

        with psycopg.connect(fresh_db.owner, autocommit=True) as owner:
            owner.execute(
                "UPDATE mdame.provider_attempts SET lease_expires_at = now() - interval '1 second'"
            )
        voiced = _run(pipeline, key)

        assert voiced.success, [e.message for e in voiced.all_events if e.is_failure]
        assert pipeline.state.get_work_unit("script", script.id).state == "published"
        (track,) = pipeline.state.list_work_units("voice_track")
        assert track.payload["provider"] == "gemini-tts"
        assert pipeline.state.partition_wait(script.payload["dimension_id"], DAY) == (None, "")
