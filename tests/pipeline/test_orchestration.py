"""Registry sync, the schedule and the hop sensors, evaluated against a real instance and DB;
plus bad input: a malformed dimension file and a malformed feed."""

from __future__ import annotations

import shutil
from datetime import UTC, date, datetime
from pathlib import Path

import dagster as dg

from mdame_assets.defs.dimensions.sensors import dimension_registry_sensor
from mdame_assets.defs.publications.sensors import make_publishing_sensor
from mdame_assets.defs.scenes.assets import scene_plan
from mdame_assets.defs.schedules import daily_content_schedule
from mdame_assets.defs.scripts.assets import scripts
from mdame_assets.defs.topics.assets import topics
from mdame_assets.defs.trends.assets import trends
from mdame_assets.gpu_defs.clips.assets import scene_clips
from mdame_assets.gpu_defs.clips.sensors import make_scene_jobs_sensor
from mdame_pipeline.dimension_registry import DIMENSIONS_DIR, registry_drift, sync_registry
from mdame_resources.providers.visuals import VisualsResource
from mdame_runtime.executors import GPU_POOL
from mdame_runtime.partition_keys import partition_key
from tests.adminkit import as_admin

DAY = date(2026, 11, 29)
CONTENT = [trends, topics, scripts, scene_plan]


def copy_dimensions(tmp_path: Path, *slugs: str) -> Path:
    folder = tmp_path / "dimensions"
    folder.mkdir()
    for slug in slugs:
        shutil.copy(DIMENSIONS_DIR / f"{slug}.yaml", folder)
    return folder


def test_registry_sensor_turns_registered_dimensions_into_partitions(pipeline):
    """The sensor runs as the app role: it reads the registry, it cannot write it."""
    context = dg.build_sensor_context(
        instance=pipeline.instance, resources={"state": pipeline.resources["state"]}
    )
    result = dimension_registry_sensor(context)
    assert isinstance(result, dg.SensorResult)
    assert result.dynamic_partitions_requests == []  # nothing is registered yet
    assert pipeline.state.list_dimensions() == []

    sync_registry(as_admin(pipeline.state))  # `mdame dimensions sync`
    result = dimension_registry_sensor(context)
    [request] = result.dynamic_partitions_requests
    assert sorted(request.partition_keys) == ["cooking", "science", "tech"]
    accounts = pipeline.state.list_accounts("tech")
    assert [(a.platform, a.handle) for a in accounts] == [("youtube", "tech-in-60")]


def test_files_that_differ_from_the_registry_are_named_until_synced(pipeline, tmp_path):
    folder = copy_dimensions(tmp_path, "science", "tech", "cooking")
    sync_registry(as_admin(pipeline.state), folder)
    assert registry_drift(pipeline.state, folder).drift == ()

    text = (
        (folder / "tech.yaml").read_text().replace("daily_budget_usd: 1.00", "daily_budget_usd: 50")
    )
    (folder / "tech.yaml").write_text(text)
    shutil.copy(folder / "science.yaml", folder / "space.yaml")
    (folder / "space.yaml").write_text(
        (folder / "space.yaml")
        .read_text()
        .replace("slug: science", "slug: space")
        .replace("science-snacks", "space-snacks")
    )
    (folder / "cooking.yaml").unlink()
    view = registry_drift(pipeline.state, folder)
    assert view.active == ("cooking", "science", "tech")  # what is registered still runs
    assert sorted(view.drift) == [
        "dimension cooking is active but dimensions/cooking.yaml is gone: "
        "run `mdame dimensions sync`",
        "dimensions/space.yaml is not registered yet: run `mdame dimensions sync`",
        "dimensions/tech.yaml differs from its registration: run `mdame dimensions sync`",
    ]
    tech = pipeline.state.get_dimension("tech")
    assert tech is not None and tech.config["daily_budget_micros"] == 1_000_000  # unchanged

    sync_registry(as_admin(pipeline.state), folder)
    assert registry_drift(pipeline.state, folder).drift == ()


def test_malformed_dimension_file_is_reported_and_others_keep_working(pipeline, tmp_path):
    folder = copy_dimensions(tmp_path, "science", "tech")
    sync_registry(as_admin(pipeline.state), folder)
    broken = (folder / "tech.yaml").read_text().replace("videos_per_day: 1", "videos_per_day: lots")
    (folder / "tech.yaml").write_text(broken)
    (folder / "new.yaml").write_text("slug: new\ntitle: [unclosed\n")

    report = sync_registry(as_admin(pipeline.state), folder)

    assert report.active == ("science",)
    assert any("tech.yaml" in e and "'videos_per_day'" in e for e in report.errors)
    assert any("new.yaml" in e and "not valid YAML" in e for e in report.errors)
    # A typo does not stop a running niche: tech keeps its last good config and stays active.
    assert {d.slug for d in pipeline.state.list_dimensions(active_only=True)} == {"science", "tech"}


