"""`make demo PROVIDERS=fakes` for one partition: the production providers (Gemini writer,
critic and safety, Edge-TTS, the httpx trend reader, the YouTube publisher) with their real
client libraries against the local protocol servers, end to end on a real PostgreSQL."""

from __future__ import annotations

import hashlib
from datetime import date

import dagster as dg

from fakes.demo import connect_demo_accounts, fake_services
from mdame_assets.partitions import partition_key
from mdame_assets.runs import whole_graph
from mdame_resources.providers.selection import providers_for_environment

DAY = date(2026, 11, 29)


def test_the_production_providers_publish_a_partition_through_the_local_servers(
    pipeline, monkeypatch, tmp_path
) -> None:
    with fake_services(tmp_path / "fakes") as services:
        for name, value in services.env.items():
            monkeypatch.setenv(name, value)
        pipeline.sync()
        connect_demo_accounts(services.channel, pipeline.state)
        resources = {**pipeline.resources, **providers_for_environment()}

        result = dg.materialize(
            whole_graph(),
            partition_key=str(partition_key(DAY, "science")),
            instance=pipeline.instance,
            resources=resources,
            raise_on_error=False,
        )

        assert result.success, [e.message for e in result.all_events if e.is_failure]
        (script,) = pipeline.state.list_work_units("script")
        assert script.state == "published"
        assert script.payload["provider"] == "GeminiScriptWriter"
        (track,) = pipeline.state.list_work_units("voice_track")
        assert track.payload["provider"] == "edge-tts" and track.payload["words"]
        render = pipeline.state.get_work_unit("render", script.result["render_id"])
        (video,) = services.channel.videos()
        assert script.result["video_ids"] == [video["id"]]
        sent = services.channel.video_bytes(video["id"])
        assert hashlib.sha256(sent).hexdigest() == render.payload["sha256"]
        (spent,) = pipeline.state._select(
            "SELECT coalesce(sum(actual_micros), 0) FROM mdame.budget_ledger"
            " WHERE state = 'settled'"
        )[0]
        assert spent > 0  # the model calls were paid through the ledger
