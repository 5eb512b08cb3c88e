"""scene_clips fans out one Dagster step per scene (`scene_clips.scene_clip[scene_<id>]`), each
claiming its own scene's job under the generation lease; on the in-process executor and on the
multiprocess one, where every scene step is a process of its own (as on Celery or k8s, only
scene ids travel between steps).

The scenes are planned through plan_scenes, as scene_plan plans them; the other host of the
scene_hash test claims and completes through the same RPCs a scene step uses."""

from __future__ import annotations

import os
import threading
import time
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster._core.definitions.dependency import NodeHandle

from mdame_assets import gpu
from mdame_assets.gpu_defs.clips.assets import scene_clip, scene_clips
from mdame_assets.jobs import SCENE_CLIPS_JOB, transient_retry
from mdame_core.state import StateStore
from mdame_domain.idempotency import content_hash
from mdame_pipeline.clip_worker import LEASE_ENV, WORKER_NAME_ENV, _LeaseKeeper, worker_id
from mdame_pipeline.lifecycle import script_states
from mdame_pipeline.locks import held_lock
from mdame_pipeline.scene_cache import CACHE_TTL_S, SCENE_JOB_TYPE
from mdame_resources.media import MediaStoreResource
from mdame_resources.providers.selection import picture_engines
from mdame_resources.providers.visuals import ProceduralVisuals
from mdame_resources.state import StateStoreResource
from mdame_runtime.executors import EXECUTOR_ENV, GPU_POOL, GPU_STEP_TAGS, gpu_executor
from mdame_runtime.partition_keys import partition_key

DAY = date(2026, 11, 29)
DIMENSION = "science"
KEY = str(partition_key(DAY, DIMENSION))
PALETTE = ["#0d47a1", "#42a5f5", "#e3f2fd"]
DB_ENV, CALLS_ENV = "FANOUT_TEST_APP_URL", "FANOUT_TEST_CALLS"


class CountingVisuals(ProceduralVisuals):
    """The procedural clips, each generation also noted in a file (shared across processes)."""

    calls: str

    def generate(
        self,
        scene_hash: str,
        prompt: str,
        palette,
        duration_s: float,
        out: Path,
        engine: str | None = None,
    ) -> Path:
        with open(self.calls, "a", encoding="utf-8") as log:
            log.write(f"{scene_hash} {worker_id()}\n")
        return super().generate(scene_hash, prompt, palette, duration_s, out, engine)


def generations(calls: Path) -> list[tuple[str, str]]:
    if not calls.exists():
        return []
    return [tuple(line.split(" ", 1)) for line in calls.read_text().splitlines()]  # type: ignore[misc]


def plan_script(state: StateStore, day: date, name: str, prompts: list[str]) -> list[int]:
    """An approved script of `day` planned into one queued scene per prompt (equal prompts:
    equal scene hashes); the scene ids."""
    dim = state.get_dimension(DIMENSION).id
    base = {"dimension_id": dim, "partition_date": day.isoformat()}
    key = str(partition_key(day, DIMENSION))
    with held_lock(state, DIMENSION, f"seed:{os.getpid()}") as w:
        topic = w.upsert_work_unit("topic", f"topic:{name}", {**base, "title": name})
        script = w.upsert_work_unit("script", f"script:{name}", {**base, "topic_id": topic})
        path = script_states(w, "drafted", "approved")
        for src, dst in zip(path, path[1:], strict=False):
            w.transition("script", script, src, dst)
        scenes = []
        for index, prompt in enumerate(prompts):
            scene_hash = content_hash(f"fanout:{prompt}")
            scenes.append(
                {
                    "key": f"scene:{name}:{index}",
                    "payload": {
                        "script_id": script,
                        "scene_index": index,
                        "scene_hash": scene_hash,
                    },
                    "cached": None,
                    "job": {
                        "scene_hash": scene_hash,
                        "prompt": prompt,
                        "palette": PALETTE,
                        "duration_s": 1.0,
                    },
                }
            )
        assert w.plan_scenes(script, scenes, SCENE_JOB_TYPE, 3, key) == len(prompts)
    return [state.get_work_unit("scene", s["key"]).id for s in scenes]


def step_keys(result: Any) -> set[str]:
    return {e.step_key for e in result.all_events if e.is_step_success}


def expected_steps(scene_ids: list[int]) -> set[str]:
    return {
        "scene_clips.scenes_to_clip",
        "scene_clips.scene_clips_done",
        *(f"scene_clips.scene_clip[scene_{i}]" for i in scene_ids),
    }


def metadata(result: Any) -> dict[str, Any]:
    [event] = result.get_asset_materialization_events()
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_the_scene_step_is_a_gpu_step() -> None:
    assert scene_clip.tags["dagster-celery/queue"] == GPU_STEP_TAGS["dagster-celery/queue"]
    assert "dagster-k8s/config" in scene_clip.tags
    assert scene_clip.pool == GPU_POOL
    # Its transient failures are retried under its job's policy, which applies to every step
    # without a policy of its own (the policy is a setting, read as the location loads).
    assert scene_clip.retry_policy is None
    job = gpu.defs().resolve_job_def(SCENE_CLIPS_JOB)
    for op in ("scenes_to_clip", "scene_clip", "scene_clips_done"):
        handle = NodeHandle(op, parent=NodeHandle("scene_clips", parent=None))
        assert job.get_retry_policy_for_handle(handle) == transient_retry()