def test_removed_or_deactivated_dimension_stops_being_scheduled(pipeline, tmp_path):
    folder = copy_dimensions(tmp_path, "science", "tech", "cooking")
    sync_registry(as_admin(pipeline.state), folder)
    (folder / "cooking.yaml").unlink()
    text = (folder / "tech.yaml").read_text().replace("active: true", "active: false")
    (folder / "tech.yaml").write_text(text)
    sync_registry(as_admin(pipeline.state), folder)

    # Closed here: the context enters an instance of its own, whose exit would otherwise run
    # at garbage collection and restore a dead instance's state storage into Dagster's context.
    with dg.build_schedule_context(
        instance=pipeline.instance,
        resources={"state": pipeline.resources["state"]},
        scheduled_execution_time=datetime(2026, 11, 29, 10, tzinfo=UTC),
    ) as context:
        requests = daily_content_schedule(context)

    assert [r.partition_key for r in requests] == ["2026-11-29|science"]
    assert requests[0].tags["mdame/partition"] == "2026-11-29_science"


def test_malformed_feed_fails_that_dimension_only(pipeline, tmp_path):
    folder = copy_dimensions(tmp_path, "science")
    bad_feed = tmp_path / "broken.xml"
    bad_feed.write_text("<rss><channel><item><title>half a feed")
    (folder / "broken.yaml").write_text(
        (DIMENSIONS_DIR / "tech.yaml")
        .read_text()
        .replace("slug: tech", "slug: broken")
        .replace("feeds/tech.xml", str(bad_feed))
    )
    pipeline.sync(folder)

    bad = dg.materialize(
        CONTENT,
        partition_key=str(partition_key(DAY, "broken")),
        instance=pipeline.instance,
        resources=pipeline.resources,
        raise_on_error=False,
    )
    good = dg.materialize(
        CONTENT,
        partition_key=str(partition_key(DAY, "science")),
        instance=pipeline.instance,
        resources=pipeline.resources,
        raise_on_error=False,
    )

    assert not bad.success
    [failure] = [e for e in bad.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failure.step_key == "trends"
    assert str(bad_feed) in str(failure.event_specific_data.error)
    assert good.success
    assert pipeline.state.list_work_units("script", state="planned")


def test_hop_sensors_request_the_next_location_from_database_state(pipeline):
    pipeline.sync()
    key = str(partition_key(DAY, "cooking"))
    context = dg.build_sensor_context(
        instance=pipeline.instance, resources={"state": pipeline.resources["state"]}
    )
    scene_jobs_sensor, publishing_sensor = make_scene_jobs_sensor(), make_publishing_sensor()
    assert scene_jobs_sensor(context).run_requests == []

    assert dg.materialize(
        CONTENT, partition_key=key, instance=pipeline.instance, resources=pipeline.resources
    ).success

    [clips] = scene_jobs_sensor(context).run_requests
    assert clips.partition_key == key
    assert publishing_sensor(context).run_requests == []

    assert dg.materialize(
        [scene_clips], partition_key=key, instance=pipeline.instance, resources=pipeline.resources
    ).success

    assert scene_jobs_sensor(context).run_requests == []
    [publish] = publishing_sensor(context).run_requests
    assert publish.partition_key == key
    # The same database state asks for the same run: the run_key dedupes repeated ticks.
    assert publishing_sensor(context).run_requests[0].run_key == publish.run_key


def test_the_gpu_hop_creates_the_gpu_pool_before_its_first_runs_claim_it(pipeline):
    """Dagster creates a pool's limit on its first claim, and two runs claiming it for the first
    time at once race on that insert; the sensor that launches them creates it first."""
    with dg.instance_for_test(overrides={"concurrency": {"pools": {"default_limit": 1}}}) as fresh:
        assert GPU_POOL not in fresh.event_log_storage.get_concurrency_keys()
        context = dg.build_sensor_context(
            instance=fresh, resources={"state": pipeline.resources["state"]}
        )
        scene_jobs_sensor = make_scene_jobs_sensor()
        scene_jobs_sensor(context)
        [limit] = fresh.event_log_storage.get_pool_limits()
        assert (limit.name, limit.limit, limit.from_default) == (GPU_POOL, 1, True)

        scene_jobs_sensor(context)  # a later tick leaves it as it is
        assert fresh.event_log_storage.get_pool_limits() == [limit]


class BrokenGpu(VisualsResource):
    """A visuals provider whose every generation fails, like a GPU host with a broken driver."""

    def generate(self, scene_hash, prompt, palette, duration_s, out, engine=None):
        raise RuntimeError("CUDA error: no kernel image is available")


def test_scene_jobs_that_keep_failing_fail_their_script_instead_of_waiting(pipeline):
    pipeline.sync()
    key = str(partition_key(DAY, "science"))
    assert dg.materialize(
        CONTENT, partition_key=key, instance=pipeline.instance, resources=pipeline.resources
    ).success
    resources = {**pipeline.resources, "visuals": BrokenGpu()}

    first, second = (
        dg.materialize(
            [scene_clips],
            partition_key=key,
            instance=pipeline.instance,
            resources=resources,
            raise_on_error=False,
        )
        for _ in range(2)
    )

    assert not first.success
    [script] = pipeline.state.list_work_units("script")
    assert script.state == "failed"
    # Each job used its 3 attempts, then stopped for good; the failed script is terminal, so
    # the next run has nothing left to wait for.
    assert set(pipeline.state.count_jobs("scene_clip")) == {"dead"}
    assert second.success
