"""A GPU worker killed mid-job: while it lives it keeps its lease (heartbeats); once SIGKILLed
the lease expires, another worker reaps and finishes the job, and the scene cache holds one
entry per scene, pointing at a clip that exists.

The scenes are planned as scene_plan plans them (plan_scenes: scenes, their jobs carrying the
partition key, and the script planned, in one phase). The killed worker is a standalone one
(it claims any partition's jobs); the one that takes over claims only this partition's, as the
scene_clips step does, and finishes each job with complete_scene_job (cache entry, scene ready
and job succeeded, together)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from faultkit import (
    KEY,
    kill9,
    rows,
    seed_dimension,
    seed_script,
    seeding,
    start_blocked_worker,
    wait_for,
)

from mdame_assets.defs.clips.worker import LEASE_ENV, SCENE_JOB_TYPE, run_worker, worker_id
from mdame_core.state import StateStore
from mdame_domain.idempotency import content_hash
from mdame_domain.media_store import LocalMediaStore, sha256_file
from mdame_resources.providers.visuals import ProceduralVisuals

LEASE_S = 2
PALETTE = ["#1b5e20", "#aeea00", "#004d40"]


def _queue_scenes(state: StateStore, dimension_id: int, n: int) -> list[tuple[int, int, str]]:
    """A planned script with n queued scenes and their jobs, as scene_plan leaves them."""
    hashes = [content_hash(f"fault-scene-{index}") for index in range(n)]
    with seeding(state) as w:
        script = seed_script(w, dimension_id, "gpu", "approved")
        scenes = [
            {
                "key": f"scene:gpu:{index}",
                "payload": {"script_id": script, "scene_index": index, "scene_hash": scene_hash},
                "cached": None,
                "job": {
                    "scene_hash": scene_hash,
                    "prompt": f"scene {index}",
                    "palette": PALETTE,
                    "duration_s": 1.0,
                },
            }
            for index, scene_hash in enumerate(hashes)
        ]
        assert w.plan_scenes(script, scenes, SCENE_JOB_TYPE, 3, KEY) == n
    queued = []
    for index, scene_hash in enumerate(hashes):
        scene = state.get_work_unit("scene", f"scene:gpu:{index}")
        [(job, partition)] = rows(
            state.url,
            "SELECT id, partition_key FROM mdame.jobs WHERE idempotency_key = %s",
            (scene.idempotency_key,),
        )
        assert (scene.state, partition) == ("queued", KEY)
        queued.append((scene.id, job, scene_hash))
    return queued


def test_killed_worker_loses_its_job_only_when_dead_and_another_finishes_it(
    state, fresh_db, tmp_path: Path, monkeypatch
):
    monkeypatch.setenv(LEASE_ENV, str(LEASE_S))
    dim, _ = seed_dimension(state)
    (scene_a, job_a, hash_a), (scene_b, job_b, _) = _queue_scenes(state, dim, 2)
    media, scratch, marker = tmp_path / "media", tmp_path / "scratch", tmp_path / "claimed"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDAME_")}
    env.update(ENV="dev", **{LEASE_ENV: str(LEASE_S)})
    hung = start_blocked_worker(env, fresh_db.app, str(media), str(scratch), str(marker))
    try:
        wait_for("the first worker to claim a job", marker.exists, timeout=60)
        hung_id = state.get_job(job_a).lease_owner
        assert hung_id and hung_id.endswith(f":{hung.pid}")

        # Another worker starts: it takes the other job, but not the one a live worker holds.
        stats: dict = {}
        finished = threading.Event()

        def second_worker() -> None:
            try:
                with StateStore(fresh_db.app, env="dev", pool_max=2) as mine:
                    stats["stats"] = run_worker(
                        mine,
                        ProceduralVisuals(),
                        LocalMediaStore(media),
                        scratch,
                        done=lambda: state.count_jobs(SCENE_JOB_TYPE) == {"succeeded": 2},
                        idle_wait_s=0.2,
                        partition_key=KEY,  # this partition's jobs only, as scene_clips claims
                    )
            except Exception as exc:  # reported below
                stats["error"] = exc
            finally:
                finished.set()

        other = threading.Thread(target=second_worker, daemon=True)
        other.start()
        wait_for(
            "the second worker to finish the free job",
            lambda: state.get_job(job_b).state == "succeeded",
            timeout=60,
        )
        time.sleep(3 * LEASE_S)  # three leases long: only its heartbeats keep it the job
        held = state.get_job(job_a)
        assert (held.state, held.lease_owner, held.attempt) == ("running", hung_id, 1)

        killed_at = time.monotonic()
        kill9(hung)
        assert finished.wait(60), "the second worker did not finish the orphaned job"
        took = time.monotonic() - killed_at
    finally:
        if hung.poll() is None:
            kill9(hung)
    other.join(10)

    assert "error" not in stats, stats.get("error")
    assert took < 30
    job = state.get_job(job_a)
    assert (job.state, job.attempt, job.lease_owner) == ("succeeded", 2, worker_id())
    expired = [e for e in state.list_events("job", job_a) if e.event == "lease_expired"]
    assert [e.detail["worker_id"] for e in expired] == [hung_id]
    assert stats["stats"].as_metadata() == {"generated": 2, "cache_hits": 0, "failed": 0}
    # One cache entry per scene; the orphaned scene's points at the clip it was marked with.
    cache = dict(rows(fresh_db.app, "SELECT scene_hash, content_sha256 FROM mdame.scene_cache"))
    assert len(cache) == 2 and hash_a in cache
    scene = state.get_work_unit("scene", scene_a)
    assert scene.state == "ready" and scene.result["sha256"] == cache[hash_a]
    clip = LocalMediaStore(media).path_for(scene.result["uri"])
    assert sha256_file(clip) == cache[hash_a]
    assert len(list(media.rglob("*.mp4"))) == 2  # nothing half-made left by the killed one
    assert state.get_work_unit("scene", scene_b).state == "ready"
