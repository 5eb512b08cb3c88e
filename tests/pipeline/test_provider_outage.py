"""A Gemini outage that lasts several runs of a partition, on the production path: the
production providers (Gemini writer, critic and safety, Edge-TTS, the httpx trend reader, the
YouTube publisher) with their real client libraries against the local protocol servers of
`make demo PROVIDERS=fakes`, runs made as the backfill makes them. Every run during the outage
fails transiently and leaves nothing held; the first run after Gemini recovers publishes the
partition's video, with no operator action in between, and every ledger equals the servers'
own counters."""

from __future__ import annotations

import hashlib
from datetime import date

import dagster as dg

from fakes.demo import connect_demo_accounts, fake_services
from mdame_cli.runs import whole_graph
from mdame_domain.video_metadata import publication_marker
from mdame_pipeline.dimension_registry import DIMENSIONS_DIR
from mdame_resources.providers.selection import providers_for_environment
from mdame_runtime.liveness import FINISHED
from mdame_runtime.partition_keys import partition_key
from mdame_runtime.run_outcomes import record_run_outcome
from tests.adminkit import as_admin
from tests.chaos.invariants import violations
from tests.chaos.provider_ledgers import InProcessChannel, budget_against_gemini

DAY = date(2026, 11, 29)
DIMENSION = "science"
OUTAGE_RUNS = 3


def _failure(result: dg.ExecuteInProcessResult) -> str:
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data.error is not None:
            error = event.step_failure_data.error
            while error.cause is not None:
                error = error.cause
            return f"{event.step_key}: {error.message}"
    return ""


def test_a_gemini_outage_of_several_runs_heals_on_the_first_run_after_it(
    pipeline, fresh_db, monkeypatch, tmp_path
) -> None:
    # The run's own transient tries, shortened: each outage run gives up within a second.
    monkeypatch.setenv("MDAME_GEMINI_TRANSIENT_TRIES", "2")
    monkeypatch.setenv("MDAME_GEMINI_BACKOFF_S", "0.01")
    monkeypatch.setenv("MDAME_GEMINI_BACKOFF_MAX_S", "0.05")
    with fake_services(tmp_path / "fakes") as services:
        for name, value in services.env.items():
            monkeypatch.setenv(name, value)
        # science alone, at the shortest length a niche may ask for: the render is most of
        # the test's time.
        niches = tmp_path / "dimensions"
        niches.mkdir()
        niche = (DIMENSIONS_DIR / f"{DIMENSION}.yaml").read_text(encoding="utf-8")
        (niches / f"{DIMENSION}.yaml").write_text(f"{niche}target_seconds: 30\n", "utf-8")
        assert pipeline.sync(niches) == [DIMENSION]
        connect_demo_accounts(services, as_admin(pipeline.state), niches)
        resources = {**pipeline.resources, **providers_for_environment()}
        key = str(partition_key(DAY, DIMENSION))

        def run() -> dg.ExecuteInProcessResult:
            result = dg.materialize(
                whole_graph(),
                partition_key=key,
                instance=pipeline.instance,
                resources=resources,
                raise_on_error=False,
            )
            # As the demo and the backfill do with no run status sensor: the run's end is
            # recorded on its pipeline_runs row.
            run = pipeline.instance.get_run_by_id(result.run_id)
            assert run is not None
            record_run_outcome(
                pipeline.state, run.run_id, run.status, "test_provider_outage", job=run.job_name
            )
            return result

        services.model.outage = 503
        for n in range(OUTAGE_RUNS):
            result = run()
            assert not result.success, f"outage run {n + 1} succeeded"
            cause = _failure(result)
            assert "failed transiently" in cause and "503" in cause, cause
            assert services.channel.videos() == []
            # Nothing is held between runs: each 503 released its reservation.
            held = budget_against_gemini(fresh_db.app, services.model.counters(), killed=False)
            assert held == []
        seen = services.model.counters()
        assert seen["by_status"] == {"503": seen["requests"]} and not seen["billed"]
        assert seen["requests"] >= 2 * OUTAGE_RUNS  # every run tried, and tried again

        services.model.outage = None
        result = run()

        assert result.success, _failure(result)
        (script,) = pipeline.state.list_work_units("script")
        assert script.state == "published"
        # Written by Gemini and spoken by Edge-TTS through their real clients.
        assert script.payload["provider"] == "GeminiScriptWriter"
        (track,) = pipeline.state.list_work_units("voice_track")
        assert track.payload["provider"] == "edge-tts" and track.payload["words"]
        render = pipeline.state.get_work_unit("render", script.result["render_id"])
        (publication,) = pipeline.state.list_work_units("publication")
        (video,) = services.channel.videos()
        assert publication_marker(publication.idempotency_key) in video["snippet"]["description"]
        assert script.result["video_ids"] == [video["id"]]
        sent = services.channel.video_bytes(video["id"])
        assert hashlib.sha256(sent).hexdigest() == render.payload["sha256"]

        # The budget ledger equals what Gemini billed; the quota ledger what YouTube charged.
        counters = services.model.counters()
        assert counters["billed"], "the recovery run made paid calls"
        assert budget_against_gemini(fresh_db.app, counters, killed=False) == []
        (account,) = [a for a in pipeline.state.list_accounts(DIMENSION) if a.active]
        channel_id = video["channel"]
        charged = services.channel.counters(channel_id)
        usage = pipeline.state.bucket_usage(account.id)
        assert usage.get("insert", (0, 0)) == (0, charged["insert"]) == (0, 1)
        assert usage.get("units", (0, 0)) == (0, charged["units"])
        # Every other invariant of the crash harness, the channel's quota counters included.
        channel = InProcessChannel(services.channel)
        media = pipeline.home / "media"
        assert violations(fresh_db.app, pipeline.home, media, channel=channel) == []

    # No lease, run or slot left behind.
    runs = pipeline.instance.get_run_records()
    assert len(runs) == OUTAGE_RUNS + 1
    assert all(r.dagster_run.status in FINISHED for r in runs)
    storage = pipeline.instance.event_log_storage
    for pool in storage.get_concurrency_keys():
        info = storage.get_concurrency_info(pool)
        assert not info.claimed_slots and not info.pending_steps, pool
    (running,) = pipeline.state._select(
        "SELECT count(*) FROM mdame.pipeline_runs WHERE status = 'running'"
    )[0]
    (leased,) = pipeline.state._select("SELECT count(*) FROM mdame.jobs WHERE state = 'running'")[0]
    assert running == leased == 0
