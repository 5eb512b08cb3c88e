"""The whole asset graph for one partition on the real PostgreSQL, ffmpeg and espeak-ng."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import dagster as dg

from mdame_cli.runs import whole_graph
from mdame_domain import timing
from mdame_domain.outbox import list_outbox
from mdame_domain.probe import frame_signature, frames_differ, mean_volume_db, probe_media
from mdame_runtime.partition_keys import partition_key

DAY = date(2026, 11, 29)
TABLES = (
    "trends",
    "topics",
    "scripts",
    "scenes",
    "voice_tracks",
    "renders",
    "publications",
    "jobs",
    "scene_cache",
    "quota_ledger",
    "provider_attempts",
    "reviews",
)


def materialize(pipeline, key: str) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        whole_graph(),
        partition_key=key,
        instance=pipeline.instance,
        resources=pipeline.resources,
        raise_on_error=False,
    )


def row_counts(pipeline) -> dict[str, int]:
    return {t: pipeline.state._select(f"SELECT count(*) FROM mdame.{t}")[0][0] for t in TABLES}


def outbox_files(home: Path) -> dict[str, int]:
    return {
        str(p.relative_to(home)): p.stat().st_mtime_ns
        for p in (home / "outbox").rglob("*")
        if p.is_file()
    }


def test_one_partition_end_to_end_then_rerun_is_a_no_op(pipeline, monkeypatch):
    # The product's frame: the one pipeline test that renders at full size.
    monkeypatch.setenv("MDAME_MEDIA_PROFILE", "shorts")
    pipeline.sync()
    key = str(partition_key(DAY, "science"))
    timing.reset()

    result = materialize(pipeline, key)

    assert result.success, [e.message for e in result.all_events if e.is_failure]
    # The demo's time breakdown: each category measured where its work ran.
    spent = timing.totals()
    assert all(spent.get(name, 0.0) > 0 for name in timing.CATEGORIES), spent
    checks = result.get_asset_check_evaluations()
    assert {c.check_name for c in checks} >= {
        "topics_safety",
        "hook_score",
        "scene_count",
        "clips_present",
        "voice_present",
        "render_probe",
        "caption_layout",
        "text_on_screen",
        # issue 11: one gate per property, all passed by a real render
        "render_format",
        "render_duration",
        "render_loudness",
        "render_black",
        "render_freeze",
        "render_silence",
        "render_av_sync",
        "render_scenes",
    }
    assert all(c.passed for c in checks)
    entries = list_outbox(pipeline.home / "outbox")
    assert len(entries) == 1 and entries[0].folder.parent.name == "science"
    video = str(entries[0].video_path)
    probe = probe_media(video)
    assert (probe.width, probe.height) == (1080, 1920)
    assert (probe.video_codec, probe.audio_codec) == ("h264", "aac")
    assert 15.0 <= probe.duration_s <= 60.0
    assert mean_volume_db(video) > -40.0
    assert frames_differ(frame_signature(video, 1.0), frame_signature(video, probe.duration_s - 2))
    script = pipeline.state.list_work_units("script")[0]
    assert script.state == "published"
    assert pipeline.state.list_work_units("publication")[0].result["video_id"] == (
        entries[0].video_id
    )

    before, files = row_counts(pipeline), outbox_files(pipeline.home)
    again = materialize(pipeline, key)

    assert again.success
    assert row_counts(pipeline) == before
    assert outbox_files(pipeline.home) == files
