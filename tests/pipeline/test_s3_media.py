"""The offline pipeline with its media in an S3 bucket (moto's server) instead of a folder."""

from __future__ import annotations

from datetime import date

import dagster as dg

from mdame_cli.runs import whole_graph
from mdame_domain.media_profile import media_profile
from mdame_domain.media_store import parse_media_uri
from mdame_domain.outbox import list_outbox
from mdame_domain.probe import probe_media
from mdame_runtime.partition_keys import partition_key

DAY = date(2026, 11, 29)


def _key(uri: str) -> str:
    sha, suffix = parse_media_uri(uri)
    return f"media/{sha[:2]}/{sha}{suffix}"


def test_a_partition_publishes_with_its_media_in_the_bucket(pipeline, s3_bucket, monkeypatch):
    s3_bucket.apply(monkeypatch)  # MDAME_MEDIA_URL=s3://<bucket>/media?endpoint_url=... + AWS_*
    pipeline.sync()

    result = dg.materialize(
        whole_graph(),
        partition_key=str(partition_key(DAY, "science")),
        instance=pipeline.instance,
        resources=pipeline.resources,
        raise_on_error=False,
    )

    assert result.success, [e.message for e in result.all_events if e.is_failure]
    assert all(c.passed for c in result.get_asset_check_evaluations())
    state = pipeline.state
    [script] = state.list_work_units("script")
    assert script.state == "published"
    keys = set(s3_bucket.keys())
    scenes = state.list_work_units("scene", script_id=script.id)
    voice = state.get_work_unit("voice_track", int(script.result["voice_track_id"]))
    render = state.get_work_unit("render", int(script.result["render_id"]))
    assert scenes and voice is not None and render is not None
    stored = [s.result["uri"] for s in scenes] + [voice.payload["uri"], render.payload["uri"]]
    assert {_key(uri) for uri in stored} <= keys  # every row names an object in the bucket
    assert s3_bucket.body(_key(voice.payload["uri"]))[:4] == b"RIFF"
    assert any(k.startswith("media/derived/render/") for k in keys)
    # Nothing went to the local store; readers' verified copies are in the bounded cache.
    assert not (pipeline.home / "media").exists()
    assert any((pipeline.home / "media-cache").rglob("*.mp4"))
    [entry] = list_outbox(pipeline.home / "outbox")
    assert probe_media(str(entry.video_path)).width == media_profile().width
