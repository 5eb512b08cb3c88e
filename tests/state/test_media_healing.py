"""Media that vanished or rotted heals: a scene-cache entry whose file is missing or altered is
invalidated with an event, and the scene is generated again, instead of every rerun trusting it
(and failing the clips check) for good."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_fencing import hold

from mdame_assets.defs.clips.cache import SCENE_JOB_TYPE, cached_clip
from mdame_assets.defs.clips.worker import make_scene_clip
from mdame_core.state import StateStore
from mdame_domain.media_store import LocalMediaStore, MediaProblem, sha256_file
from mdame_resources.providers.visuals import ProceduralVisuals

DAY = "2026-11-29"
KEY = f"{DAY}|tech"
DECISION = {"verdict": "allow", "rule": "ok", "reasons": [], "classifier": "rules"}


def _approved_script(w: StateStore, name: str) -> int:
    dim = w.upsert_dimension("tech", "Tech")
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
