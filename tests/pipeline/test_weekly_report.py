"""Acceptance (issue 12, analytics + Strategic Auditor): the demo's partition published on the
offline providers, its statistics read, and the week's report made with its plots, stored, shown
as Dagster metadata and delivered to Telegram (the local Bot API server, through a 429).

It starts from the session's `rendered` snapshot (science 2026-11-29, a Sunday, approved render)
so only publications, video_stats and strategic_audit run here.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import dagster as dg
import pytest

from mdame_assets.defs.analytics.assets import video_stats
from mdame_assets.defs.auditor.assets import strategic_audit
from mdame_assets.defs.publications.assets import publications
from mdame_cli.reporting import export_report
from mdame_core.state import StateStore
from mdame_domain.audit import Week
from mdame_domain.report_plots import PNG_SIGNATURE
from mdame_resources.media import MediaStoreResource
from mdame_resources.notify import OutboxNotifier, TelegramNotifier
from mdame_resources.providers.selection import offline_providers
from mdame_resources.state import StateStoreResource, close_clients
from mdame_runtime.partition_keys import DIMENSION_PARTITION, partition_key, week_partition_key
from tests import scratch_db
from tests.snapshots import SNAPSHOT_DAY as RENDERED_DAY
from tests.snapshots import SNAPSHOT_DIMENSION as RENDERED_DIMENSION
from tests.telegramkit import GLOBAL_CHAT, telegram_env, telegram_server  # noqa: F401 - fixtures

WEEK = Week.of(RENDERED_DAY)
KEYS = (
    "videos_published", "stage_failure_rate", "halt_rate", "hook_scores", "hook_pass_rate",
    "safety_rejections", "spend", "quota_used", "scene_cache_hit_rate", "gpu_seconds",
    "stage_latency_s", "views_per_video", "likes_per_video", "views_trend", "category_views",
    "trend_volume", "disk_bytes",
)  # fmt: skip


@pytest.fixture
def published(rendered, template_db: str, tmp_path: Path) -> Iterator[tuple]:
    """A private copy of the rendered partition, published to the outbox."""
    db = scratch_db.create_database(rendered.db_name, "_report")
    home = tmp_path / "home"
    shutil.copytree(rendered.home, home, symlinks=True)
    try:
        # MDAME_HOME also locates the local cluster: restored before the database is dropped.
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("MDAME_HOME", str(home))
            mp.delenv("MDAME_MEDIA_ROOT", raising=False)
            state = StateStore(db.app, env="dev")
            try:
                with dg.instance_for_test() as instance:
                    instance.add_dynamic_partitions(DIMENSION_PARTITION, [RENDERED_DIMENSION])
                    key = partition_key(RENDERED_DAY, RENDERED_DIMENSION)
                    assert _materialize([publications], key, instance, db.app).success
                    yield state, instance, db, home
            finally:
                close_clients()
                state.close()
    finally:
        scratch_db.drop_database(db.name)


def _materialize(assets, key, instance, app_url: str, **overrides) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        assets,
        partition_key=str(key),
        instance=instance,
        resources={
            "state": StateStoreResource(database_url=app_url),
            "media": MediaStoreResource(),
            **offline_providers(),
            **overrides,
        },
        raise_on_error=False,
    )


def test_the_weekly_report_of_the_demo_partition(published, telegram_env) -> None:  # noqa: F811
    state, instance, db, home = published
    day_key = partition_key(RENDERED_DAY, RENDERED_DIMENSION)
    for _ in range(2):  # a re-read of the same day writes the same rows
        stats = _materialize([video_stats], day_key, instance, db.app)
        assert stats.success
    dim = state.get_dimension(RENDERED_DIMENSION)
    rows = state.video_stats(dim.id, WEEK.start, WEEK.end)
    assert len(rows) >= 1 and all(r.day == RENDERED_DAY and r.views > 0 for r in rows)
    assert all(0 < r.likes < r.views for r in rows)

    telegram_env.fail_next(1, 429, retry_after=1)  # the first call is throttled
    week_key = week_partition_key(WEEK.start, RENDERED_DIMENSION)
    notifier = TelegramNotifier()
    audit = _materialize([strategic_audit], week_key, instance, db.app, notifier=notifier)
    assert audit.success, [e.message for e in audit.all_events if e.is_failure]

    # Stored: one row per dimension and week, the metrics and the plots in the media store.
    report = state.get_report(RENDERED_DIMENSION, WEEK.start)
    assert report is not None and report.revision == 1
    metrics = report.metrics
    assert set(KEYS) <= set(metrics)
    assert metrics["videos_published"] == len(rows) >= 1
    assert metrics["views_per_video"] == pytest.approx(sum(r.views for r in rows) / len(rows))
    assert metrics["hook_scores"]["n"] >= 1 and metrics["hook_scores"]["min"] >= 0.7
    assert metrics["stage_latency_s"]["renders"]["p50"] is not None
    assert metrics["stage_failure_rate"]["renders"] == 0.0
    assert metrics["scene_cache_hit_rate"] is not None
    assert metrics["quota_used"] == 0  # the outbox is not a metered channel
    assert report.markdown.startswith(f"# Strategic Auditor: {RENDERED_DIMENSION}, week")
    [publication] = state.list_work_units("publication")
    sheet_name = f"sheet-{publication.id}.jpg"
    names = [i["name"] for i in report.images]
    assert names == ["views.png", "latency.png", "categories.png", sheet_name]
    store = MediaStoreResource().store()
    for image in report.images[:3]:
        png = store.verified_path(image["uri"], image["sha256"]).read_bytes()
        assert png.startswith(PNG_SIGNATURE) and len(png) > 5_000
        assert f"]({image['uri']})" in report.markdown
    # The published video's contact sheet: its render's, in the report's own section.
    render = state.get_work_unit("render", publication.refs["render_id"])
    sheet = report.images[3]
    assert (sheet["uri"], sheet["sha256"]) == (
        render.payload["contact_sheet_uri"],
        render.payload["contact_sheet_sha256"],
    )
    jpeg = store.verified_path(sheet["uri"], sheet["sha256"]).read_bytes()
    assert jpeg.startswith(b"\xff\xd8\xff")
    assert f"![video {publication.id}, published {RENDERED_DAY}]({sheet['uri']})" in (
        report.markdown
    )
    assert "## Contact sheets" in report.markdown

    # Dagster metadata: the Markdown with the plots and the sheet inline (data URIs the UI
    # renders).
    [mat] = audit.asset_materializations_for_node("strategic_audit")
    text = mat.metadata["report"].value
    inline = re.findall(r"\]\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", text)
    assert len(inline) == 3 and all(base64.b64decode(b).startswith(PNG_SIGNATURE) for b in inline)
    [inline_sheet] = re.findall(r"\]\(data:image/jpeg;base64,([A-Za-z0-9+/=]+)\)", text)
    assert base64.b64decode(inline_sheet) == jpeg
    assert mat.metadata["contact_sheets"].value == 1

    # Telegram: the text (<= 4,096 per message), then one photo per plot (caption <= 1,024),
    # delivered although the first request got a 429.
    throttled = [r for r in telegram_env.requests if r.status == 429]
    assert len(throttled) == 1
    messages, photos = telegram_env.messages, telegram_env.photos
    assert messages and all(len(m.fields["text"]) <= 4096 for m in messages)
    assert "Strategic Auditor" in messages[0].fields["text"]
    assert all(m.fields["chat_id"] == GLOBAL_CHAT for m in messages)
    assert len(photos) == 3
    for photo in photos:
        assert 0 < len(photo.fields["caption"]) <= 1024
        [(_, png)] = photo.files.values()
        assert png.startswith(PNG_SIGNATURE)

    # A re-run replaces the week's report; the offline notifier writes to the outbox.
    again = _materialize([strategic_audit], week_key, instance, db.app, notifier=OutboxNotifier())
    assert again.success
    assert state.get_report(RENDERED_DIMENSION, WEEK.start).revision == 2
    lines = (home / "outbox" / "telegram" / f"{RENDERED_DIMENSION}.jsonl").read_text().splitlines()
    assert len(lines) >= 4 and "Strategic Auditor" in json.loads(lines[0])["text"]
    exported = export_report(state, RENDERED_DIMENSION, WEEK, home / "reports")
    assert exported is not None and (exported.parent / f"{RENDERED_DIMENSION}-views.png").exists()
    copied = exported.parent / f"{RENDERED_DIMENSION}-{sheet_name}"
    assert copied.read_bytes() == jpeg and f"]({copied.name})" in exported.read_text()
    assert date.fromisoformat(metrics["week_end"]) == RENDERED_DAY
