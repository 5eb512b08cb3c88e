"""A GPU worker killed mid-scene: while it lives it keeps its generation lease (heartbeats), so
the partition's scene_clips run neither steals nor duplicates that scene (its scene step waits
and is retried); once the worker is SIGKILLed its lease expires, the scene's step takes the job
over and finishes it, and the scene cache holds one entry per scene, pointing at a clip that
exists.

The scenes are planned as scene_plan plans them (plan_scenes: scenes, their jobs carrying the
partition key, and the script planned, in one phase). The killed worker runs one scene's
scene_clip step body (make_scene_clip) in another process, as a Celery worker on another host
would; the run that takes over is the real scene_clips graph, one step per scene."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from faultkit import (
    DIMENSION,
    KEY,
    kill9,
    rows,
    seed_script,
    seeding,
    start_blocked_worker,
    wait_for,
)

from mdame_assets.gpu_defs.clips.assets import scene_clips
from mdame_core.state import StateStore
from mdame_domain.idempotency import content_hash
from mdame_domain.media_store import LocalMediaStore, sha256_file
from mdame_pipeline.clip_worker import LEASE_ENV, worker_id
from mdame_pipeline.scene_cache import SCENE_JOB_TYPE
from mdame_resources.state import close_clients
from mdame_runtime.partition_keys import DIMENSION_PARTITION, PartitionRef
from tests.childenv import child_environ
from tests.snapshots import offline_resources

LEASE_S = 2
PALETTE = ["#1b5e20", "#aeea00", "#004d40"]


def queue_scenes(state: StateStore, dimension_id: int, n: int, name: str = "gpu") -> list[dict]:
    """A planned script with n queued scenes and their jobs, as scene_plan leaves them
    (scene_plan's checks want 5 to 10 scenes)."""
    return queue_scenes_with(state, dimension_id, [f"{name}-scene-{i}" for i in range(n)], name)


def queue_scenes_with(
    state: StateStore, dimension_id: int, prompts: list[str], name: str = "gpu"
) -> list[dict]:
    """Like queue_scenes, one scene per prompt; equal prompts make equal scene hashes."""
    hashes = [content_hash(f"fault-scene-{prompt}") for prompt in prompts]
    with seeding(state) as w:
        script = seed_script(w, dimension_id, name, "approved")
        scenes = [
            {
                "key": f"scene:{name}:{index}",
                "payload": {"script_id": script, "scene_index": index, "scene_hash": scene_hash},
                "cached": None,
                "job": {
                    "scene_hash": scene_hash,
                    "prompt": prompt,
                    "palette": PALETTE,
                    "duration_s": 1.0,
                },
            }
            for index, (prompt, scene_hash) in enumerate(zip(prompts, hashes, strict=True))
        ]
        assert w.plan_scenes(script, scenes, SCENE_JOB_TYPE, 3, KEY) == len(prompts)
    queued = []
    for index, scene_hash in enumerate(hashes):
        scene = state.get_work_unit("scene", f"scene:{name}:{index}")
        [(job, partition)] = rows(
            state.url,
            "SELECT id, partition_key FROM mdame.jobs WHERE idempotency_key = %s",
            (scene.idempotency_key,),
        )
        assert (scene.state, partition) == ("queued", KEY)
        queued.append({"scene": scene.id, "job": job, "hash": scene_hash, "script": script})
    return queued


@dataclass
class Gpu:
    state: StateStore
    instance: dg.DagsterInstance
    resources: dict[str, Any]
    home: Path


@pytest.fixture
def pipeline(fresh_synced, tmp_path: Path, monkeypatch) -> Iterator[Gpu]:
    """The registry synced, a home of its own, a Dagster instance knowing the partition."""
    monkeypatch.setenv("MDAME_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MDAME_MEDIA_ROOT", raising=False)
    state = StateStore(fresh_synced.app, env="dev")
    try:
        with dg.instance_for_test() as instance:
            instance.add_dynamic_partitions(DIMENSION_PARTITION, [DIMENSION])
            yield Gpu(state, instance, offline_resources(fresh_synced.app), tmp_path / "home")
    finally:
        close_clients()
        state.close()


def test_killed_worker_loses_its_scene_only_when_dead_and_the_run_takes_it_over(
    pipeline, fresh_synced, tmp_path: Path, monkeypatch
):
    monkeypatch.setenv(LEASE_ENV, str(LEASE_S))
    fresh_db = fresh_synced
    dim = pipeline.state.get_dimension(DIMENSION).id
    scenes = queue_scenes(pipeline.state, dim, 5)
    held = scenes[0]
    media, scratch, marker = pipeline.home / "media", tmp_path / "scratch", tmp_path / "claimed"
    scratch.mkdir()
    env = child_environ()
    env.update(ENV="dev", **{LEASE_ENV: str(LEASE_S)})
    hung = start_blocked_worker(
        env, fresh_db.app, str(media), str(scratch), str(marker), str(held["scene"])
    )
    result: dict = {}
    finished = threading.Event()

    def run() -> None:
        try:
            result["run"] = dg.materialize(
                [scene_clips],
                partition_key=str(PartitionRef.parse(KEY).key),
                instance=pipeline.instance,
                resources=pipeline.resources,
                raise_on_error=False,
            )
        finally:
            finished.set()

    try:
        wait_for("the hanging worker to claim its scene", marker.exists, timeout=60)
        hung_id = pipeline.state.get_job(held["job"]).lease_owner
        assert hung_id and hung_id.endswith(f":{hung.pid}")

        threading.Thread(target=run, daemon=True).start()
        # The run makes the other scenes, but not the one a live worker holds.
        wait_for(
            "the run to make the free scenes",
            lambda: all(pipeline.state.get_job(s["job"]).state == "succeeded" for s in scenes[1:]),
            timeout=120,
        )
        time.sleep(3 * LEASE_S)  # three leases long: only its heartbeats keep it the scene
        job = pipeline.state.get_job(held["job"])
        assert (job.state, job.lease_owner, job.attempt) == ("running", hung_id, 1)
        assert not finished.is_set()

        killed_at = time.monotonic()
        kill9(hung)
        assert finished.wait(120), "the run did not take the orphaned scene over"
        took = time.monotonic() - killed_at
    finally:
        if hung.poll() is None:
            kill9(hung)

    outcome = result["run"]
    assert outcome.success
    assert took < 30
    job = pipeline.state.get_job(held["job"])
    assert (job.state, job.attempt, job.lease_owner) == ("succeeded", 2, worker_id())
    expired = [
        e for e in pipeline.state.list_events("job", held["job"]) if e.event == "lease_expired"
    ]
    assert [e.detail["worker_id"] for e in expired] == [hung_id]
    # The held scene's step was sent round again while the worker lived, then made the clip.
    step = f"scene_clips.scene_clip[scene_{held['scene']}]"
    retried = [e for e in outcome.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    assert {e.step_key for e in retried} == {step}
    [event] = outcome.get_asset_materialization_events()
    meta = {k: v.value for k, v in event.materialization.metadata.items()}
    assert (meta["generated"], meta["cache_hits"], meta["failed"]) == (5, 0, 0)
    # One cache entry per scene; the orphaned scene's points at the clip it was marked with.
    cache = dict(rows(fresh_db.app, "SELECT scene_hash, content_sha256 FROM mdame.scene_cache"))
    assert len(cache) == 5 and held["hash"] in cache
    scene = pipeline.state.get_work_unit("scene", held["scene"])
    assert scene.state == "ready" and scene.result["sha256"] == cache[held["hash"]]
    assert scene.result["worker"] == worker_id()
    clip = LocalMediaStore(media).path_for(scene.result["uri"])
    assert sha256_file(clip) == cache[held["hash"]]
    assert len(list(media.rglob("*.mp4"))) == 5  # nothing half-made left by the killed one
    [script] = pipeline.state.list_work_units("script", dimension_id=dim)
    assert script.state == "visuals_ready"
