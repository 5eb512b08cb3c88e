"""Media that vanished or rotted heals: a scene-cache entry whose file is missing or altered is
invalidated with an event, and the scene is generated again, instead of every rerun trusting it
(and failing the clips check) for good."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_fencing import hold

from mdame_core.state import InvalidInput, StateError, StateStore
from mdame_domain.media_store import LocalMediaStore, MediaProblem, sha256_file
from mdame_pipeline.clip_worker import make_scene_clip
from mdame_pipeline.scene_cache import SCENE_JOB_TYPE, cached_clip
from mdame_resources.providers.visuals import ProceduralVisuals
from tests.adminkit import as_admin

DAY = "2026-11-29"
KEY = f"{DAY}|tech"
DECISION = {"verdict": "allow", "rule": "ok", "reasons": [], "classifier": "rules"}


def _approved_script(w: StateStore, name: str) -> int:
    dim = as_admin(w).upsert_dimension("tech", "Tech")
    base = {"dimension_id": dim, "partition_date": DAY}
    [trend] = w.record_trends("tech", [{"key": f"tr-{name}", "payload": {**base, "title": name}}])
    topic = w.decide_topic(f"to-{name}", {**base, "trend_id": trend}, DECISION)
    return w.record_script(f"sc-{name}", {**base, "topic_id": topic}, DECISION)


def _plan(w: StateStore, store: LocalMediaStore, script: int, scene_hash: str) -> int:
    """scene_plan's phase for one scene: a verified cache hit is ready, else a job is queued."""
    cached = cached_clip(w, store, scene_hash)
    scene = {
        "key": f"scene-{script}",
        "payload": {"script_id": script, "scene_index": 0, "scene_hash": scene_hash},
        "cached": {"uri": cached.uri, "sha256": cached.content_sha256} if cached else None,
        "job": {"scene_hash": scene_hash, "prompt": "p", "palette": ["#112233"], "duration_s": 1},
    }
    return w.plan_scenes(script, [scene], SCENE_JOB_TYPE, 3, KEY)


def _work(w: StateStore, store: LocalMediaStore, scratch: Path) -> None:
    """What each queued scene's scene_clip step does."""
    for scene in w.list_work_units("scene", state="queued"):
        make_scene_clip(w, scene.id, ProceduralVisuals(), store, scratch)


@pytest.mark.parametrize("damage", ["deleted", "rotted"])
def test_a_damaged_cached_clip_is_invalidated_and_generated_again(
    state, owner, tmp_path: Path, damage: str
) -> None:
    w = hold(state, "tech")
    store = LocalMediaStore(tmp_path / "media")
    first = _approved_script(w, "a")
    assert _plan(w, store, first, "hash-1") == 1  # a miss: queued
    _work(w, store, tmp_path)
    entry = w.lookup_scene_cache("hash-1")
    path = store.path_for(entry.uri)
    assert sha256_file(path) == entry.content_sha256

    if damage == "deleted":
        path.unlink()
    else:
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(MediaProblem):
        store.verified_path(entry.uri, entry.content_sha256)  # reads verify the bytes

    # The next script with the same scene does not trust the entry: dropped with an event ...
    second = _approved_script(w, "b")
    assert _plan(w, store, second, "hash-1") == 1  # a miss again, not a broken hit
    assert w.lookup_scene_cache("hash-1") is None
    [(detail,)] = owner.execute(
        "SELECT detail FROM mdame.events WHERE subject_kind = 'scene_cache' "
        "AND event = 'invalidated'"
    ).fetchall()
    assert detail["uri"] == entry.uri and ("missing" in detail["reason"]) == (damage == "deleted")
    # ... and the scene is generated again: the new clip is intact and the script moves on.
    _work(w, store, tmp_path)
    again = w.lookup_scene_cache("hash-1")
    assert store.problem(again.uri, again.content_sha256) is None
    assert w.finish_visuals(second) == "visuals_ready"
    [scene] = w.list_work_units("scene", script_id=second)
    assert scene.result["sha256"] == again.content_sha256


def test_a_gpu_worker_drops_a_damaged_entry_of_its_own_scene_under_its_job_lease(
    state, owner, tmp_path: Path
) -> None:
    """The worker holds no pipeline lock, only its job's lease: that is what lets it drop the
    entry it found damaged, and only its own scene's."""
    w = hold(state, "tech")
    store = LocalMediaStore(tmp_path / "media")
    script = _approved_script(w, "a")
    assert _plan(w, store, script, "hash-2") == 1  # a miss: a job is queued
    # Meanwhile another worker cached the scene, and its file rotted.
    rotten = tmp_path / "rotten.mp4"
    rotten.write_bytes(b"not the clip that was hashed")
    stored = store.put_file(rotten, ".mp4")
    as_admin(state).put_scene_cache("hash-2", stored.uri, "0" * 64, 3600)

    [scene] = state.list_work_units("scene", state="queued")
    make_scene_clip(state, scene.id, ProceduralVisuals(), store, tmp_path)  # unfenced, as GPUs run

    [(detail,)] = owner.execute(
        "SELECT detail FROM mdame.events WHERE subject_kind = 'scene_cache' "
        "AND event = 'invalidated'"
    ).fetchall()
    assert detail["uri"] == stored.uri
    again = state.lookup_scene_cache("hash-2")
    assert again is not None and store.problem(again.uri, again.content_sha256) is None


def test_a_job_lease_drops_no_other_scenes_entry(state, tmp_path: Path) -> None:
    w = hold(state, "tech")
    store = LocalMediaStore(tmp_path / "media")
    _plan(w, store, _approved_script(w, "a"), "hash-3")
    [scene] = state.list_work_units("scene", state="queued")
    claim = state.claim_scene_job(scene.idempotency_key, "gpu-1", 60)
    assert claim.job is not None
    as_admin(state).put_scene_cache("hash-4", "file:///elsewhere.mp4", "1" * 64, 3600)
    with pytest.raises(InvalidInput, match="makes scene 'hash-3', not 'hash-4'"):
        state.invalidate_scene_cache("hash-4", "file:///elsewhere.mp4", "why", claim.job)
    with pytest.raises(StateError, match="permission denied"):  # no lease, no lock: refused
        state.invalidate_scene_cache("hash-4", "file:///elsewhere.mp4", "why")
    assert state.lookup_scene_cache("hash-4") is not None