def test_a_scene_hash_held_by_a_live_worker_is_waited_for_and_then_a_cache_hit(
    pipeline, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv(LEASE_ENV, "30")
    pipeline.sync()
    ids = plan_script(pipeline.state, DAY, "today", ["repeat", "b", "c", "d", "e"])
    # Another partition (yesterday) plans the same scene: same prompt, same scene_hash.
    [theirs] = plan_script(pipeline.state, date(2026, 11, 28), "yesterday", ["repeat"])
    calls = tmp_path / "calls"
    visuals = CountingVisuals(calls=str(calls))

    # A GPU worker on another host claims yesterday's scene first, and takes its time.
    other = "gpu-host-2:4242"
    key = pipeline.state.get_work_unit("scene", theirs).idempotency_key
    claim = pipeline.state.claim_scene_job(key, other, 3)
    assert claim.outcome == "claimed"

    def other_host() -> None:
        with _LeaseKeeper(pipeline.state, claim.job, other, 3):
            time.sleep(6)  # two leases long: alive, so its heartbeats keep the scene_hash
            out = tmp_path / "other.mp4"
            visuals.generate(claim.payload["scene_hash"], "repeat", PALETTE, 1.0, out)
            stored = MediaStoreResource().store().put_file(out, ".mp4")
            pipeline.state.complete_scene_job(
                claim.job, stored.uri, stored.sha256, False, CACHE_TTL_S
            )

    worker = threading.Thread(target=other_host, daemon=True)
    worker.start()
    result = dg.materialize(
        [scene_clips],
        partition_key=KEY,
        instance=pipeline.instance,
        resources={**pipeline.resources, "visuals": visuals},
    )
    worker.join(30)

    assert result.success
    assert step_keys(result) == expected_steps(ids)
    repeat = f"scene_clips.scene_clip[scene_{ids[0]}]"
    retried = [e.step_key for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    assert retried and set(retried) == {repeat}
    # Exactly one generation of the shared scene_hash: the other host's.
    made = generations(calls)
    assert [h for h, _ in made].count(claim.payload["scene_hash"]) == 1
    assert len(made) == 5
    scene = pipeline.state.get_work_unit("scene", ids[0])
    assert scene.state == "ready" and scene.result["cached"] is True
    assert scene.result["uri"] == pipeline.state.get_work_unit("scene", theirs).result["uri"]
    meta = metadata(result)
    assert (meta["generated"], meta["cache_hits"], meta["failed"], meta["scripts_ready"]) == (
        4,
        1,
        0,
        1,
    )


# -- the multiprocess executor -------------------------------------------------------------
def multiprocess_scene_clips_job() -> dg.JobDefinition:
    """scene_clips on the executor MDAME_GPU_EXECUTOR names, rebuilt in every step process."""
    job = dg.define_asset_job(
        "scene_clips_mp", selection=[scene_clips.key], executor_def=gpu_executor()
    )
    defs = dg.Definitions(
        assets=[scene_clips],
        jobs=[job],
        resources={
            "state": StateStoreResource(database_url=os.environ[DB_ENV]),
            "media": MediaStoreResource(),
            "visuals": CountingVisuals(calls=os.environ[CALLS_ENV]),
            **picture_engines(""),  # the chain's engines; this offline chain never calls them
        },
    )
    return defs.resolve_job_def("scene_clips_mp")


@pytest.mark.slow
def test_the_multiprocess_executor_runs_each_scene_step_in_a_process_of_its_own(
    pipeline, fresh_db, tmp_path: Path, monkeypatch
) -> None:
    pipeline.sync()
    ids = plan_script(pipeline.state, DAY, "today", ["one", "two", "three", "four", "five"])
    calls = tmp_path / "calls"
    monkeypatch.setenv(EXECUTOR_ENV, "multiprocess")
    monkeypatch.setenv(WORKER_NAME_ENV, "mp")
    monkeypatch.setenv(DB_ENV, fresh_db.app)
    monkeypatch.setenv(CALLS_ENV, str(calls))
    assert gpu_executor() is dg.multiprocess_executor

    result = dg.execute_job(
        dg.reconstructable(multiprocess_scene_clips_job),
        instance=pipeline.instance,
        tags={
            "dagster/partition": KEY,
            "dagster/partition/date": DAY.isoformat(),
            "dagster/partition/dimension": DIMENSION,
        },
    )

    assert result.success
    assert step_keys(result) == expected_steps(ids)
    made = generations(calls)
    assert len(made) == 5 and len({w for _, w in made}) == 5  # five processes, one clip each
    workers = {pipeline.state.get_work_unit("scene", i).result["worker"] for i in ids}
    assert workers == {w for _, w in made}
    assert all(w.split(":")[1] == "mp" and w.split(":")[2] != str(os.getpid()) for w in workers)
    meta = metadata(result)
    assert (meta["generated"], meta["scripts_ready"]) == (5, 1)
    [script] = pipeline.state.list_work_units("script", state="visuals_ready")
    assert script.payload["partition_date"] == DAY.isoformat()
